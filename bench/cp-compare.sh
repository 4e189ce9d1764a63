#!/usr/bin/env bash
# `longhaul cp` against globus-url-copy (GridFTP) and scp in one run, on the same host
# settings (a benchmark, not a test; see docs/cp-bench.md for the method and figures):
#   loopback  a page-cache-warm SIZE file (random data) pushed over 127.0.0.1:
#             longhaul cp  vs  globus-url-copy -fast -p 4  (+ longhaul bench --bytes SIZE)
#             (+ globus-url-copy -verify-checksum: GridFTP checking every byte, as cp does)
#   lfn       the same over `longhaul emulate` (1 Gbit/s, 180 ms by default; client in
#             namespace a, servers in namespace b): globus-url-copy -fast -p 4 -tcp-bs BDP
#   lfn-jumbo the lfn case with 9000-byte frames (as the record teams ran their paths)
#   small     10,000 files of 1-16 KiB in 10 directories: longhaul cp -r  vs  scp -r through
#             a private sshd on 127.0.0.1 (throwaway host and client keys, BatchMode)
# Every copy lands on the same file system as its source (the scratch directory), is
# fsynced and its digest checked after the timed part. Prints a table (wall s, Gbit/s,
# files/s, CPU s of client and server, CPU s/GB of both ends) and the ratios, and writes
# the JSON results to --out (default target/cp-compare.json).
#
# Needs root (namespaces, TUN, sysctl, sshd). Installs what is missing with apt-get:
#   globus-gridftp-server-progs globus-gass-copy-progs openssh-server openssh-client b3sum
#   iproute2
# For the run it raises net.core.rmem_max/wmem_max (global on this kernel) to at least
# 2 x BDP so that GridFTP's -tcp-bs BDP takes effect, and restores them on exit. A trap
# stops every server, the sshd and the emulator, and deletes the scratch directory.
#
# Usage: bench/cp-compare.sh [--size 2GiB] [--dir /var/tmp] [--out FILE] [--no-install]
#                            [--cases loopback,lfn,lfn-jumbo,small] [--reps 1] [--files 10000]
#                            [--rate 1G] [--rtt 180ms] [--mtu 1500]
#                            [--gridftp-loopback-args "-fast -p 4"]
#                            [--gridftp-lfn-args "-fast -p 4 -tcp-bs BDP"]
# Bounded: the measuring part is stopped after 14 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
size=2GiB; dir=/var/tmp; out=$PWD/target/cp-compare.json; install=1
rate=1G; rtt=180ms; pass=()
while [ $# -gt 0 ]; do
  case $1 in
    --no-install|--no-gridftp-verify|-h|--help) ;;
    *) [ $# -ge 2 ] || { echo "$1 needs a value (see --help)" >&2; exit 2; } ;;
  esac
  case $1 in
    --size) size=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --out) out=$(realpath -m "$2"); shift 2 ;;
    --no-install) install=0; shift ;;
    --rate) rate=$2; pass+=("$1" "$2"); shift 2 ;;
    --rtt) rtt=$2; pass+=("$1" "$2"); shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    --no-gridftp-verify) pass+=("$1"); shift ;;
    *) pass+=("$1" "$2"); shift 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, TUN, sysctl, sshd)" >&2; exit 2; }

need=()
command -v globus-gridftp-server >/dev/null || need+=(globus-gridftp-server-progs)
command -v globus-url-copy >/dev/null || need+=(globus-gass-copy-progs)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v scp >/dev/null || need+=(openssh-client)
command -v b3sum >/dev/null || need+=(b3sum)
command -v ss >/dev/null || need+=(iproute2)
if [ ${#need[@]} -gt 0 ]; then
  [ "$install" = 1 ] || { echo "missing packages: ${need[*]} (apt-get install -y ${need[*]})" >&2; exit 2; }
  echo "installing ${need[*]}" >&2
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi
# LONGHAUL_BIN=PATH measures another build (e.g. the previous commit's, for a before/after
# comparison in one sitting); by default the tree's own release build.
if [ -n "${LONGHAUL_BIN:-}" ]; then
  lh=$(readlink -f "$LONGHAUL_BIN")
else
  cargo build --release -q -p longhaul
  lh=$PWD/target/release/longhaul
fi
mkdir -p "$(dirname "$out")"

work=$(mktemp -d "$dir/cp-compare.XXXXXX")
name="cpb$$"
old_rmem=$(sysctl -n net.core.rmem_max); old_wmem=$(sysctl -n net.core.wmem_max)
cleanup() {
  if [ -f "$work/pids" ]; then
    while read -r pgid; do kill -TERM -- "-$pgid" 2>/dev/null || true; done < "$work/pids"
  fi
  "$lh" emulate down "$name" >/dev/null 2>&1 || true
  rm -rf "/etc/netns/lh-$name-a" "/etc/netns/lh-$name-b"
  sysctl -qw net.core.rmem_max="$old_rmem" net.core.wmem_max="$old_wmem"
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

two_bdp=$(python3 -c "
import sys
r = sys.argv[1]; m = {'k': 1e3, 'M': 1e6, 'G': 1e9, 'T': 1e12}
bps = float(r[:-1]) * m[r[-1]] if r[-1] in m else float(r)
t = sys.argv[2]
s = float(t[:-2]) / 1e3 if t.endswith('ms') else float(t.rstrip('s'))
print(int(2 * bps * s / 8))" "$rate" "$rtt")
[ "$two_bdp" -gt "$old_rmem" ] && sysctl -qw net.core.rmem_max="$two_bdp"
[ "$two_bdp" -gt "$old_wmem" ] && sysctl -qw net.core.wmem_max="$two_bdp"

bytes=$(python3 -c "
import sys; t = sys.argv[1].lower().rstrip('b'); m = 'kmgt'
print(int(float(t[:-2]) * 1024 ** (m.index(t[-2]) + 1)) if t.endswith('i') else
      int(float(t[:-1]) * 1000 ** (m.index(t[-1]) + 1)) if t[-1] in m else int(t))" "$size")
echo "scratch: $work ($(df --output=fstype "$work" | tail -n 1 | tr -d ' ')); writing $bytes random bytes" >&2
head -c "$bytes" /dev/urandom > "$work/big"
# Written back before any run (page-cache warm and clean): otherwise the first run of
# each case competes with the write-back of the source itself.
sync "$work/big"
cat "$work/big" > /dev/null   # page-cache warm
# In the background so that a signal to this script is handled at once: the trap hands it
# on and waits for the helper to stop its servers before the clean-up runs.
timeout -s TERM 840 python3 bench/cp-compare.py --work "$work" --big "$work/big" --longhaul "$lh" \
  --emu-name "$name" --out "$out" "${pass[@]}" &
helper=$!
trap 'kill -TERM $helper 2>/dev/null; wait $helper; exit 130' INT
trap 'kill -TERM $helper 2>/dev/null; wait $helper; exit 143' TERM
set +e
wait $helper
rc=$?
set -e
exit $rc
