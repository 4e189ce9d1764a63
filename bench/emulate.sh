#!/usr/bin/env bash
# Speed of `longhaul emulate` (a benchmark, not a test): TCP (iperf3, one stream) through
# the emulator with no rate limit, at MTU 9000 and 1500 and RTT 0 and 100 ms, with both
# iperf3 ends on this machine beside the emulator. Prints Gbit/s and the emulator's CPU use
# (utime + stime from /proc/PID/stat, in % of one core over the transfer).
# Needs root and iperf3 (apt-get install -y iperf3). Usage: bench/emulate.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-8}"
command -v iperf3 >/dev/null || { echo "install iperf3 first (apt-get install -y iperf3)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }
cargo build --release -q -p longhaul
lh=target/release/longhaul
name="bench$$"
hz=$(getconf CLK_TCK)
trap '$lh emulate down "$name" >/dev/null 2>&1 || true' EXIT

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

run() { # mtu rtt [extra up options]
    local mtu=$1 rtt=$2; shift 2
    $lh emulate up "$name" --rtt "$rtt" --mtu "$mtu" --daemon "$@" >/dev/null
    pid=$(cat "/run/longhaul/emulate-$name.pid")
    for end in a b; do
      # Let TCP autotuning grow windows past the 100 ms BDP (per-namespace sysctls).
      $lh emulate exec "$name" "$end" -- sysctl -q -w net.ipv4.tcp_rmem="4096 131072 268435456" \
        net.ipv4.tcp_wmem="4096 16384 268435456"
    done
    $lh emulate exec "$name" b -- iperf3 -s -1 -D -B 10.99.0.2 >/dev/null
    sleep 0.3
    t0=$(cpu_ticks "$pid"); s0=$(date +%s.%N)
    json=$($lh emulate exec "$name" a -- timeout $((secs + 20)) iperf3 -c 10.99.0.2 -t "$secs" -J)
    t1=$(cpu_ticks "$pid"); s1=$(date +%s.%N)
    read -r gbps retr < <(python3 -c 'import json,sys; e=json.load(sys.stdin)["end"]; print("%.2f %d" % (e["sum_received"]["bits_per_second"]/1e9, e["sum_sent"].get("retransmits",0)))' <<<"$json")
    cpu=$(python3 -c "print('%.0f %%' % (100*($t1-$t0)/$hz/($s1-$s0)))")
    printf "%-6s %-7s %-12s %8s %14s %8s\n" "$mtu" "$rtt" "${1:-}" "$gbps" "$cpu" "$retr"
    $lh emulate stats "$name" | grep faults | sed 's/^/        /'
    $lh emulate down "$name" >/dev/null
}

printf "%-6s %-7s %-12s %8s %14s %8s\n" mtu rtt options "Gbit/s" "emulator CPU" retrans
for mtu in 9000 1500; do
  for rtt in 0ms 100ms; do
    run "$mtu" "$rtt"
  done
done
# For scale: one packet per read (no TUN offloads), as a plain forwarder would do.
run 9000 0ms --no-offload
run 1500 0ms --no-offload
