#!/usr/bin/env bash
# Issue 15: latency against offered load, kura against Debian's memcached, as seed 001 plots a
# cache (mean and TP999 against QPS). Both servers run side by side (-t 2 -m 1024) and are
# prefilled with 100,000 keys of 100 B.
#
#   saturation  closed loop, 32 connections, SAT_SECONDS s, each server: the lower throughput
#               is the reference S of each load
#   curve       for each load (mixed: load (1), 90/10 get/set; sets: sets only), ROUNDS rounds of
#               an open-loop `kura bench --sweep` at 10%, 20%, ... 90% of S (DURATION s per
#               rate), memcached first in odd rounds and kura in even ones (A B B A); per
#               rate, the medians over the rounds of mean, p99 and p99.9, and kura/memcached
#               ratios. The server's CPU over each sweep (utime and stime from /proc) per
#               request: user and total. Over all (round, rate) pairs, how often kura's mean,
#               p99 and p99.9 were the lower: two identical servers (AA=1) land near half, and
#               the medians of 3-6 rounds of two identical servers part by 0.6-2.0x at single
#               rates on a 2-vCPU VM, so read a ratio above 1 at one rate against that control
#               (bench/results/2026-11-29-aa-control.txt; bench/curve-pool.py pools runs).
#   rtt         one connection, closed loop (each request waits for the last): requests per
#               second and mean/p99 latency, ROUNDS rounds alternating.
#   The medians of the mixed load are drawn to $OUT/curve-mixed.svg (`kura bench --overlay`).
#
#   bench/curve.sh      # ROUNDS=3 DURATION=3 SAT_SECONDS=5 LOADS="mixed sets" [KURA_BIN=...] [KURA_ARGS=...] [AA=1]
#   AA=1: the A/A control, memcached against a second memcached (bench/lib.sh start_pair)
#   OUT: a directory of its own (a temporary one by default): the paired figures read every
#   round in it (bench/curve-pool.py)
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-3}
SAT_SECONDS=${SAT_SECONDS:-5}
LOADS=${LOADS:-"mixed sets"}
OUT=${OUT:-$(mktemp -d /tmp/kura-curve.XXXXXX)}
command -v memcached >/dev/null || { echo "needs memcached: apt-get install -y memcached" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
kura_bin
mkdir -p "$OUT"

start_pair

ratio_of() { case $1 in mixed) echo 9:1 ;; sets) echo 0:1 ;; esac; }
ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }
# Which server goes first in round $1: memcached in odd rounds, kura in even ones (A B B A), so
# that neither always follows the other's heaviest step.
order() { if [ $(($1 % 2)) = 1 ]; then echo memcached kura; else echo kura memcached; fi; }

[ "${AA:-0}" = 1 ] && echo "A/A CONTROL: 'kura' in every line below is a second memcached"
echo "kura $(git rev-parse --short HEAD 2>/dev/null || echo '?') ${KURA_ARGS:-} vs $(memcached -V), $(nproc) cores, $(date -u +%FT%RZ); -t 2 -m 1024 each"
for load in $LOADS; do
  ratio=$(ratio_of "$load")
  sat=()
  for p in "$mp" "$kp"; do
    sat+=("$("$KURA" bench -s "127.0.0.1:$p" -t 2 -c 32 --keys 100000 --ratio "$ratio" \
      -d "$SAT_SECONDS" --json | python3 -c 'import json,sys; print(int(json.load(sys.stdin)["runs"][0]["throughput"]))')")
  done
  s=$((sat[0] < sat[1] ? sat[0] : sat[1]))
  rates=$(python3 -c "print(','.join(str($s * k // 10) for k in range(1, 10)))")
  echo
  echo "== $load (--ratio $ratio): saturation memcached ${sat[0]}/s, kura ${sat[1]}/s; rates $rates"
  for round in $(seq "$ROUNDS"); do
    for sys in $(order "$round"); do
      if [ "$sys" = memcached ]; then p=$mp; pid=$mpid; else p=$kp; pid=$kpid; fi
      read -r u0 s0 < <(ticks "$pid")
      "$KURA" bench -s "127.0.0.1:$p" -t 2 -c 32 --keys 100000 --ratio "$ratio" \
        -d "$DURATION" --sweep "$rates" --label "$sys" --json >"$OUT/$load-$sys-$round.json"
      read -r u1 s1 < <(ticks "$pid")
      echo "$((u1 - u0)) $((s1 - s0))" >"$OUT/$load-$sys-$round.cpu"
    done
  done
  python3 - "$OUT" "$load" "$ROUNDS" "$(getconf CLK_TCK)" <<'PY'
