#!/usr/bin/env bash
# Issue 15: where kura's and memcached's (Debian's) CPU goes, -t 2 -m 1024 each, under load (1)
# (32 connections, 90/10 get/set, 100-byte values, 100,000 keys prefilled) in open loop at RATE:
# perf samples of each server's threads (cpu-clock, 4999 Hz, alternating A B A B over ROUNDS),
# summed by kind, and the syscalls a request (tracepoints).
#
#   RATE=37000 ROUNDS=2 DURATION=4 [KURA_BIN=...] bench/cpu-share.sh
#
# Kinds of samples: "switch" is the scheduler's (a worker going to sleep and being woken; in a VM
# whose perf samples by timer, samples taken with interrupts off land where they come back on,
# finish_task_switch and the spinlock unlocks); "syscall" is entering and leaving the kernel,
# epoll and looking up the socket, which io_uring would share among a wake-up's requests;
# "net" is the rest of the kernel (TCP over loopback, both ends' softirq); "user" is the
# server's own code and its libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${RATE:-37000}
ROUNDS=${ROUNDS:-2}
DURATION=${DURATION:-4}
command -v memcached >/dev/null || { echo "needs memcached: apt-get install -y memcached" >&2; exit 1; }
command -v perf >/dev/null || { echo "needs perf: apt-get install -y linux-perf" >&2; exit 1; }
# shellcheck source=bench/lib.sh
. bench/lib.sh
kura_bin
start_pair >/dev/null
work=$(mktemp -d)
trap 'kill $mpid $kpid 2>/dev/null || true; rm -rf "$work"' EXIT
SYSCALLS=raw_syscalls:sys_enter,syscalls:sys_enter_read,syscalls:sys_enter_sendto,syscalls:sys_enter_sendmsg,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,context-switches

echo "round system requests samples switch syscall net user | a request: syscalls read send epoll_wait context-switches"
for r in $(seq "$ROUNDS"); do
  for s in memcached kura; do
    pair_member "$s"
    perf record -F 4999 -p "$pid" -o "$work/$s.data" >/dev/null 2>&1 &
    rec=$!
    perf stat -x, -e "$SYSCALLS" -p "$pid" -o "$work/$s.stat" >/dev/null 2>&1 &
    st=$!
    sleep 0.3
    n=$(load1_requests "$port" --rate "$RATE" -d "$DURATION")
    kill -INT "$rec" "$st"
    wait "$rec" "$st" 2>/dev/null || true
    perf report -i "$work/$s.data" --no-children --sort dso,sym -n -q --stdio -g none 2>/dev/null >"$work/$s.rep"
    python3 - "$r" "$s" "$n" "$work/$s.rep" "$work/$s.stat" <<'PY'
import re, sys
r, s, n, rep, stat = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
switch = re.compile(r"finish_task_switch|_raw_spin_unlock_irq|__schedule|^schedule|pick_next|"
                    r"dequeue|enqueue|update_curr|try_to_wake_up|ttwu|select_task_rq|psi_|"
                    r"__switch_to|switch_mm")
syscall = re.compile(r"entry_SYSCALL|do_syscall_64|syscall_exit|__x64_sys|__sys_|fdget|fput|ep_|"
                     r"epoll|sock_poll|tcp_poll|vfs_read|sock_read_iter|sock_recvmsg|sock_sendmsg|"
                     r"__check_object_size|__import_iovec|copy_msghdr|import_ubuf|security_socket|"
                     r"rw_verify_area|fsnotify|ksys_read|syscall_return|exit_to_user_mode|rseq")
kinds = {"switch": 0, "syscall": 0, "net": 0, "user": 0}
for line in open(rep):
    f = line.split()
    if len(f) < 5 or not f[1].isdigit():
        continue
    samples, dso, sym = int(f[1]), f[2], f[-1]
    if dso != "[kernel.kallsyms]":
        kinds["user"] += samples
    elif switch.search(sym):
        kinds["switch"] += samples
    elif syscall.search(sym):
        kinds["syscall"] += samples
    else:
        kinds["net"] += samples
calls = {}
for line in open(stat):
    f = line.strip().split(",")
    if len(f) > 3 and f[0].isdigit():
        calls[f[2].split(":")[-1].replace("sys_enter_", "")] = int(f[0]) / n
total = sum(kinds.values())
send = calls.get("sendto", 0) + calls.get("sendmsg", 0)
wait = calls.get("epoll_wait", 0) + calls.get("epoll_pwait", 0)
print(r, s, n, total, " ".join(str(kinds[k]) for k in ("switch", "syscall", "net", "user")),
      "| %.2f %.2f %.2f %.2f %.2f" % (calls.get("sys_enter", 0), calls.get("read", 0), send, wait,
                                       calls.get("context-switches", 0)))
PY
  done
done
