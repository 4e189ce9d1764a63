#!/usr/bin/env bash
# longhaul bench against iperf3 over an emulated long fat path, in one run (a benchmark,
# not a test). Builds a 1 Gbit/s, 180 ms path (stock sysctls inside the namespaces) and runs:
#   clean path:   iperf3 with no flags, then longhaul bench with no flags
#   lossy path:   (1e-4 random loss) iperf3 -w 2BDP -C cubic (tuned by hand), then
#                 longhaul bench with no flags
# and prints each rate as a share of the bottleneck and the ratios.
# Needs root and iperf3. Usage: bench/lfn.sh [SECONDS] [RATE] [RTT] [MTU]
#
# bench/lfn.sh --longest [RUNS] [RATE] [RTT] [MTU]   (defaults 10 1G 436ms 4470)
#   the longest paths (issue 15; bench/longest.py): a first-run 20 s bench, a second run
#   (jump-start), then RUNS x 40 s with --no-jump-start; per run the share of the
#   bottleneck, drops at the bottleneck, srtt over the minimum RTT after the start-up, the
#   largest held rate over the bottleneck and the round trips before the first data byte.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --longest ]; then
  [ "$(id -u)" = 0 ] || { echo "run as root (namespaces, TUN)" >&2; exit 2; }
  runs="${2:-10}"; rate="${3:-1G}"; rtt="${4:-436ms}"; mtu="${5:-4470}"
  if [ -n "${LONGHAUL_BIN:-}" ]; then lh=$(readlink -f "$LONGHAUL_BIN"); else
    cargo build --release -q -p longhaul; lh=$PWD/target/release/longhaul; fi
  name="lgst$$"
  trap '"$lh" emulate down "$name" >/dev/null 2>&1 || true' EXIT
  echo "path: $rate, RTT $rtt, MTU $mtu, buffer 1 BDP, stock sysctls"
  "$lh" emulate up "$name" --rate "$rate" --rtt "$rtt" --mtu "$mtu" --daemon >/dev/null
  python3 bench/longest.py "$lh" "$name" "$rate" "$rtt" "$mtu" "$runs" "${OUT:-target/longest}"
  exit 0
fi
secs="${1:-30}"; rate="${2:-1G}"; rtt="${3:-180ms}"; mtu="${4:-1500}"
command -v iperf3 >/dev/null || { echo "install iperf3 first (apt-get install -y iperf3)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, TUN)" >&2; exit 2; }
# LONGHAUL_BIN=PATH measures another build (e.g. the previous commit's, for a before/after
# comparison in one sitting); by default the tree's own release build.
if [ -n "${LONGHAUL_BIN:-}" ]; then
  lh=$(readlink -f "$LONGHAUL_BIN")
else
  cargo build --release -q -p longhaul
  lh=$PWD/target/release/longhaul
fi
name="lfn$$"
out=$(mktemp)
old_rmem=$(sysctl -n net.core.rmem_max); old_wmem=$(sysctl -n net.core.wmem_max)
cleanup() {
  "$lh" emulate down "$name" >/dev/null 2>&1 || true
  rm -f "$out"
  sysctl -qw net.core.rmem_max="$old_rmem" net.core.wmem_max="$old_wmem"
}
trap cleanup EXIT

rate_bps=$(python3 -c "import sys;import re
s=sys.argv[1];m={'k':1e3,'K':1e3,'M':1e6,'G':1e9,'T':1e12}
print(int(float(s[:-1])*m[s[-1]]) if s[-1] in m else int(float(s)))" "$rate")
rtt_s=$(python3 -c "import sys;s=sys.argv[1];print(float(s[:-2])/1e3 if s.endswith('ms') else float(s.rstrip('s')))" "$rtt")
two_bdp=$(python3 -c "print(int(2*$rate_bps*$rtt_s/8))")

report() { # report LABEL BPS RETRANSMITS
  python3 -c '
import sys
label, bps, rx = sys.argv[1], float(sys.argv[2]), sys.argv[3]
print("%-44s %9.1f Mbit/s %6.1f %% of the bottleneck  retransmits %s" % (label, bps/1e6, 100*bps/float(sys.argv[4]), rx))
' "$1" "$2" "$3" "$rate_bps" | tee -a "$out"
}

iperf() { # iperf LABEL ARGS...
  local label=$1; shift
  local addr; addr=$("$lh" emulate addr "$name" b)
  "$lh" emulate exec "$name" b -- iperf3 -s -1 -D -B "$addr" >/dev/null
  sleep 0.5
  local json; json=$("$lh" emulate exec "$name" a -- timeout $((secs + 60)) iperf3 -c "$addr" -t "$secs" -J "$@")
  read -r bps rx < <(python3 -c 'import json,sys; e=json.loads(sys.argv[1])["end"]; print(e["sum_received"]["bits_per_second"], e["sum_sent"].get("retransmits",0))' "$json")
  report "$label" "$bps" "$rx"
  echo "$bps" > "$out.$label_key"
}

bench() { # bench LABEL ARGS...
  local label=$1; shift
  local addr; addr=$("$lh" emulate addr "$name" b)
  "$lh" emulate exec "$name" b -- sh -c "'$lh' serve --listen '$addr' --once >/dev/null 2>&1 &"
  sleep 0.5
  local json; json=$("$lh" emulate exec "$name" a -- timeout $((secs + 60)) "$lh" bench "$addr" -t "$secs" --json "$@" | tail -n 1)
  read -r bps rx fb < <(python3 -c 'import json,sys; s=json.loads(sys.argv[1])["summary"]; print(s["bits_per_second"], s["retransmits"], s.get("first_byte_rtts"))' "$json")
  report "$label" "$bps" "$rx"
  echo "  first data byte after $fb RTT (docs/startup.md)"
  echo "$bps" > "$out.$label_key"
}

echo "path: $rate, RTT $rtt, MTU $mtu, buffer 1 BDP; ${secs} s per run"
"$lh" emulate up "$name" --rate "$rate" --rtt "$rtt" --mtu "$mtu" --daemon >/dev/null
label_key=iperf_clean; iperf "iperf3 (no flags), clean path"
label_key=lh_clean; bench "longhaul bench (no flags), clean path"
"$lh" emulate down "$name" >/dev/null
"$lh" emulate up "$name" --rate "$rate" --rtt "$rtt" --mtu "$mtu" --loss 1e-4 --daemon >/dev/null
# Tuning iperf3 by hand includes lifting the kernel's caps so that -w takes effect (these
# two are global on this kernel, so they are restored on exit).
sysctl -qw net.core.rmem_max="$two_bdp" net.core.wmem_max="$two_bdp"
label_key=iperf_loss; iperf "iperf3 -w 2BDP -C cubic, loss 1e-4" -w "$two_bdp" -C cubic
sysctl -qw net.core.rmem_max="$old_rmem" net.core.wmem_max="$old_wmem"
label_key=lh_loss; bench "longhaul bench (no flags), loss 1e-4"
python3 - "$out" <<'PY'
import sys
o = sys.argv[1]
r = lambda k: float(open(f"{o}.{k}").read())
print("ratio longhaul/iperf3, clean path: %.2f" % (r("lh_clean") / r("iperf_clean")))
print("ratio longhaul/iperf3 tuned, loss 1e-4: %.2f" % (r("lh_loss") / r("iperf_loss")))
PY
rm -f "$out".*
