#!/usr/bin/env bash
# Builds kura's image from a binary already built on this machine, without
# pulling anything (for machines that cannot reach a registry): the binary
# and the shared libraries it loads, on an empty base.
#
#   packaging/container/build-local.sh [BINARY] [TAG]     (defaults: target/release/kura, kura:local)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${1:-$root/target/release/kura}"
tag="${2:-kura:local}"
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
install -D -m 0755 "$bin" "$ctx/rootfs/usr/bin/kura"
strip --strip-debug "$ctx/rootfs/usr/bin/kura"
for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
    install -D "$lib" "$ctx/rootfs$lib"
done
install -d -m 0755 "$ctx/rootfs/var/lib/kura" "$ctx/rootfs/tmp"
cat >"$ctx/Containerfile" <<'CONTAINERFILE'
FROM scratch
COPY rootfs/ /
USER 65532:65532
VOLUME ["/var/lib/kura"]
EXPOSE 11211 11311 6081 9150
HEALTHCHECK --interval=30s --timeout=5s --retries=3 \
    CMD ["/usr/bin/kura", "bench", "--server", "127.0.0.1:11211", "--requests", "1", "--connections", "1", "--threads", "1"]
ENTRYPOINT ["/usr/bin/kura", "--log-format", "json"]
CMD ["server", "-l", "0.0.0.0", "-p", "11211"]
CONTAINERFILE
podman build -t "$tag" "$ctx" >&2
echo "$tag"
