#!/usr/bin/env bash
# kura compatibility suite: real third-party memcached clients against `kura server`.
#
#   compat/run.sh                      build kura (release), start it on a free port, run every client
#   compat/run.sh --skip-build         use the already built binary
#   compat/run.sh --against-memcached  run the same suite against Debian's /usr/bin/memcached
#                                      instead (checks the suite itself, not kura)
#   compat/run.sh --through-proxy      the clients talk to `kura proxy` in front of three kura
#                                      servers (with --against-memcached: three memcached);
#                                      SASL, TLS and durable are skipped (not the proxy's)
#
# Environment: PYTHON (default python3), PERL (default perl), KURA_BIN (binary to use;
# implies --skip-build), COMPAT_TIMEOUT (seconds per client, default 300).
#
# Clients (each one a PASS/FAIL line in the summary; exit status 1 if any fails):
#   memccapable      libmemcached-tools' `memccapable -a` (every ASCII test)
#   memccapable-binary  `memccapable -b` (every binary-protocol test)
#   memcaslap        libmemcached-tools' load generator in text mode for 2 s (its keys begin
#                    with control bytes); every get must hit
#   pymemcache       compat/pymemcache_test.py
#   cache-memcached-fast  compat/cache_memcached_fast_test.pl (noreply => 1, 100,000-set burst)
#   pylibmc          compat/pylibmc_test.py (text protocol)
#   pylibmc-binary   compat/pylibmc_test.py --binary
#   dalli            compat/dalli_test.rb (Debian's ruby-dalli 3.0: binary protocol, quiet
#                    multi-ops), and against a second kura started with -S -Y: SASL PLAIN with
#                    the right password, a wrong one and none (kura only: Debian's memcached
#                    needs a Cyrus SASL setup for -S)
#   tls-certs        a CA, server and client certificates made by `openssl req`
#   tls-pymemcache   compat/tls_test.py: pymemcache over TLS (Python's ssl) against a second
#                    kura started with -Z, ssl_verify_mode=2 and a notls: listener beside it
#                    (this and tls-openssl are skipped with --against-memcached:
#                    Debian's memcached is built without TLS)
#   tls-openssl      `openssl s_client` with a client certificate against the same server
#   durable          compat/durable_test.py: pymemcache writes to a third kura started with
#                    --data-dir and --fsync always, which is then killed with SIGKILL and
#                    started again on the same directory; pylibmc reads every key back
#                    (kura only: memcached keeps nothing)
#   server-alive     the server is still running and answering after all of the above
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

PYTHON="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1 # keep a client's output even if it is killed by the timeout
PERL="${PERL:-perl}"
COMPAT_TIMEOUT="${COMPAT_TIMEOUT:-300}"
build=1
target=kura
through_proxy=0
[[ -n "${KURA_BIN:-}" ]] && build=0

usage() { sed -n '2,/^set -euo pipefail/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
while (($#)); do
    case "$1" in
        --skip-build) build=0 ;;
        --against-memcached) target=memcached; build=0 ;;
        --through-proxy) through_proxy=1 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "compat/run.sh: unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

