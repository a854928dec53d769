#!/usr/bin/env bash
# Builds kura's Debian package: the kura binary, the systemd units of kura
# server, kura proxy and kura http, their configuration under /etc/kura, man
# pages and shell completions (made by the binary from its own command-line
# definitions), and the maintainer scripts that add the kura user.
#
#   packaging/build-deb.sh                 release build, then the package in target/debian/
#   packaging/build-deb.sh --binary PATH   package an existing binary (CI packages its test build)
#   packaging/build-deb.sh --out DIR       write the .deb into DIR
#
# Prints the path of the .deb it wrote. Needs dpkg-deb (Debian's dpkg) and gzip.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
binary=""
out="$root/target/debian"
while (($#)); do
    case "$1" in
        --binary) binary="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,12p' "${BASH_SOURCE[0]}"; exit 0 ;;
        *) echo "build-deb.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
if [[ -z "$binary" ]]; then
    (cd "$root" && cargo build --release -p kura >&2)
    binary="$root/target/release/kura"
fi
[[ -x "$binary" ]] || { echo "build-deb.sh: no executable at $binary" >&2; exit 1; }

version="$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -n1)"
arch="$(dpkg --print-architecture)"
# The newest glibc symbol version the binary needs is the libc6 it depends on.
glibc="$(objdump -T "$binary" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -n1)"
depends="libc6 (>= ${glibc:-2.31})"
if objdump -p "$binary" 2>/dev/null | grep -q 'NEEDED *libgcc_s'; then
    depends="$depends, libgcc-s1"
fi

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
pkg="$stage/kura_${version}_${arch}"
install -D -m 0755 "$binary" "$pkg/usr/bin/kura"
strip --strip-debug "$pkg/usr/bin/kura" 2>/dev/null || true
for unit in "$here"/systemd/*.service; do
    install -D -m 0644 "$unit" "$pkg/lib/systemd/system/$(basename "$unit")"
done
for conf in "$here"/etc/*.toml; do
    install -D -m 0644 "$conf" "$pkg/etc/kura/$(basename "$conf")"
done
"$pkg/usr/bin/kura" generate man "$stage/man"
install -d "$pkg/usr/share/man/man1"
for page in "$stage"/man/*.1; do
    gzip -9n <"$page" >"$pkg/usr/share/man/man1/$(basename "$page").gz"
done
"$pkg/usr/bin/kura" generate completions "$stage/completions"
install -D -m 0644 "$stage/completions/kura.bash" "$pkg/usr/share/bash-completion/completions/kura"
install -D -m 0644 "$stage/completions/_kura" "$pkg/usr/share/zsh/vendor-completions/_kura"
install -D -m 0644 "$stage/completions/kura.fish" "$pkg/usr/share/fish/vendor_completions.d/kura.fish"
install -d "$pkg/usr/share/doc/kura"
gzip -9n <"$root/README.md" >"$pkg/usr/share/doc/kura/README.md.gz"
cat >"$pkg/usr/share/doc/kura/copyright" <<COPYRIGHT
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: kura
License: MIT or Apache-2.0

Files: *
Copyright: the kura developers
License: MIT or Apache-2.0
COPYRIGHT

install -d "$pkg/DEBIAN"
size="$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)"
sed -e "s/@VERSION@/$version/" -e "s/@ARCH@/$arch/" -e "s/@SIZE@/$size/" \
    -e "s/@DEPENDS@/$depends/" "$here/debian/control.in" >"$pkg/DEBIAN/control"
(cd "$pkg" && find etc -type f | sed 's#^#/#' | sort) >"$pkg/DEBIAN/conffiles"
install -m 0755 "$here"/debian/postinst "$here"/debian/prerm "$here"/debian/postrm "$pkg/DEBIAN/"

mkdir -p "$out"
deb="$out/kura_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >&2
echo "$deb"