import json, statistics, sys
out, load, rounds, hz = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
med = {}
for sys_ in ("memcached", "kura"):
    reports = [json.load(open(f"{out}/{load}-{sys_}-{r}.json")) for r in range(1, rounds + 1)]
    runs = []
    for i, run in enumerate(reports[0]["runs"]):
        same = [rep["runs"][i] for rep in reports]
        lat = {k: statistics.median(x["latency_us"][k] for x in same) for k in ("mean", "p99", "p999")}
        runs.append({"rate": run["offered_rate"], **lat,
                     "errors": sum(x["errors"] for x in same),
                     "achieved": statistics.median(x["throughput"] for x in same)})
    cpu = []
    for r in range(1, rounds + 1):
        u, s = map(int, open(f"{out}/{load}-{sys_}-{r}.cpu").read().split())
        n = sum(x["requests"] for x in reports[r - 1]["runs"])
        cpu.append(((u + s) / hz / n * 1e6, u / hz / n * 1e6))
    med[sys_] = (runs, statistics.median(c[0] for c in cpu), statistics.median(c[1] for c in cpu))
    # A report of the medians, for the plot.
    median_report = dict(reports[0])
    median_report["label"] = f"{sys_} (median of {rounds})"
    median_report["runs"] = []
    for run, m in zip(reports[0]["runs"], runs):
        r = dict(run)
        r["latency_us"] = dict(run["latency_us"], mean=m["mean"], p99=m["p99"], p999=m["p999"])
        median_report["runs"].append(r)
    json.dump(median_report, open(f"{out}/{load}-{sys_}-median.json", "w"))
print(f"{'rate':>8} {'achieved m/k':>15} | {'mean us m/k':>15} {'ratio':>6} | {'p99 us m/k':>17} {'ratio':>6} | {'p99.9 us m/k':>17} {'ratio':>6}")
worse = []
for m, k in zip(med["memcached"][0], med["kura"][0]):
    row = [m["rate"]]
    print(f"{m['rate']:>8.0f} {m['achieved']:>7.0f}/{k['achieved']:<7.0f} | "
          f"{m['mean']:>7.0f}/{k['mean']:<7.0f} {k['mean']/m['mean']:>6.2f} | "
          f"{m['p99']:>8.0f}/{k['p99']:<8.0f} {k['p99']/m['p99']:>6.2f} | "
          f"{m['p999']:>8.0f}/{k['p999']:<8.0f} {k['p999']/m['p999']:>6.2f}"
          + (f"  errors {m['errors']}/{k['errors']}" if m["errors"] or k["errors"] else ""))
    for name in ("mean", "p99", "p999"):
        if k[name] > m[name]:
            worse.append(f"{name}@{m['rate']:.0f}")
print(f"kura at or below memcached at every rate: {'yes' if not worse else 'no: ' + ', '.join(worse)}")
(mt, mu), (kt, ku) = med["memcached"][1:], med["kura"][1:]
print(f"server CPU per request over the sweep (median of rounds): memcached {mt:.2f} us (user {mu:.2f}), "
      f"kura {kt:.2f} us (user {ku:.2f}); kura/memcached total {kt/mt:.2f}x, user {ku/mu:.2f}x")
PY
  # Paired by round, which a round with a machine-wide stall sways less than the ratio of the
  # medians above: per step, the median of the rounds' kura/memcached and the rounds kura was
  # lower in; over all (round, rate) pairs, how often kura was lower.
  python3 bench/curve-pool.py "$load" "$OUT"
done
"$KURA" bench -s "127.0.0.1:$kp" -n 0 \
  --overlay "$OUT/mixed-memcached-median.json" --overlay "$OUT/mixed-kura-median.json" \
  --plot "$OUT/curve-mixed.svg" >/dev/null 2>&1 || true
[ -f "$OUT/curve-mixed.svg" ] && echo "plot: $OUT/curve-mixed.svg"

echo
echo "== rtt: one connection, closed loop, ${DURATION}s, $ROUNDS rounds"
for round in $(seq "$ROUNDS"); do
  for sys in $(order "$round"); do
    if [ "$sys" = memcached ]; then p=$mp; else p=$kp; fi
    "$KURA" bench -s "127.0.0.1:$p" -t 1 -c 1 --keys 100000 --ratio 9:1 -d "$DURATION" --json |
      python3 -c "import json,sys; r=json.load(sys.stdin)['runs'][0]; print('$sys', round(r['throughput']), round(r['latency_us']['mean'],1), round(r['latency_us']['p99'],1))" \
      >>"$OUT/rtt"
  done
done
python3 - "$OUT/rtt" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for s in ("memcached", "kura"):
    mine = [list(map(float, r[1:])) for r in rows if r[0] == s]
    med[s] = [statistics.median(c) for c in zip(*mine)]
    print(f"{s:>10}: {med[s][0]:.0f} req/s, mean {med[s][1]:.1f} us, p99 {med[s][2]:.1f} us (medians)")
m, k = med["memcached"], med["kura"]
print(f"kura/memcached: rate {k[0]/m[0]:.2f}x, mean {k[1]/m[1]:.2f}x, p99 {k[2]/m[2]:.2f}x")
pairs = zip([r for r in rows if r[0] == "memcached"], [r for r in rows if r[0] == "kura"])
faster = [float(k[1]) > float(m[1]) for m, k in pairs]
print(f"kura's rate higher in {sum(faster)} of {len(faster)} rounds")
PY
echo "files: $OUT"
