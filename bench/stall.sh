#!/usr/bin/env bash
# A stall of the path while a copy jump-starts (issue 29): the emulator stops for STALL_MS
# (SIGSTOP, as a loaded host's late packet loop or a route flap would) AT_S seconds after a
# cp push of 192 MiB starts, on a path a bench has just recorded. Prints the copy's time,
# the jump's verdict and each half second's rate, retransmits and held rate (Mbit/s).
# CI's loaded machine (99.6 ms of emulator lateness) once took a cp push to 84 Mbit/s on
# a 1 Gbit/s path this way. A benchmark, not a test; needs root (it makes and removes an
# emulated path).
#
# With BURST=P (percent) the path does not stop but the receiver's namespace drops P % of
# the full-size packets that reach it (nftables) for STALL_MS: a burst of loss in the
# jump's first round trips, as a late emulator's overflowing queue gives (CI once saw
# 1449 retransmits and a held rate of 9 Mbit/s after such a jump retreated on loss). With
# BURST_SIDE=sender the sender's own output drops them: a local drop, as a full queue of a
# shaper on the sender's interface gives.
#
# With SEED_RATE=BPS the bench's record of the path is rewritten to that rate before the
# copy: a stale record far under what the path carries now (a copy jumps to it, and must
# climb from there). STALL_MS 0 then gives the climb alone.
#
# Usage: bench/stall.sh [BIN] [STALL_MS] [AT_S] [cp options...]
#   env: RTT (100ms), RATE (1G), LOSS (1e-3), BURST, BURST_SIDE, SEED_RATE; LONGHAUL_PACER_TRACE=1
#   traces the pacer to the work directory's cp.err (kept with KEEP=1)
set -euo pipefail
bin=$(realpath "${1:-target/release/longhaul}"); stall_ms=${2:-250}; at=${3:-0.3}
shift $(( $# < 3 ? $# : 3 ))
rtt=${RTT:-100ms}; rate=${RATE:-1G}; loss=${LOSS:-1e-3}
work=$(mktemp -d /var/tmp/stall.XXXXXX)
name=st$$
cleanup() {
  pkill -CONT -f "emulate up $name" 2>/dev/null || true
  pkill -f "serve --listen 10.99.0.2 --port 5315" 2>/dev/null || true
  "$bin" emulate down "$name" >/dev/null 2>&1 || true
  [ -n "${KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/home" "$work/root"
head -c 192M /dev/urandom > "$work/src.bin"
"$bin" emulate up "$name" --daemon --rtt "$rtt" --rate "$rate" --loss "$loss" >/dev/null
emulator=$(pgrep -f "emulate up $name" | head -1)
(setsid ip netns exec "lh-$name-b" env HOME="$work/home" "$bin" serve --listen 10.99.0.2 \
  --port 5315 --root "$work/root" > "$work/serve.log" 2>&1 &)
sleep 1
ip netns exec "lh-$name-a" env HOME="$work/home" "$bin" bench 10.99.0.2:5315 -t 3s --json \
  > /dev/null 2>&1
if [ -n "${SEED_RATE:-}" ]; then
  cache="$work/home/.cache/longhaul/paths"
  awk -v r="$SEED_RATE" 'NR == 1 { print; next } { $3 = r; print }' "$cache" > "$cache.new"
  mv "$cache.new" "$cache"
fi
side=b; hook=prerouting
[ "${BURST_SIDE:-receiver}" = sender ] && { side=a; hook=output; }
if [ -n "${BURST:-}" ]; then
  ip netns exec "lh-$name-$side" nft add table inet burst
  ip netns exec "lh-$name-$side" nft add chain inet burst drops \
    "{ type filter hook $hook priority 0; }"
fi
burst() {  # on|off
  if [ "$1" = on ]; then
    ip netns exec "lh-$name-$side" nft add rule inet burst drops meta length gt 1000 \
      numgen random mod 100 lt "$BURST" drop
  else
    ip netns exec "lh-$name-$side" nft flush chain inet burst drops
  fi
}
(sleep "$at"; if [ "$stall_ms" -gt 0 ]; then
  if [ -n "${BURST:-}" ]; then burst on; else kill -STOP "$emulator"; fi
  sleep "$(python3 -c "print($stall_ms / 1000)")"
  if [ -n "${BURST:-}" ]; then burst off; else kill -CONT "$emulator"; fi; fi) &
ip netns exec "lh-$name-a" env HOME="$work/home" "$bin" cp --json -i 0.5s "$@" \
  "$work/src.bin" longhaul://10.99.0.2:5315/data.bin > "$work/cp.json" 2> "$work/cp.err" \
  || tail -3 "$work/cp.err"
wait
python3 - "$work/cp.json" "$stall_ms" "$at" ${BURST:+"$BURST"} <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{')]
iv = [o for o in lines if o.get('type') == 'interval']
end = [o for o in lines if o.get('type') == 'end'][-1]
js = end.get('jump_start') or {}
print(f"{'burst' if len(sys.argv) > 4 else 'stall'} {sys.argv[2]} ms at {sys.argv[3]} s: {end['seconds']:.1f} s, "
      f"{end['bits_per_second'] / 1e6:.0f} Mbit/s, jump {js.get('verdict')} ({js.get('retreat')}), "
      f"retransmits {sum(o['retransmits'] for o in iv)}")
print("  per 0.5 s (Mbit/s/retransmits/held):",
      " ".join(f"{o['bits_per_second'] / 1e6:.0f}/{o['retransmits']}/{(o.get('held_rate_bps') or 0) / 1e6:.0f}"
               for o in iv))
PY
