# Shared by the bench/ scripts (sourced, not run).

# kura_bin: sets KURA to $KURA_BIN when given (a kura binary to use instead of building this
# checkout's), or builds this checkout's release binary and uses it.
kura_bin() {
  if [ -n "${KURA_BIN:-}" ]; then
    KURA=$KURA_BIN
  else
    cargo build --release -q -p kura
    KURA=target/release/kura
  fi
}

# A TCP port nothing listens on now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_port PORT [TRIES]: waits (TRIES x 50 ms, default 600) until something
# accepts on PORT; fails (status 1) if nothing does.
wait_port() {
  for _ in $(seq "${2:-600}"); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1',$1),0.2).close()" 2>/dev/null && return 0
    sleep 0.05
  done
  echo "nothing listens on port $1" >&2
  return 1
}

# start_cache KIND: `kura server` ($KURA) or Debian's memcached, -t 2 -m 256,
# on a free port left in $port; its pid is added to the caller's pids array.
start_cache() {
  port=$(free_port)
  if [[ $1 == kura ]]; then
    "$KURA" server -p "$port" -t 2 -m 256 >/dev/null 2>&1 &
  else
    memcached -u root -U 0 -l 127.0.0.1 -p "$port" -t 2 -m 256 >/dev/null 2>&1 &
  fi
  pids+=($!)
  wait_port "$port" >/dev/null
}

# start_pair: Debian's memcached and `kura server` ($KURA) side by side, -t 2 -m 1024 each (kura
# with $KURA_ARGS added, when given: `KURA_ARGS="-o worker_cpulist=0:1"`), both prefilled with
# load (1)'s 100,000 keys of 100 B; sets mp/mpid (memcached) and kp/kpid (kura) and kills both on
# exit. With AA=1 the "kura" member is a second memcached started the same way: an A/A control
# run, whose ratios show how far apart two identical servers land on this machine with the same
# rounds and durations (the noise floor a kura/memcached ratio must be read against).
# pair_memcached PORT: start_pair's memcached on PORT, in the background ($! is its pid).
pair_memcached() { memcached -u "$(id -un)" -U 0 -l 127.0.0.1 -p "$1" -t 2 -m 1024 & }

start_pair() {
  mp=$(free_port)
  kp=$(free_port)
  pair_memcached "$mp"
  mpid=$!
  if [ "${AA:-0}" = 1 ]; then
    echo "A/A control (AA=1): every 'kura' figure below is a second memcached" >&2
    pair_memcached "$kp"
  else
    # shellcheck disable=SC2086
    "$KURA" server -l 127.0.0.1 -p "$kp" -t 2 -m 1024 ${KURA_ARGS:-} &
  fi
  kpid=$!
  trap 'kill $mpid $kpid 2>/dev/null || true' EXIT
  wait_port "$mp"
  wait_port "$kp"
  for p in "$mp" "$kp"; do
    "$KURA" bench -s "127.0.0.1:$p" -t 2 -c 32 --keys 100000 --prefill -n 0 >/dev/null
  done
}

# pair_member NAME: sets port and pid to start_pair's memcached or kura.
pair_member() {
  if [ "$1" = memcached ]; then port=$mp pid=$mpid; else port=$kp pid=$kpid; fi
}

# load1_requests PORT ARGS...: runs load (1) (`kura bench -t 2 -c 32` over start_pair's 100,000
# keys) against PORT with ARGS added (a duration, a rate, a pipeline depth) and prints the
# requests it counted.
load1_requests() {
  local port=$1
  shift
  "$KURA" bench -s "127.0.0.1:$port" -t 2 -c 32 --keys 100000 "$@" --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["runs"][0]["requests"])'
}

# http_setup: what the HTTP benches against Varnish share: varnishd and wrk must be installed; a
# work dir in $work, and the pids of the origins ($pids) and caches ($cache_pids) the script
# starts, all killed (and the work dir removed) on exit.
http_setup() {
  command -v varnishd >/dev/null || { echo "needs varnishd: apt-get install -y varnish" >&2; exit 1; }
  command -v wrk >/dev/null || { echo "needs wrk: apt-get install -y wrk" >&2; exit 1; }
  work=$(mktemp -d)
  pids=()
  cache_pids=()
  trap http_cleanup EXIT
}
http_cleanup() {
  for pid in "${cache_pids[@]}" "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  sleep 0.5
  rm -rf "$work"
}

# cpu_a_request PID PORT ARGS...: runs load1_requests PORT ARGS... and prints the requests it
# counted and the server PID's user and system CPU a request in ns (utime and stime of
# /proc/PID/stat, in clock ticks, before and after).
cpu_a_request() {
  local pid=$1 port=$2 tick_ns u0 s0 u1 s1 n
  shift 2
  tick_ns=$((1000000000 / $(getconf CLK_TCK)))
  read -r u0 s0 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  n=$(load1_requests "$port" "$@")
  read -r u1 s1 < <(awk '{print $14, $15}' "/proc/$pid/stat")
  echo "$n $(((u1 - u0) * tick_ns / n)) $(((s1 - s0) * tick_ns / n))"
}

