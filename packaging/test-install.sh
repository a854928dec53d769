#!/usr/bin/env bash
# The package install test (CI runs it as root on a machine like a user's):
#
#   packaging/test-install.sh path/to/kura_VERSION_ARCH.deb
#
# 1. dpkg -i: the files land where the package says, the kura user and its
#    directories exist;
# 2. systemd-analyze verify accepts each unit; man renders each page; each
#    completion script loads in its shell (bash, zsh, fish);
# 3. each component is started exactly as its unit's ExecStart says (same
#    user, same config file, NOTIFY_SOCKET set as systemd sets it), says
#    READY=1, answers a client, survives SIGHUP (RELOADING=1 then READY=1) and
#    stops on SIGTERM;
# 4. dpkg -r keeps the configuration and data; dpkg --purge removes them and
#    the user.
#
# Ports: kura server on 11211, kura proxy on 11311, kura http on 6081 with a
# backend on 127.0.0.1:8080 (the shipped configuration's). They must be free.
set -euo pipefail

deb="$(realpath "$1")"
PYTHON="${PYTHON:-python3}"
work="$(mktemp -d)"
# The services run as the kura user and must reach their notify sockets.
chmod 0755 "$work"
pids=()
cleanup() {
    for p in "${pids[@]}"; do
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT

say() { printf '== %s\n' "$*"; }
fail() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

say "install $deb"
dpkg -i "$deb"
for f in /usr/bin/kura /etc/kura/server.toml /etc/kura/proxy.toml /etc/kura/http.toml \
    /lib/systemd/system/kura-server.service /lib/systemd/system/kura-proxy.service \
    /lib/systemd/system/kura-http.service /lib/systemd/system/kura-memcached.service \
    /usr/share/man/man1/kura-server.1.gz \
    /usr/share/bash-completion/completions/kura /usr/share/zsh/vendor-completions/_kura \
    /usr/share/fish/vendor_completions.d/kura.fish; do
    [[ -e "$f" ]] || fail "$f was not installed"
    dpkg -S "$f" >/dev/null || fail "$f is not the package's"
done
getent passwd kura >/dev/null || fail "no kura user"
[[ "$(stat -c %U /var/lib/kura)" == kura ]] || fail "/var/lib/kura is not the kura user's"
[[ "$(stat -c %U /var/log/kura)" == kura ]] || fail "/var/log/kura is not the kura user's"
kura --version

say "units, man pages, completions"
for unit in kura-server kura-proxy kura-http kura-memcached; do
    systemd-analyze verify "/lib/systemd/system/$unit.service"
done
for page in /usr/share/man/man1/kura*.1.gz; do
    out="$(man -l "$page" 2>&1 >/dev/null)"
    [[ -z "$out" ]] || fail "man $page: $out"
    man -l "$page" | grep -q NAME || fail "man $page has no NAME"
done
bash -c 'source /usr/share/bash-completion/completions/kura && complete -p kura' | grep -q kura ||
    fail "bash completion"
zsh -fc 'autoload -U compinit; compinit -u; fpath=(/usr/share/zsh/vendor-completions $fpath); autoload -U _kura; whence -w _kura' |
    grep -q function || fail "zsh completion"
fish -c 'source /usr/share/fish/vendor_completions.d/kura.fish; complete -C"kura serv"' | grep -q server ||
    fail "fish completion"

# A NOTIFY_SOCKET as systemd makes it: a datagram socket whose messages are
# written to a file, one per line.
notify_listener() {
    local sock="$1" log="$2"
    "$PYTHON" - "$sock" "$log" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
import os
os.chmod(sys.argv[1], 0o777)
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        out.write(s.recv(4096).decode().replace("\n", " ") + "\n")
PY
    pids+=($!)
}

wait_for() {
    local what="$1" cond="$2"
    for _ in $(seq 1 200); do
        if eval "$cond"; then return 0; fi
        sleep 0.1
    done
    fail "$what"
}

# The command a unit's ExecStart runs.
exec_start() { sed -n 's/^ExecStart=//p' "/lib/systemd/system/$1.service"; }

# Starts a unit's command as its User=, with NOTIFY_SOCKET; its pid in $started.
start_unit() {
    local unit="$1" user
    user="$(sed -n 's/^User=//p' "/lib/systemd/system/$unit.service")"
    notify_listener "$work/$unit.sock" "$work/$unit.notify"
    wait_for "$unit's notify socket" "[[ -S $work/$unit.sock ]]"
    read -r -a cmd <<<"$(exec_start "$unit")"
    say "start $unit as $user: ${cmd[*]}"
    setpriv --reuid "$user" --regid "$user" --init-groups \
        env NOTIFY_SOCKET="$work/$unit.sock" "${cmd[@]}" >"$work/$unit.log" 2>&1 &
    started=$!
    pids+=("$started")
    wait_for "$unit said READY=1 (log: $(cat "$work/$unit.log" 2>/dev/null))" \
        "grep -q READY=1 $work/$unit.notify 2>/dev/null"
    [[ "$(ps -o user= -p "$started")" == "$user" ]] || fail "$unit does not run as $user"
}

# SIGHUP: the process stays, says RELOADING=1 then READY=1 again.
reload_unit() {
    local unit="$1" pid="$2"
    kill -HUP "$pid"
    wait_for "$unit reloaded" "grep -q RELOADING=1 $work/$unit.notify && [[ \$(grep -c READY=1 $work/$unit.notify) -ge 2 ]]"
    kill -0 "$pid" || fail "$unit ended on SIGHUP"
}

stop_unit() {
    local unit="$1" pid="$2"
    kill -TERM "$pid"
    wait "$pid" || fail "$unit exited with $? on SIGTERM"
    grep -q STOPPING=1 "$work/$unit.notify" || fail "$unit did not say STOPPING=1"
}

mc() {
    "$PYTHON" - "$1" "$2" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=10)
s.sendall(sys.argv[2].encode().decode("unicode_escape").encode())
buf = b""
while not buf.endswith(b"END\r\n"):
    chunk = s.recv(65536)
    if not chunk:
        break
    buf += chunk
sys.stdout.write(buf.decode())
PY
}

