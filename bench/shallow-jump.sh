#!/usr/bin/env bash
# Benches that jump into a shallow buffer (issue 29): 1 Gbit/s x 150 ms, MTU 9000, a 1 MB
# buffer (1/19 of the BDP) through `longhaul emulate`, as model (b) (--no-offload
# --no-realtime), (d) (2 ms normal jitter) or (a) (as is) of bench/paths.sh. The first
# bench records the path; each next one jumps from that record into the buffer, loses
# the overshoot, retreats and starts up again. Prints each run's rate, its first eight
# seconds, its cruise and whether the streams' windows were refilled; each run's output
# and pacer trace stay in OUT (default target/shallow-jump). A benchmark, not a test;
# needs root.
#
# Usage: bench/shallow-jump.sh BIN [MODEL=b] [RUNS=6] [SECS=12] [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, TUN)" >&2; exit 2; }
bin=$(readlink -f "$1"); model=${2:-b}; runs=${3:-6}; secs=${4:-12}
out=$(realpath -m "${5:-target/shallow-jump}")
flags=(--rtt 150ms --mtu 9000 --rate 1G --buffer 1MB)
case $model in
  a) ;;
  b) flags+=(--no-offload --no-realtime) ;;
  d) flags+=(--jitter 2ms --jitter-model normal) ;;
  *) echo "model $model: one of a, b, d" >&2; exit 2 ;;
esac
name=shj$$
mkdir -p "$out"
work=$(mktemp -d /var/tmp/shallow-jump.XXXXXX)
server=
cleanup() {
  # Every step, whatever the one before did (errexit is on).
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  "$bin" emulate down "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
"$bin" emulate up "$name" --daemon "${flags[@]}" >/dev/null
# One HOME for server and client: the token, and the path's record the jumps start from.
export HOME=$work/home
mkdir -p "$HOME" "$work/root"
port=7460
ip netns exec "lh-$name-b" "$bin" serve --listen 10.99.0.2 --port $port --root "$work/root" \
  > "$out/serve.log" 2>&1 &
server=$!
for _ in $(seq 50); do
  grep -q "listening on" "$out/serve.log" 2>/dev/null && break
  sleep 0.1
done
for i in $(seq "$runs"); do
  LONGHAUL_PACER_TRACE=1 ip netns exec "lh-$name-a" "$bin" bench "10.99.0.2:$port" -t "$secs" \
    > "$out/run$i.out" 2> "$out/run$i.trace"
  total=$(grep '^Total' "$out/run$i.out" | sed 's/.* = \([0-9.]* [MG]bit\/s\).*/\1/')
  seconds=$(grep 'SUM' "$out/run$i.out" | head -8 | awk '{printf "%s ", $6}')
  cruise=$(grep 'Bottleneck probe' "$out/run$i.out" | sed 's/.*then ran on //')
  refilled=$(grep -c 'windows short of the held rate: bbr restarted' "$out/run$i.trace" || true)
  jump=$(grep -A1 '^jump-start' "$out/run$i.out" | grep -o 'not used\|confirmed\|retreated ([a-z ]*)' | head -1 || true)
  echo "run $i: $total; Mbit/s each second: $seconds; jump $jump; cruise $cruise; refills $refilled"
done
