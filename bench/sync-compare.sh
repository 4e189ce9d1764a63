#!/usr/bin/env bash
# `longhaul sync` against rsync (over ssh and to an rsync daemon) and against a full
# `longhaul cp`, in one run, over `longhaul emulate` (1 Gbit/s x 180 ms by default; the
# client in namespace a, sshd, rsync --daemon and longhaul serve --root in namespace b),
# stock sysctls at both ends (this script changes none). Issue 16's benchmark:
#   big   a SIZE file (4 GiB) of random bytes, 1 % of its 4 MiB blocks rewritten at random
#         places (fixed seed) since the destination's copy was made: rsync -a (ssh, daemon),
#         longhaul sync (ssh, daemon), longhaul cp (ssh, daemon: the full copy). The
#         destination is put back to the old version before each run, longhaul's hash
#         caches emptied (both ends hash). Bars: sync >= 5x faster than rsync, >= 10x fewer
#         bytes on the wire than the full cp; CPU s/GB at each end.
#   tree  10,000 files of 1-16 KiB: an initial sync, then a second one with nothing
#         changed (hash caches warm). Bars: <= 1.5 s, >= 3x faster than rsync.
# Per run: wall time (ssh login included), bytes on the wire each way (the emulator's
# counters of what each end offered to the bottleneck), CPU seconds of the client and of
# the far end, the copy checked against the source. Table on stdout, JSON Lines in --out.
# When `longhaul sync --help` fails (no sync in this build) its rows are skipped, saying so.
#
# Needs root (namespaces, TUN, sshd). Installs openssh-server, openssh-client and rsync if
# missing. A trap stops sshd, the daemons and the emulator and deletes the scratch files.
# Over ssh every run pays OpenSSH's login (about 16 round trips: ~2.9 s at 180 ms);
# --ssh-extra "-o ControlMaster=auto -o ControlPath=/tmp/cm-%C -o ControlPersist=60"
# lets every run after the first reuse one connection.
#
# Usage: bench/sync-compare.sh [--size 4GiB] [--block 4MiB] [--percent 1] [--seed 16]
#          [--files 10000] [--cases big,tree]
#          [--tools rsync-ssh,rsyncd,rsyncd-inplace,lh-sync-ssh,lh-sync-daemon,
#                   lh-sync-inplace-ssh,lh-sync-inplace-daemon,lh-cp-ssh,lh-cp-daemon]
#          [--rate 1G] [--rtt 180ms] [--dir /var/tmp] [--out target/sync-compare.jsonl]
#          [--ssh-extra "SSH OPTIONS"]
#   e.g. a quick check: bench/sync-compare.sh --size 1GiB --files 2000
# LONGHAUL_BIN=PATH measures another build. Bounded: each run is stopped after 15 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
size=4GiB; rate=1G; rtt=180ms; dir=/var/tmp; out=$PWD/target/sync-compare.jsonl; ssh_extra=
cases=big,tree; pass=()
while [ $# -gt 0 ]; do
  case $1 in -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
  [ $# -ge 2 ] || { echo "$1 needs a value (see --help)" >&2; exit 2; }
  case $1 in
    --size) size=$2 ;; --rate) rate=$2 ;; --rtt) rtt=$2 ;; --dir) dir=$2 ;;
    --out) out=$(realpath -m "$2") ;; --ssh-extra) ssh_extra=$2 ;; --cases) cases=$2 ;;
    --block|--percent|--seed|--files|--tools) pass+=("$1" "$2") ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift 2
done
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, TUN, sshd)" >&2; exit 2; }
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null || need+=(openssh-client)
command -v rsync >/dev/null || need+=(rsync)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing ${need[*]}" >&2
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi
if [ -n "${LONGHAUL_BIN:-}" ]; then lh=$(readlink -f "$LONGHAUL_BIN"); else
  cargo build --release -q -p longhaul; lh=${CARGO_TARGET_DIR:-$PWD/target}/release/longhaul; fi
mkdir -p "$(dirname "$out")"; : > "$out"

work=$(mktemp -d "$dir/sync-compare.XXXXXX"); name="syc$$"
cleanup() {
  if [ -f "$work/pids" ]; then  # servers the helper started, one process group a line
    while read -r pgid; do kill -TERM -- "-$pgid" 2>/dev/null || true; done < "$work/pids"
  fi
  [ -f "$work/sshd.pid" ] && kill "$(cat "$work/sshd.pid")" 2>/dev/null || true
  "$lh" emulate down "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT; trap 'exit 130' INT; trap 'exit 143' TERM

"$lh" emulate up "$name" --rate "$rate" --rtt "$rtt" --daemon >/dev/null
far=$("$lh" emulate addr "$name" b)
in_a() { "$lh" emulate exec "$name" a -- "$@"; }
in_b() { "$lh" emulate exec "$name" b -- "$@"; }

# A private sshd in b (as bench/ssh-compare.sh): throwaway host and user keys, root by key.
mkdir -p "$work/ssh" "$work/src" /run/sshd
ssh-keygen -q -t ed25519 -N '' -f "$work/ssh/host" && ssh-keygen -q -t ed25519 -N '' -f "$work/ssh/user"
cat > "$work/ssh/sshd_config" <<EOF
Port 2222
ListenAddress $far
HostKey $work/ssh/host
AuthorizedKeysFile $work/ssh/user.pub
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
PidFile $work/sshd.pid
EOF
in_b /usr/sbin/sshd -f "$work/ssh/sshd_config"
sshopts="-p 2222 -i $work/ssh/user -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
for _ in $(seq 50); do in_a ssh $sshopts "root@$far" true 2>/dev/null && break; sleep 0.2; done
sshopts="$sshopts $ssh_extra"

bytes=$(python3 -c "
import sys; t = sys.argv[1].lower().rstrip('b'); m = 'kmgt'
print(int(float(t[:-2]) * 1024 ** (m.index(t[-2]) + 1)) if t.endswith('i') else int(t))" "$size")
echo "path: $rate x $rtt (longhaul emulate), stock sysctls: tcp_rmem=[$(sysctl -n net.ipv4.tcp_rmem)] tcp_wmem=[$(sysctl -n net.ipv4.tcp_wmem)]"
echo "scratch: $work ($(df --output=fstype "$work" | tail -n 1 | tr -d ' ')); $(rsync --version | head -n 1)"
if [[ ",$cases," == *,big,* ]]; then
  echo "writing $bytes random bytes" >&2
  head -c "$bytes" /dev/urandom > "$work/src/big"
  touch -d '-1 hour' "$work/src/big"
fi
# In the background so that a signal is handled at once (the trap stops its servers).
timeout -s TERM 3600 python3 bench/sync-compare.py --work "$work" --longhaul "$lh" \
  --emu-name "$name" --far "$far" --ssh-opts "$sshopts" --sshd-pid "$(cat "$work/sshd.pid")" \
  --size "$bytes" --cases "$cases" --out "$out" "${pass[@]}" &
helper=$!
trap 'kill -TERM $helper 2>/dev/null; wait $helper; exit 130' INT
trap 'kill -TERM $helper 2>/dev/null; wait $helper; exit 143' TERM
set +e
wait $helper
rc=$?
set -e
exit $rc