start_unit kura-server
server=$started
mc 11211 'set pkg 0 0 2\r\nok\r\nget pkg\r\n' | grep -q '^ok' || fail "kura server does not serve"
reload_unit kura-server "$server"
mc 11211 'get pkg\r\n' | grep -q '^ok' || fail "kura server lost its cache on SIGHUP"

start_unit kura-proxy
proxy=$started
mc 11311 'get pkg\r\n' | grep -q '^ok' || fail "kura proxy does not reach kura server"
reload_unit kura-proxy "$proxy"
mc 11311 'get pkg\r\n' | grep -q '^ok' || fail "kura proxy after SIGHUP"

say "a backend on 127.0.0.1:8080 for kura http"
mkdir -p "$work/site" && echo "hello from the backend" >"$work/site/index.html"
(cd "$work/site" && exec "$PYTHON" -m http.server 8080 --bind 127.0.0.1 >/dev/null 2>&1) &
pids+=($!)
wait_for "the backend" "curl -fsS http://127.0.0.1:8080/ >/dev/null 2>&1"
start_unit kura-http
http=$started
curl -fsS http://127.0.0.1:6081/index.html | grep -q "hello from the backend" || fail "kura http does not serve"
reload_unit kura-http "$http"
curl -fsS http://127.0.0.1:6081/index.html | grep -q "hello from the backend" || fail "kura http after SIGHUP"

stop_unit kura-http "$http"
stop_unit kura-proxy "$proxy"
stop_unit kura-server "$server"

# kura in memcached's place, with Debian's /etc/memcached.conf as it is
# (the memcached package's; its -P pid file goes to the unit's
# RuntimeDirectory, made here as systemd would).
if [[ -f /etc/memcached.conf ]]; then
    install -d -o kura -g kura /run/memcached
    start_unit kura-memcached
    mc 11211 'set conf 0 0 2\r\nok\r\nget conf\r\n' | grep -q '^ok' || fail "kura-memcached does not serve"
    [[ -f /run/memcached/memcached.pid ]] || fail "no pid file where memcached.conf says"
    stop_unit kura-memcached "$started"
fi

say "dpkg -r keeps configuration and data"
dpkg -r kura
[[ ! -e /usr/bin/kura ]] || fail "/usr/bin/kura left after dpkg -r"
[[ -e /etc/kura/server.toml ]] || fail "dpkg -r removed the configuration"
[[ -d /var/lib/kura ]] || fail "dpkg -r removed the data"
say "dpkg --purge removes them"
dpkg --purge kura
for gone in /etc/kura /var/lib/kura /var/log/kura /lib/systemd/system/kura-server.service; do
    [[ ! -e "$gone" ]] || fail "$gone left after purge"
done
! getent passwd kura >/dev/null || fail "the kura user is left after purge"
say "package install test PASSED"
