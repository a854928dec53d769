#!/usr/bin/env bash
# The CPU cost of TLS per request in a proxy, in user-space instructions
# counted by callgrind (repeatable under load), as bench/proxy-instructions.sh
# counts them: one kura server backend (release build, not under valgrind),
# the proxy under callgrind, `kura bench -t 1` through it (1,000 keys
# prefilled, then N requests of a load); two runs per case, N = SMALL and
# N = LARGE, whose difference over LARGE - SMALL is the cost of a request
# (start-up, handshakes, prefill and exit cancel out).
#
# Cases:
#   kura-plain     kura proxy, plaintext on both hops
#   kura-client    TLS from the client to kura proxy ([tls]); the client is
#                  kura bench behind a stunnel client (not counted)
#   kura-backend   TLS from kura proxy to a kura server -Z ([backend_tls])
#   kura-both      both
#   nut-plain      nutcracker, plaintext on both hops
#   nut-both       nutcracker behind stunnel: a stunnel server terminating the
#                  client's TLS in front of it and a stunnel client carrying
#                  its backend connection to kura server -Z; the instructions
#                  of nutcracker and both stunnels are added (all three under
#                  callgrind)
#
#   bench/proxy-tls-instructions.sh
#   CASES="kura-plain kura-both" LOADS=c1 bench/proxy-tls-instructions.sh
#
# Certificates: a throwaway CA and ECDSA P-256 certificates for 127.0.0.1,
# made with the openssl CLI. KURA is the kura binary (default: the
# workspace's target/release/kura).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

CASES=${CASES:-kura-plain kura-client kura-backend kura-both nut-plain nut-both}
LOADS=${LOADS:-c1 c8}
instructions_setup

# The certificates.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
  -subj /CN=bench-ca -keyout "$out/ca-key.pem" -out "$out/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=127.0.0.1 \
  -keyout "$out/key.pem" -out "$out/cert.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n' >"$out/ext"
openssl x509 -req -in "$out/cert.csr" -CA "$out/ca.pem" -CAkey "$out/ca-key.pem" \
  -CAcreateserial -days 2 -extfile "$out/ext" -out "$out/cert.pem" 2>/dev/null

backend=$(free_port)
"$KURA" server -p "$backend" -t 1 -m 64 >/dev/null 2>&1 &
pids+=("$!")
tls_backend=$(free_port)
"$KURA" server -p "$tls_backend" -t 1 -m 64 -Z \
  -o "ssl_chain_cert=$out/cert.pem,ssl_key=$out/key.pem" >/dev/null 2>&1 &
pids+=("$!")
wait_port "$backend" >/dev/null
wait_port "$tls_backend" >/dev/null

# stunnel NAME SECTION-LINES...: a stunnel in the foreground with one
# service; under callgrind when CG is set (its output file).
stunnel_run() {
  local name=$1
  shift
  {
    echo "foreground = yes"
    echo "pid ="
    echo "[$name]"
    printf '%s\n' "$@"
  } >"$out/stunnel.$name.conf"
  if [[ -n ${CG:-} ]]; then
    valgrind --tool=callgrind --callgrind-out-file="$CG" \
      stunnel4 "$out/stunnel.$name.conf" >/dev/null 2>"$CG.log" &
  else
    stunnel4 "$out/stunnel.$name.conf" >/dev/null 2>&1 &
  fi
  spids+=("$!")
}

# total_instructions CASE LOAD N: the instructions of the measured
# processes for a run of N requests of LOAD.
total_instructions() {
  local case=$1 load=$2 n=$3 port front files=() spids=()
  port=$(free_port)
  front=$port
  local file="$out/callgrind.$case.$load.$n"
  case $case in
    kura-*)
      {
        if [[ $case == kura-backend || $case == kura-both ]]; then
          kura_proxy_pool "$tls_backend"
          echo "[backend_tls]"
          echo "ca_cert = \"$out/ca.pem\""
        else
          kura_proxy_pool "$backend"
        fi
        # Under callgrind a handshake takes long: no request may time out.
        echo "[health]"
        echo "connect_timeout_ms = 20000"
        echo "request_timeout_ms = 20000"
        if [[ $case == kura-client || $case == kura-both ]]; then
          echo "[tls]"
          echo "enabled = true"
          echo "chain_cert = \"$out/cert.pem\""
          echo "key = \"$out/key.pem\""
        fi
      } >"$out/proxy.$case.toml"
      valgrind --tool=callgrind --callgrind-out-file="$file" \
        "$KURA" proxy -l "127.0.0.1:$port" -t 1 --config "$out/proxy.$case.toml" \
        >/dev/null 2>"$file.log" &
      spids+=("$!")
      files+=("$file")
      if [[ $case == kura-client || $case == kura-both ]]; then
        front=$(free_port)
        CG='' stunnel_run "bench-client-$n" "client = yes" "accept = 127.0.0.1:$front" \
          "connect = 127.0.0.1:$port"
      fi
      ;;
    nut-*)
      local to=$backend
      if [[ $case == nut-both ]]; then
        # nutcracker's backend connection through a stunnel client.
        to=$(free_port)
        CG="$file.stunnel-backend" stunnel_run "to-backend-$n" "client = yes" \
          "accept = 127.0.0.1:$to" "connect = 127.0.0.1:$tls_backend" \
          "CAfile = $out/ca.pem" "verifyChain = yes" "checkIP = 127.0.0.1"
        files+=("$file.stunnel-backend")
      fi
      local nport=$port
      [[ $case == nut-both ]] && nport=$(free_port)
      nutcracker_yml "$nport" "$to" >"$out/nutcracker.$case.yml"
      valgrind --tool=callgrind --callgrind-out-file="$file" \
        nutcracker -c "$out/nutcracker.$case.yml" >/dev/null 2>"$file.log" &
      spids+=("$!")
      files+=("$file")
      if [[ $case == nut-both ]]; then
        # The client's TLS ends in a stunnel server in front of nutcracker.
        CG="$file.stunnel-front" stunnel_run "front-$n" "accept = 127.0.0.1:$port" \
          "connect = 127.0.0.1:$nport" "cert = $out/cert.pem" "key = $out/key.pem"
        files+=("$file.stunnel-front")
        front=$(free_port)
        CG='' stunnel_run "bench-client-$n" "client = yes" "accept = 127.0.0.1:$front" \
          "connect = 127.0.0.1:$port"
        wait_port "$nport" >/dev/null
      fi
      ;;
    *) echo "unknown case $case" >&2; exit 2 ;;
  esac
  wait_port "$port" >/dev/null
  wait_port "$front" >/dev/null
  proxy_run "$front" "$KURA" "$load" "$n"
  for p in "${spids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${spids[@]}"; do wait "$p" 2>/dev/null || true; done
  callgrind_total "${files[@]}"
}

per_request "$CASES"
