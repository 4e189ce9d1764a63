#!/usr/bin/env bash
# `longhaul tune` end to end (a demonstration, not a test): an emulated 1 Gbit/s, 180 ms
# path between two namespaces with stock kernel settings; iperf3 with no tuning flags
# (one stream, default buffers) before `longhaul tune --apply` at both ends, after it, and
# after `longhaul tune --revert`. Prints Mbit/s and % of the bottleneck for each.
# The drop-in and saved-state files go to a temp dir, so the host's /etc is not touched;
# the sysctls changed are the per-namespace ones of the two emulator namespaces.
# Needs root and iperf3 (apt-get install -y iperf3). Usage: bench/tune-demo.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-20}"
rate=1G
rtt=180ms
command -v iperf3 >/dev/null || { echo "install iperf3 first (apt-get install -y iperf3)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root" >&2; exit 2; }
cargo build --release -q -p longhaul
lh=$PWD/target/release/longhaul
name="tune$$"
tmp=$(mktemp -d)
cleanup() {
  for end in a b; do
    [ -e "$tmp/state-$end.json" ] && env LONGHAUL_TUNE_DROPIN="$tmp/90-longhaul-$end.conf" \
      LONGHAUL_TUNE_STATE="$tmp/state-$end.json" \
      "$lh" emulate exec "$name" "$end" -- "$lh" tune --revert >/dev/null 2>&1 || true
  done
  "$lh" emulate down "$name" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

tune_both() { # tune_both ARGS...: run `longhaul tune ARGS` in both namespaces
  for end in a b; do
    echo "== longhaul tune $* (end $end)"
    LONGHAUL_TUNE_DROPIN="$tmp/90-longhaul-$end.conf" LONGHAUL_TUNE_STATE="$tmp/state-$end.json" \
      "$lh" emulate exec "$name" "$end" -- "$lh" tune "$@" | grep -E '^(applied|reverted|skipped|CRITICAL|WARNING)' || true
  done
}

measure() { # measure LABEL: one iperf3 run a -> b, no tuning flags
  local addr json
  addr=$("$lh" emulate addr "$name" b)
  "$lh" emulate exec "$name" b -- iperf3 -s -1 -D -B "$addr" >/dev/null
  sleep 0.5
  json=$("$lh" emulate exec "$name" a -- timeout $((secs + 30)) iperf3 -c "$addr" -t "$secs" -J)
  python3 -c '
import json, sys
e = json.loads(sys.argv[2])["end"]
bps = e["sum_received"]["bits_per_second"]
print("%-22s %10.0f Mbit/s %6.1f %% of 1 Gbit/s   retransmits %d" % (
    sys.argv[1], bps / 1e6, bps / 1e7, e["sum_sent"].get("retransmits", 0)))
' "$1" "$json" | tee -a "$tmp/results"
}

"$lh" emulate up "$name" --rate "$rate" --rtt "$rtt" --daemon >/dev/null
for end in a b; do
  echo "end $end: $("$lh" emulate exec "$name" "$end" -- sysctl -n net.ipv4.tcp_congestion_control) ;" \
    "tcp_rmem $("$lh" emulate exec "$name" "$end" -- sysctl -n net.ipv4.tcp_rmem | tr '\t' ' ') ;" \
    "tcp_wmem $("$lh" emulate exec "$name" "$end" -- sysctl -n net.ipv4.tcp_wmem | tr '\t' ' ')"
done
measure "stock"
tune_both --rate "$rate" --rtt "$rtt" --apply
measure "after tune --apply"
tune_both --revert
measure "after tune --revert"
echo
echo "iperf3 -c (no flags, ${secs}s), $rate / $rtt emulated path:"
cat "$tmp/results"