workdir="$(mktemp -d "${TMPDIR:-/tmp}/kura-compat.XXXXXX")"
server_pid=""
backend_pids=()
sasl_pid=""
tls_pid=""
stop_pid() {
    local pid="$1"
    if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
}
cleanup() {
    local rc=$?
    if [[ -n "$sasl_pid" ]]; then
        kill -KILL "$sasl_pid" 2>/dev/null || true
    fi
    stop_pid "$server_pid"
    for p in "${backend_pids[@]}"; do stop_pid "$p"; done
    stop_pid "$tls_pid"
    rm -rf "$workdir"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log() { printf '[compat] %s\n' "$*"; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1fs", b - a }'; }

# ---------------------------------------------------------------- build
if [[ "$target" == kura ]]; then
    if [[ -n "${KURA_BIN:-}" ]]; then
        bin="$KURA_BIN"
    else
        target_dir="$(cargo metadata --format-version 1 --no-deps |
            "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
        bin="$target_dir/release/kura"
        if ((build)); then
            log "building kura (cargo build --release -p kura)"
            t0="$(now)"
            cargo build --release -p kura
            log "built in $(elapsed "$t0")"
        fi
    fi
    [[ -x "$bin" ]] || { echo "compat/run.sh: no kura binary at $bin (build it or drop --skip-build)" >&2; exit 1; }
else
    bin="$(command -v memcached || true)"
    [[ -n "$bin" ]] || { echo "compat/run.sh: memcached not installed" >&2; exit 1; }
fi
kura_bin="${KURA_BIN:-}"
if ((through_proxy)) && [[ -z "$kura_bin" ]]; then
    if [[ "$target" == kura ]]; then
        kura_bin="$bin"
    else
        target_dir="$(cargo metadata --format-version 1 --no-deps |
            "$PYTHON" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')"
        kura_bin="$target_dir/release/kura"
        [[ -x "$kura_bin" ]] || cargo build --release -p kura
    fi
fi

# ---------------------------------------------------------------- server
free_port() {
    "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

port_open() {
    "$PYTHON" -c 'import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5).close()
except OSError:
    sys.exit(1)' "$1"
}

start_server() {
    local tries
    for tries in 1 2 3; do
        port="$(free_port)"
        if [[ "$target" == kura ]]; then
            server_cmd=("$bin" server -p "$port")
        else
            server_cmd=("$bin" -p "$port" -U 0 -l 127.0.0.1)
            [[ "$(id -u)" == 0 ]] && server_cmd+=(-u root)
        fi
        log "starting: ${server_cmd[*]}"
        "${server_cmd[@]}" >"$workdir/server.log" 2>&1 &
        server_pid=$!
        for _ in $(seq 1 100); do
            if ! kill -0 "$server_pid" 2>/dev/null; then
                break
            fi
            if port_open "$port"; then
                log "$target is up on 127.0.0.1:$port (pid $server_pid)"
                return 0
            fi
            sleep 0.1
        done
        log "server did not come up (attempt $tries); its log:"
        sed 's/^/    /' "$workdir/server.log" || true
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=""
    done
    echo "compat/run.sh: could not start $target" >&2
    exit 1
}

if ((through_proxy)); then
    pool=""
    for i in 1 2 3; do
        start_server
        backend_pids+=("$server_pid")
        pool+="${pool:+,}127.0.0.1:$port"
        cp "$workdir/server.log" "$workdir/backend-$i.log"
    done
    port="$(free_port)"
    server_cmd=("$kura_bin" proxy -l "127.0.0.1:$port" --pool "$pool" --journal-dir "$workdir/journal")
    log "starting: ${server_cmd[*]}"
    "${server_cmd[@]}" >"$workdir/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 100); do port_open "$port" && break; sleep 0.1; done
    port_open "$port" || { echo "compat/run.sh: kura proxy did not come up" >&2; cat "$workdir/server.log"; exit 1; }
    log "kura proxy is up on 127.0.0.1:$port in front of $pool"
    target="$target-through-proxy"
else
    start_server
fi

# ---------------------------------------------------------------- clients
names=()
results=()
times=()
failures=0
skips=0

# run_client NAME CHECK-FUNCTION COMMAND...
# Runs COMMAND with a timeout, streams its output indented, then calls
# CHECK-FUNCTION LOGFILE EXIT-STATUS, which decides PASS or FAIL.
run_client() {
    local name="$1" check="$2"
    shift 2
    local logf="$workdir/$name.log" rc=0 t0
    printf '\n==== %s: %s\n' "$name" "$*"
    t0="$(now)"
    set +e
    if declare -F "$1" >/dev/null; then
        # a shell function: subshell with errexit (not ignored, as it would be after ||)
        (
            set -e
            "$@"
        ) >"$logf" 2>&1
    else
        timeout --kill-after=10 "$COMPAT_TIMEOUT" "$@" >"$logf" 2>&1
    fi
    rc=$?
    set -e
    sed 's/^/    /' "$logf"
    local verdict=PASS
    if ! "$check" "$logf" "$rc"; then
        verdict=FAIL
        failures=$((failures + 1))
    fi
    if ((rc == 124)); then
        echo "    (timed out after ${COMPAT_TIMEOUT}s)"
    fi
    local took
    took="$(elapsed "$t0")"
    printf -- '---- %s: %s (exit %d, %s)\n' "$name" "$verdict" "$rc" "$took"
    names+=("$name")
    results+=("$verdict")
    times+=("$took")
}

check_exit() { [[ "$2" == 0 ]]; }

# skip_client NAME REASON: records a client that cannot run against this target.
skip_client() {
    printf '\n==== %s: skipped (%s)\n' "$1" "$2"
    names+=("$1")
    results+=(SKIP)
    times+=("-")
    skips=$((skips + 1))
}

check_memccapable() {
    local logf="$1" rc="$2"
    [[ "$rc" == 0 ]] || return 1
    if grep -q '\[FAIL\]' "$logf"; then
        return 1
    fi
    grep -q 'All tests passed' "$logf" && return 0
    # otherwise every test line must be [pass]
    grep -q '\[pass\]' "$logf" && ! grep -v '\[pass\]' "$logf" | grep -q '\['
}

have() { command -v "$1" >/dev/null 2>&1; }
missing() {
    # a missing client is a failure, not a skip: the suite is proof only if every client ran
    echo "$1 is not installed ($2)"
    return 1
}

# memcaslap's text-mode keys begin with eight 0x10 bytes: every get must hit what it set.
check_memcaslap() {
    local logf="$1" rc="$2"
    [[ "$rc" == 0 ]] || return 1
    grep -q '^get_misses: 0$' "$logf" && grep -Eq '^cmd_set: [1-9]' "$logf"
}

if have memccapable; then
    run_client memccapable check_memccapable memccapable -h 127.0.0.1 -p "$port" -a
    run_client memccapable-binary check_memccapable memccapable -h 127.0.0.1 -p "$port" -b
    run_client memcaslap check_memcaslap memcaslap -s "127.0.0.1:$port" -t 2s -c 4 -T 1
else
    run_client memccapable check_exit missing memccapable "apt-get install libmemcached-tools"
    run_client memccapable-binary check_exit missing memccapable "apt-get install libmemcached-tools"
    run_client memcaslap check_exit missing memcaslap "apt-get install libmemcached-tools"
fi

run_client pymemcache check_exit \
    "$PYTHON" "$here/pymemcache_test.py" --host 127.0.0.1 --port "$port"

run_client cache-memcached-fast check_exit \
    env COMPAT_BACKEND="${target%-through-proxy}" "$PERL" "$here/cache_memcached_fast_test.pl" --host 127.0.0.1 --port "$port"

run_client pylibmc check_exit \
    "$PYTHON" "$here/pylibmc_test.py" --host 127.0.0.1 --port "$port"

run_client pylibmc-binary check_exit \
    "$PYTHON" "$here/pylibmc_test.py" --host 127.0.0.1 --port "$port" --binary

# A second kura requiring SASL, for Dalli's username/password.
sasl_pid=""
sasl_args=()
if [[ "$target" == kura ]]; then  # not through the proxy, which has no SASL
    printf 'compat:s3cret-pw\nother:x\n' >"$workdir/auth"
    sasl_port="$(free_port)"
    "$bin" server -p "$sasl_port" -S -Y "$workdir/auth" >"$workdir/sasl-server.log" 2>&1 &
    sasl_pid=$!
    for _ in $(seq 1 100); do
        port_open "$sasl_port" && break
        sleep 0.1
    done
    sasl_args=(--sasl-port "$sasl_port" --user compat --password s3cret-pw)
fi
if have ruby && ruby -e 'require "dalli"' 2>/dev/null; then
    run_client dalli check_exit ruby "$here/dalli_test.rb" --host 127.0.0.1 --port "$port" "${sasl_args[@]}"
else
    run_client dalli check_exit missing dalli "apt-get install ruby ruby-dalli"
fi
if [[ -n "$sasl_pid" ]]; then
    kill -TERM "$sasl_pid" 2>/dev/null || true
    wait "$sasl_pid" 2>/dev/null || true
    sasl_pid=""
fi

# ---------------------------------------------------------------- TLS
# A CA, a server certificate for 127.0.0.1 and a client certificate, made by the openssl CLI.
make_certs() {
    local d="$1" ext
    have openssl || missing openssl "apt-get install openssl"
    mkdir -p "$d"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
        -subj "/CN=kura compat CA" -keyout "$d/ca-key.pem" -out "$d/ca.pem" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"
    for who in server client; do
        ext="$d/$who.ext"
        printf 'basicConstraints=CA:FALSE\n' >"$ext"
        if [[ "$who" == server ]]; then
            printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >>"$ext"
        else
            printf 'extendedKeyUsage=clientAuth\n' >>"$ext"
        fi
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
            -subj "/CN=kura compat $who" -keyout "$d/$who-key.pem" -out "$d/$who.csr"
        openssl x509 -req -in "$d/$who.csr" -CA "$d/ca.pem" -CAkey "$d/ca-key.pem" \
            -CAcreateserial -days 2 -extfile "$ext" -out "$d/$who.pem"
    done
}

# Starts a second kura with -Z (ssl_verify_mode=2) on tls_port and a notls: listener on
# plain_port; sets tls_pid. Runs in the main shell (not through run_client's subshell) so
# that cleanup knows the pid.
start_tls_server() {
    local d="$1" tries
    for tries in 1 2 3; do
        tls_port="$(free_port)"
        plain_port="$(free_port)"
        tls_cmd=("$bin" server -p "$tls_port" -l "127.0.0.1:$tls_port" -l "notls:127.0.0.1:$plain_port"
            -Z -o "ssl_chain_cert=$d/server.pem,ssl_key=$d/server-key.pem"
            -o "ssl_ca_cert=$d/ca.pem,ssl_verify_mode=2")
        echo "starting: ${tls_cmd[*]}"
        "${tls_cmd[@]}" >"$workdir/tls-server.log" 2>&1 &
        tls_pid=$!
        for _ in $(seq 1 100); do
            kill -0 "$tls_pid" 2>/dev/null || break
            if port_open "$tls_port" && port_open "$plain_port"; then
                echo "kura with TLS is up: TLS on $tls_port, plain (notls:) on $plain_port"
                return 0
            fi
            sleep 0.1
        done
        echo "TLS server did not come up (attempt $tries); its log:"
        cat "$workdir/tls-server.log" || true
        stop_pid "$tls_pid"
        tls_pid=""
    done
    return 1
}

tls_openssl() {
    local d="$workdir/tls" out
    # -ign_eof: wait for the server's replies; `quit` makes the server close.
    out="$(printf 'set tls:s_client 0 0 2\r\nok\r\nget tls:s_client\r\nquit\r\n' |
        timeout 30 openssl s_client -connect "127.0.0.1:$tls_port" -verify_return_error -brief \
            -CAfile "$d/ca.pem" -cert "$d/client.pem" -key "$d/client-key.pem" -ign_eof 2>&1)"
    echo "$out"
    grep -q '^Verification: OK' <<<"$out"
    grep -q 'VALUE tls:s_client 0 2' <<<"$out"
}

if [[ "$target" == kura ]]; then
    run_client tls-certs check_exit make_certs "$workdir/tls"
    tls_up=0
    if [[ "${results[-1]}" == PASS ]]; then
        printf '\n==== tls-server: kura -Z\n'
        if start_tls_server "$workdir/tls" >"$workdir/tls-start.log" 2>&1; then
            tls_up=1
        fi
        sed 's/^/    /' "$workdir/tls-start.log"
        if ((!tls_up)); then
            printf -- '---- tls-server: FAIL\n'
            names+=(tls-server)
            results+=(FAIL)
            times+=("-")
            failures=$((failures + 1))
        fi
    fi
    if ((tls_up)); then
        run_client tls-pymemcache check_exit \
            "$PYTHON" "$here/tls_test.py" --host 127.0.0.1 --tls-port "$tls_port" \
            --plain-port "$plain_port" --cafile "$workdir/tls/ca.pem" \
            --certfile "$workdir/tls/client.pem" --keyfile "$workdir/tls/client-key.pem"
        run_client tls-openssl check_exit tls_openssl
    fi
elif ((through_proxy)); then
    skip_client tls-pymemcache "kura proxy has no TLS"
    skip_client tls-openssl "kura proxy has no TLS"
else
    skip_client tls-pymemcache "Debian's memcached is built without TLS"
    skip_client tls-openssl "Debian's memcached is built without TLS"
fi

durable_roundtrip() {
    local data="$workdir/data" dport pid
    dport="$(free_port)"
    "$bin" server -p "$dport" --data-dir "$data" --fsync always >"$workdir/durable-server.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do port_open "$dport" && break; sleep 0.1; done
    "$PYTHON" "$here/durable_test.py" write --port "$dport" --state "$workdir/durable.json"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null || true
    echo "killed kura (SIGKILL); starting it again on $data"
    "$bin" server -p "$dport" --data-dir "$data" >>"$workdir/durable-server.log" 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do port_open "$dport" && break; sleep 0.1; done
    local rc=0
    "$PYTHON" "$here/durable_test.py" verify --port "$dport" --state "$workdir/durable.json" || rc=$?
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    return "$rc"
}
if [[ "$target" == kura ]]; then
    run_client durable check_exit durable_roundtrip
elif ((through_proxy)); then
    skip_client durable "the durable mode is the server's (tests/proxy_rejoin.rs covers the proxy)"
else
    skip_client durable "memcached keeps nothing across a restart"
fi

server_alive() {
    kill -0 "$server_pid" 2>/dev/null || { echo "server process $server_pid is gone"; return 1; }
    "$PYTHON" - "$port" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5)
s.sendall(b"set compat:alive 0 0 2\r\nok\r\nget compat:alive\r\nversion\r\n")
want_prefix = b"STORED\r\nVALUE compat:alive 0 2\r\nok\r\nEND\r\nVERSION "
buf = b""
while not (len(buf) > len(want_prefix) and buf.endswith(b"\r\n")):
    chunk = s.recv(4096)
    if not chunk:
        break
    buf += chunk
print("reply:", buf)
sys.exit(0 if buf.startswith(want_prefix) else 1)
EOF
}
run_client server-alive check_exit server_alive

# ---------------------------------------------------------------- summary
if ((failures)); then
    printf '\n==== %s log (tail)\n' "$target"
    tail -n 40 "$workdir/server.log" | sed 's/^/    /'
    if [[ -s "$workdir/tls-server.log" ]]; then
        printf '\n==== TLS server log (tail)\n'
        tail -n 40 "$workdir/tls-server.log" | sed 's/^/    /'
    fi
fi
printf '\n==== compatibility suite summary (%s, %s)\n' "$target" "${server_cmd[*]}"
for i in "${!names[@]}"; do
    printf '  %-4s  %-22s %s\n' "${results[$i]}" "${names[$i]}" "${times[$i]}"
done
if ((failures)); then
    printf '%d of %d FAILED\n' "$failures" "${#names[@]}"
    exit 1
fi
printf 'all %d PASSED\n' "$((${#names[@]} - skips))"
((skips == 0)) || printf '(%d skipped)\n' "$skips"
