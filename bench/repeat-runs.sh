#!/usr/bin/env bash
# Repeat runs to one path (issue 29): N benches in a row that share the path's record, so
# every run after the first jump-starts from the one before. Shows whether the record
# holds, sinks or climbs from run to run, and how each run's first seconds go. Prints one
# line per run: its mean rate, the jump's start and verdict, the rate of each second.
# A benchmark, not a test; needs root (it makes and removes an emulated path).
#
# Usage: bench/repeat-runs.sh [BIN] [RUNS] [SECS]
#   env: RTT (100ms), RATE (1G), LOSS (1e-3)
set -euo pipefail
bin=${1:-target/release/longhaul}; runs=${2:-5}; secs=${3:-10}
rtt=${RTT:-100ms}; rate=${RATE:-1G}; loss=${LOSS:-1e-3}
work=$(mktemp -d /var/tmp/repeat.XXXXXX)
name=rp$$
cleanup() {
  pkill -f "serve --listen 10.99.0.2 --port 5314" 2>/dev/null || true
  "$bin" emulate down "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/home"
"$bin" emulate up "$name" --daemon --rtt "$rtt" --rate "$rate" --loss "$loss" >/dev/null
(setsid ip netns exec "lh-$name-b" env HOME="$work/home" "$bin" serve --listen 10.99.0.2 \
  --port 5314 > "$work/serve.log" 2>&1 &)
sleep 1
for i in $(seq "$runs"); do
  ip netns exec "lh-$name-a" env HOME="$work/home" "$bin" bench 10.99.0.2:5314 -t "${secs}s" \
    -i 1s --json > "$work/run.json" 2>&1 || true
  python3 - "$i" "$work/run.json" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[2]) if l.startswith('{')]
iv = [o for o in lines if o.get('type') == 'interval']
end = lines[-1] if lines else {}
js = (end.get('summary') or {}).get('jump_start') or end.get('jump_start') or {}
mean = sum(o['bits_per_second'] for o in iv) / max(len(iv), 1) / 1e6
print(f"run {sys.argv[1]}: mean {mean:.0f} Mbit/s, jump start {(js.get('start_rate_bps') or 0) / 1e6:.0f}"
      f" ({js.get('verdict')}), per second {[round(o['bits_per_second'] / 1e6) for o in iv]}")
PY
done
