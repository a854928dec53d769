#!/usr/bin/env bash
# The cost of `stats topkeys` (kura's hot-key sketch, docs/protocol-extensions.md): one kura
# server (-t 2 -m 1024, 100,000 keys of 100 B prefilled) under compare.sh's load (1) (32
# connections, 90/10 get/set, no pipelining) and load (4) (10-key multi-gets), with the sketch
# off and on in turn (`stats topkeys off` / `stats topkeys on 60` on the same process), ROUNDS
# rounds of DURATION seconds, A B A B ...; throughput, and the server's CPU time per request
# from /proc/PID/stat. Medians, on/off.
#
#   ROUNDS=5 DURATION=5 [KURA_BIN=...] bench/topkeys.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
# shellcheck source=bench/lib.sh
. bench/lib.sh
kura_bin
port=$(free_port)
"$KURA" server -l 127.0.0.1 -p "$port" -t 2 -m 1024 &
pid=$!
out=$(mktemp)
trap 'kill $pid 2>/dev/null || true; rm -f "$out"' EXIT
wait_port "$port"
"$KURA" bench -s "127.0.0.1:$port" -t 2 --keys 100000 --value-size 100 --prefill -n 0 >/dev/null
say() { python3 -c 'import socket,sys; s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); s.sendall(sys.argv[2].encode()+b"\r\n"); print(s.recv(100).decode().strip())' "$port" "$1" >/dev/null; }
ticks=$(getconf CLK_TCK)
echo "load round sketch req/s cpu_us_per_req"
for load in "90/10" "multiget10"; do
  case $load in
    90/10) args=(--ratio 9:1) ;;
    multiget10) args=(--ratio 1:0 --multiget 10) ;;
  esac
  for round in $(seq "$ROUNDS"); do
    for sketch in off on; do
      if [ $sketch = on ]; then say "stats topkeys on 60"; else say "stats topkeys off"; fi
      read -r u0 s0 < <(awk '{ sub(/^.*\) /, ""); print $12, $13 }' "/proc/$pid/stat")
      rate=$("$KURA" bench -s "127.0.0.1:$port" -t 2 -c 32 --keys 100000 --value-size 100 \
        -d "$DURATION" "${args[@]}" --json | python3 -c 'import json,sys; r=json.load(sys.stdin)["runs"][0]; print(round(r["throughput"]), r["requests"])')
      read -r u1 s1 < <(awk '{ sub(/^.*\) /, ""); print $12, $13 }' "/proc/$pid/stat")
      set -- $rate
      cpu=$(python3 -c "print(round(($u1+$s1-$u0-$s0)/$ticks*1e6/$2, 3))")
      echo "$load $round $sketch $1 $cpu" | tee -a "$out"
    done
  done
done
python3 - "$out" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
for load in dict.fromkeys(r[0] for r in rows):
    med = {s: (st.median(float(r[3]) for r in rows if r[0] == load and r[2] == s),
               st.median(float(r[4]) for r in rows if r[0] == load and r[2] == s)) for s in ("off", "on")}
    print(f"{load}: off {med['off'][0]:,.0f} req/s {med['off'][1]:.3f} us/req; "
          f"on {med['on'][0]:,.0f} req/s {med['on'][1]:.3f} us/req; "
          f"throughput on/off {med['on'][0] / med['off'][0]:.3f}, CPU on/off {med['on'][1] / med['off'][1]:.3f}")
PY