# cpu_ticks PID...: user + system clock ticks of the processes (fields 14 and 15 of
# /proc/PID/stat, after the parenthesised command name).
cpu_ticks() {
  local total=0 pid
  for pid in "$@"; do
    if [ -r "/proc/$pid/stat" ]; then
      total=$((total + $(sed 's/.*) //' "/proc/$pid/stat" | awk '{print $12 + $13}')))
    fi
  done
  echo "$total"
}

# stop: kills the caches in $cache_pids and waits (10 s at most each) until they are gone.
stop() {
  local pid
  for pid in "${cache_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${cache_pids[@]}"; do
    for _ in $(seq 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  done
  cache_pids=()
}

# median: the median of the numbers on standard input, one a line.
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }

# start_varnish PORT ARGS...: varnishd on 127.0.0.1:PORT with malloc storage of $MEM MB and
# ARGS (a backend, -b, or a VCL, -f); its processes in $cache_pids.
start_varnish() {
  local port=$1
  shift
  varnishd -F -a "127.0.0.1:$port" -s "malloc,${MEM}m" -n "$work/varnish-$port" -j none "$@" \
    >"$work/varnish.log" 2>&1 &
  local parent=$!
  wait_port "$port" || { cat "$work/varnish.log" >&2; return 1; }
  cache_pids=($parent $(pgrep -P "$parent" || true))
}

# wrk_figures OUT TICKS: "req/s p99_ms cpu_us_per_request" from wrk's output (--latency) and
# the CPU clock ticks the cache used meanwhile.
wrk_figures() {
  local out=$1 ticks=$2 rps p99 requests
  rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); v/=1000} else if (v ~ /ms$/) {sub(/ms/,"",v)} else if (v ~ /s$/) {sub(/s/,"",v); v*=1000}; print v}' <<<"$out")
  awk -v r="$rps" -v p="$p99" -v t="$ticks" -v n="$requests" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {printf "%.0f %.3f %.2f\n", r, p, t / hz / n * 1e6}'
}

# http_binaries: builds this checkout's release kura and the bench origin (kura-http's `origin`
# example) unless KURA_BIN is given (then $KURA_BIN and the origin next to a target dir's
# examples must exist); sets KURA and ORIGIN.
http_binaries() {
  local target=${CARGO_TARGET_DIR:-target}
  if [ -z "${KURA_BIN:-}" ]; then
    cargo build --release -q -p kura
    cargo build --release -q -p kura-http --example origin
  fi
  KURA=${KURA_BIN:-$target/release/kura}
  ORIGIN=${ORIGIN_BIN:-$target/release/examples/origin}
}

# start_origin DELAY_MS: the bench origin on a free port, printed; its pid added to $pids (call
# it without a subshell: `start_origin 0; fast=$origin_port`).
start_origin() {
  origin_port=$(free_port)
  "$ORIGIN" "$origin_port" "$1" &
  pids+=($!)
  wait_port "$origin_port"
}

# wrk_cpu ARGS...: wrk -t 1 -c $CONNS -d $DURATION --latency ARGS against the running cache
# ($cache_pids): prints wrk_figures' "req/s p99_ms cpu_us_per_request".
wrk_cpu() {
  local before after out
  before=$(cpu_ticks "${cache_pids[@]}")
  out=$(wrk -t 1 -c "$CONNS" -d "${DURATION}s" --latency "$@")
  after=$(cpu_ticks "${cache_pids[@]}")
  wrk_figures "$out" $((after - before))
}

# rss_mb PID...: the processes' resident memory (VmRSS), MB.
rss_mb() {
  local rss=0 pid
  for pid in "$@"; do
    rss=$((rss + $(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)))
  done
  echo $((rss / 1024))
}

# rounds_of "SYSTEMS" NAME CMD...: runs `CMD... SYSTEM` for each of SYSTEMS in turn, $ROUNDS
# times (A B A B); each run's line (its figures) is echoed as "NAME SYSTEM ROUND LINE" and kept
# in $work/NAME.SYSTEM.
rounds_of() {
  local systems=$1 name=$2 round system line
  shift 2
  for system in $systems; do : >"$work/$name.$system"; done
  for round in $(seq "$ROUNDS"); do
    for system in $systems; do
      line=$("$@" "$system")
      echo "$line" >>"$work/$name.$system"
      echo "$name $system $round $line"
    done
  done
}

