#!/usr/bin/env bash
# `longhaul serve` under load and abuse, on loopback (a benchmark, not a test): starts a
# real server, opens a flood of connections that never authenticate (bare TCP, stalled
# mid-TLS, silent after TLS), then runs CLIENTS concurrent `longhaul bench` clients
# (every other one -R) against it while the flood stays open, and reports each client's
# throughput (min / median / max share), the total, every client's outcome, and the
# server's peak RSS (VmHWM) and peak thread count (sampled every 50 ms).
#
# Usage: bench/server-load.sh [CLIENTS] [RUN] [STREAMS] [FLOOD]
#   CLIENTS  concurrent bench clients (default 64)
#   RUN      -t duration like 3s, or a byte budget like 64MiB (default 3s)
#   STREAMS  streams per client (default 2)
#   FLOOD    idle connections (plus FLOOD/4 stalled mid-TLS, FLOOD/4 silent after TLS;
#            default 200)
# LONGHAUL_BIN=PATH measures another build. Bounded: every client has a timeout, the
# server and the flood are killed and the scratch directory removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
clients="${1:-64}"; run="${2:-3s}"; streams="${3:-2}"; flood="${4:-200}"
if [ -n "${LONGHAUL_BIN:-}" ]; then
  lh=$(readlink -f "$LONGHAUL_BIN")
else
  cargo build --release -q -p longhaul
  lh=$PWD/target/release/longhaul
fi
case "$run" in
  *[0-9]s|*ms) run_args=(-t "$run") ;;
  *) run_args=(--bytes "$run") ;;
esac

dir=$(mktemp -d)
server_pid=""; flood_pid=""; sampler_pid=""
cleanup() {
  for p in $sampler_pid $flood_pid $server_pid; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/token"
chmod 600 "$dir/token"
"$lh" serve --listen 127.0.0.1 --port "$port" --token-file "$dir/token" \
  --identity-dir "$dir/id" >"$dir/serve.log" 2>&1 &
server_pid=$!
for _ in $(seq 100); do  # at most 10 s for the server to listen
  python3 -c "import socket;socket.create_connection(('127.0.0.1',$port),0.2).close()" 2>/dev/null && break
  sleep 0.1
done
common=(--token-file "$dir/token" --known-servers "$dir/known")
# First contact pins the certificate (one client, so 64 do not race to write the file).
"$lh" bench "127.0.0.1:$port" "${common[@]}" --bytes 1MiB >/dev/null

# The flood, held open until killed.
python3 - "$port" "$flood" >"$dir/flood.log" 2>&1 <<'EOF' &
import socket, ssl, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
held, tls_ok = [], 0
for _ in range(n):
    held.append(socket.create_connection(("127.0.0.1", port)))
for _ in range(n // 4):  # a TLS record header promising 512 bytes, then nothing
    s = socket.create_connection(("127.0.0.1", port)); s.sendall(bytes([22, 3, 1, 2, 0, 1, 0, 1])); held.append(s)
ctx = ssl.create_default_context(); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
for _ in range(n // 4):
    try:
        s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=10)); held.append(s); tls_ok += 1
    except Exception:
        pass
print(f"flood open: {n} idle, {n // 4} mid-TLS, {tls_ok} silent after TLS", flush=True)
time.sleep(600)
EOF
flood_pid=$!
for _ in $(seq 200); do grep -q "flood open" "$dir/flood.log" && break; sleep 0.1; done

# Peak threads, sampled while the clients run.
( peak=0; while kill -0 "$server_pid" 2>/dev/null; do
    t=$(awk '/^Threads:/{print $2}' "/proc/$server_pid/status" 2>/dev/null || echo 0)
    [ "${t:-0}" -gt "$peak" ] && peak=$t && echo "$peak" >"$dir/threads"
    sleep 0.05
  done ) &
sampler_pid=$!

t0=$(date +%s.%N)
for i in $(seq "$clients"); do
  rev=(); [ $((i % 2)) = 0 ] && rev=(-R)
  timeout 120 "$lh" bench "127.0.0.1:$port" "${common[@]}" -P "$streams" "${run_args[@]}" \
    "${rev[@]}" --json >"$dir/client.$i" 2>&1 &
done
wait_clients() { for p in $(jobs -p); do [ "$p" = "$server_pid" ] || [ "$p" = "$flood_pid" ] || [ "$p" = "$sampler_pid" ] || wait "$p" || true; done; }
wait_clients
t1=$(date +%s.%N)
hwm=$(awk '/^VmHWM:/{print $2, $3}' "/proc/$server_pid/status")
threads_now=$(awk '/^Threads:/{print $2}' "/proc/$server_pid/status")
kill "$sampler_pid" 2>/dev/null || true; sampler_pid=""

python3 - "$dir" "$clients" "$t0" "$t1" "$hwm" "$(cat "$dir/threads" 2>/dev/null || echo "?")" \
  "$threads_now" "$(cat "$dir/flood.log")" "$run" "$streams" <<'EOF'
import glob, json, statistics, sys
d, n, t0, t1, hwm, peak_threads, threads_now, flood, run, streams = sys.argv[1:]
n = int(n); rates = []; errors = []
for i in range(1, n + 1):
    end = None; err = None
    for line in open(f"{d}/client.{i}", errors="replace"):
        try:
            o = json.loads(line)
        except ValueError:
            err = err or line.strip()
            continue
        if o.get("type") == "end":
            end = o
        elif o.get("type") == "error":
            err = o.get("message", str(o))
    if end:
        rates.append(end["summary"]["bits_per_second"])
    else:
        errors.append(f"client {i}: {err or 'no end line'}")
print(f"server-load: {n} clients x {streams} streams, {run} each, every other -R; {flood}")
print(f"  finished: {len(rates)} of {n}; wall {float(t1) - float(t0):.1f} s")
if rates:
    g = [r / 1e9 for r in sorted(rates)]
    print(f"  per client Gbit/s: min {g[0]:.3f}  median {statistics.median(g):.3f}  max {g[-1]:.3f}"
          f"  (min/median {g[0] / statistics.median(g):.2f})")
    print(f"  total of the clients' rates: {sum(g):.2f} Gbit/s")
print(f"  server peak RSS (VmHWM): {hwm}; threads: peak {peak_threads}, after the run {threads_now}")
for e in errors:
    print("  " + e)
sys.exit(0 if not errors else 1)
EOF
