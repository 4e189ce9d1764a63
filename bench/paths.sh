#!/usr/bin/env bash
# One yardstick of several path models (issue 29), in one sitting: longhaul bench and cp
# beside iperf3 (tuned, CUBIC) and globus-url-copy on
#   (a) longhaul emulate as is, (b) the same with --no-offload --no-realtime,
#   (c) a tbf shaper on the sender's own interface in front of a plain delay line,
#   (d) jitter 2 ms (normal), (e) one competing CUBIC flow for the whole run;
# prints one table (shares of the bottleneck, cp against GridFTP, CPU s/GB of cp's ends)
# and writes the raw rows to --out (each tool's own output to OUT-runs/). A benchmark,
# not a test; needs root.
#
# Usage: bench/paths.sh [--size 2GiB] [--secs 20] [--rate 1G] [--rtt 150ms] [--mtu 1500]
#                       [--buffer 1bdp|BYTES|Npkt] [--loss 1e-4] [--models a,b,c,d,e]
#                       [--build LABEL=PATH ...] [--out FILE] [--dir /var/tmp]
# Without --build the tree's release build is measured (label `this`); give several
# (e.g. --build before=/tmp/longhaul-old --build after=target/release/longhaul) for a
# before/after comparison in one sitting.
set -euo pipefail
cd "$(dirname "$0")/.."
size=2GiB; dir=/var/tmp; out=target/paths.json; builds=(); pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) [ $# -ge 2 ] || { echo "$1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case "$1" in
    --size) size=$2 ;;
    --dir) dir=$2 ;;
    --out) out=$(realpath -m "$2") ;;
    --build) builds+=(--build "${2%%=*}=$(readlink -f "${2#*=}")") ;;
    --secs|--rate|--rtt|--mtu|--buffer|--loss|--models) pass+=("$1" "$2") ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, TUN, tc)" >&2; exit 2; }
need=()
command -v iperf3 >/dev/null || need+=(iperf3)
command -v globus-gridftp-server >/dev/null || need+=(globus-gridftp-server-progs)
command -v globus-url-copy >/dev/null || need+=(globus-gass-copy-progs)
command -v tc >/dev/null || need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi
if [ ${#builds[@]} -eq 0 ]; then
  cargo build --release -q -p longhaul
  builds=(--build "this=$PWD/target/release/longhaul")
fi
mkdir -p "$(dirname "$out")"
work=$(mktemp -d "$dir/paths.XXXXXX")
old_rmem=$(sysctl -n net.core.rmem_max); old_wmem=$(sysctl -n net.core.wmem_max)
cleanup() {
  # Every tool's own output stays beside the table's JSON, for a look after the fact.
  mkdir -p "${out%.json}-runs" && cp "$work"/*.out "${out%.json}-runs/" 2>/dev/null || true
  if [ -f "$work/pids" ]; then
    while read -r pgid; do kill -TERM -- "-$pgid" 2>/dev/null || true; done < "$work/pids"
  fi
  sysctl -qw net.core.rmem_max="$old_rmem" net.core.wmem_max="$old_wmem"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# iperf3 -w 2BDP and globus-url-copy -tcp-bs need the caps raised (longhaul forces its own
# buffers as root); 2 BDP of a 10G x 500 ms path at most.
sysctl -qw net.core.rmem_max=1342177280 net.core.wmem_max=1342177280
bytes=$(python3 -c "
import sys; t = sys.argv[1].lower().rstrip('b'); m = 'kmgt'
print(int(float(t[:-2]) * 1024 ** (m.index(t[-2]) + 1)) if t.endswith('i') else
      int(float(t[:-1]) * 1000 ** (m.index(t[-1]) + 1)) if t[-1] in m else int(t))" "$size")
head -c "$bytes" /dev/urandom > "$work/big"
sync "$work/big"
cat "$work/big" > /dev/null
python3 bench/paths.py --work "$work" --big "$work/big" --out "$out" "${builds[@]}" "${pass[@]}" &
helper=$!
trap 'kill -TERM $helper 2>/dev/null; wait $helper; exit 130' INT
trap 'kill -TERM $helper 2>/dev/null; wait $helper; exit 143' TERM
set +e
wait $helper
rc=$?
set -e
exit $rc