# medians_of "SYSTEMS" NAME COLUMNS: a line a system, "SYSTEM" and the median of each of the
# first COLUMNS columns of its runs in rounds_of NAME.
medians_of() {
  local systems=$1 name=$2 columns=$3 system col cols
  for system in $systems; do
    cols=()
    for col in $(seq "$columns"); do
      cols+=("$(awk -v c="$col" '{print $c}' "$work/$name.$system" | median)")
    done
    echo "$system ${cols[*]}"
  done
}

# ab_rounds NAME CMD...: rounds_of kura and Varnish.
ab_rounds() { rounds_of "kura varnish" "$@"; }

# ab_medians NAME FORMAT...: "NAME  kura's medians | Varnish's | kura/Varnish ratios" of the
# columns of ab_rounds NAME, one printf FORMAT a column (%d, %.3f...).
ab_medians() {
  local name=$1 col=0 format kura=() varnish=() ratios=()
  shift
  for format in "$@"; do
    col=$((col + 1))
    local a b
    a=$(awk -v c=$col '{print $c}' "$work/$name.kura" | median)
    b=$(awk -v c=$col '{print $c}' "$work/$name.varnish" | median)
    kura+=("$(awk -v v="$a" -v f="$format" 'BEGIN {printf f, v}')")
    varnish+=("$(awk -v v="$b" -v f="$format" 'BEGIN {printf f, v}')")
    ratios+=("$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2fx", b == 0 ? 0 : a / b}')")
  done
  echo "$name  ${kura[*]} | ${varnish[*]} | ${ratios[*]}"
}

# The proxy-instruction scripts' shared parts.
# proxy_load_args LOAD: kura bench's flags for a load (100-byte values).
proxy_load_args() {
  case $1 in
    c1) echo "-c 1 --ratio 9:1" ;;
    c8) echo "-c 8 --ratio 9:1" ;;
    mget10) echo "-c 8 --ratio 1:0 --multiget 10" ;;
    *) echo "unknown load $1" >&2; exit 2 ;;
  esac
}

# nutcracker_yml LISTEN_PORT BACKEND_PORT: nutcracker's configuration, one
# pool with twemproxy's ketama and fnv1a_64 over one backend.
nutcracker_yml() {
  echo "pool:"
  echo "  listen: 127.0.0.1:$1"
  echo "  hash: fnv1a_64"
  echo "  distribution: ketama"
  echo "  auto_eject_hosts: false"
  echo "  server_connections: 1"
  echo "  servers:"
  echo "    - 127.0.0.1:$2:1 node1"
}

# proxy_run PORT KURA LOAD N: prefills 1,000 keys through the proxy on PORT,
# then runs N requests of LOAD.
proxy_run() {
  "$2" bench -s "127.0.0.1:$1" -t 1 -c 1 --keys 1000 --prefill -n 0 >/dev/null
  # shellcheck disable=SC2046
  "$2" bench -s "127.0.0.1:$1" -t 1 --keys 1000 $(proxy_load_args "$3") -n "$4" >/dev/null
}

# The callgrind scripts of a proxy (proxy-instructions.sh, proxy-tls-instructions.sh):
# instructions_setup sets KURA (default: the workspace's target/release/kura), SMALL and LARGE
# (requests of the two runs, default 5,000 and 15,000), out (KEEP, or a new temporary directory)
# and an empty pids array whose processes are killed on exit.
instructions_setup() {
  KURA=${KURA:-target/release/kura}
  SMALL=${SMALL:-5000}
  LARGE=${LARGE:-15000}
  out=${KEEP:-$(mktemp -d)}
  mkdir -p "$out"
  pids=()
  trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
}

# kura_proxy_pool PORT: kura proxy's pool of the one backend on PORT, placed as nutcracker_yml
# places it (twemproxy's ketama, fnv1a_64, the server named node1).
kura_proxy_pool() {
  echo "[pools.main]"
  echo "ring = \"twemproxy\""
  echo "hash = \"fnv1a_64\""
  echo "servers = [\"127.0.0.1:$1:1 node1\"]"
}

# callgrind_total FILE...: the instructions of callgrind's output files, added.
callgrind_total() { awk '/^totals:/ {s += $2} END {print s}' "$@"; }

# per_request NAMES: for each of NAMES and each of $LOADS, the caller's `total_instructions NAME
# LOAD N` at N = SMALL and N = LARGE, and their difference over LARGE - SMALL: the instructions
# of a request (start-up, prefill and exit cancel out).
per_request() {
  local name load small large
  for name in $1; do
    for load in $LOADS; do
      small=$(total_instructions "$name" "$load" "$SMALL")
      large=$(total_instructions "$name" "$load" "$LARGE")
      printf '%-13s %-7s %14s instructions for %6s requests, %14s for %6s: %6s a request\n' \
        "$name" "$load" "$small" "$SMALL" "$large" "$LARGE" $(((large - small) / (LARGE - SMALL)))
    done
  done
}
