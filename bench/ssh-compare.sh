#!/usr/bin/env bash
# `longhaul cp USER@HOST:...` (ssh start-up, TLS on every connection) against the ssh
# tools people use today, in one run, over `longhaul emulate` (1 Gbit/s, 180 ms by
# default; the client in namespace a, sshd and the daemon in namespace b), stock sysctls
# at both ends (this script changes none):
#   scp, sftp (batch put/get), rsync -e ssh (--whole-file), longhaul cp over ssh
#   (encrypted), longhaul cp over ssh --encryption off, longhaul cp to a longhaul serve
#   daemon (longhaul://), longhaul cp --via-ssh (every stream carried through ssh, as
#   when the far port is firewalled), and ssh8: the file in 8 slices over 8 ssh
#   connections at once (dd at both ends; what mscp -n 8 does, mscp not being packaged).
#   lh-sync: `longhaul sync -c` over ssh into an old copy that differs in one chunk (the
#   wall time counts the login and both ends' hashing: a pull hashes its old copy while
#   ssh logs in, cp::hash_ahead).
# --firewall: the far namespace drops every TCP port but ssh's (nft), so `lh` finds the
#   far port unreachable and falls back to ssh by itself (lh-daemon cannot run then).
# --firewall-stateful: the same, but the far host's own connections get their answers (a
#   site's usual stateful firewall), so `lh` has the far end connect back to it instead.
# For each size (warm random files) and direction (push, pull): wall time of the whole
# command (ssh login included), Mbit/s, % of the bottleneck, ratio to scp; every copy is
# compared with its source. Results as a table on stdout and JSON Lines in --out.
# Then on loopback (no emulator): longhaul bench over ssh with and without data
# encryption, throughput and CPU s/GB of both ends (where the CPU is the limit).
#
# Needs root (namespaces, TUN, sshd). Installs openssh-server, openssh-client, rsync if
# missing. A trap stops sshd, the daemon and the emulator and deletes the scratch files.
# longhaul's --json logs of every copy are kept in OUT-logs/ (plot them: longhaul plot).
# Usage: bench/ssh-compare.sh [--sizes 1GiB,2GiB] [--tools scp,sftp,rsync,lh,lh-off,lh-daemon,lh-ssh,ssh8,lh-sync]
#                             [--firewall | --firewall-stateful]
#                             [--dirs push,pull] [--rate 1G] [--rtt 180ms] [--dir /var/tmp]
#                             [--out target/ssh-compare.jsonl] [--no-loopback]
#                             [--ssh-extra "-o ControlMaster=auto -o ControlPath=/tmp/cm-%C -o ControlPersist=60"]
# LH_EXTRA="--streams 16" adds options to the lh-ssh copies.
# Bounded: each copy is stopped after 15 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=1GiB,2GiB; tools=scp,sftp,rsync,lh,lh-off,lh-daemon; dirs=push,pull
rate=1G; rtt=180ms; dir=/var/tmp; out=$PWD/target/ssh-compare.jsonl; loopback=1; ssh_extra=
firewall=0
while [ $# -gt 0 ]; do
  case $1 in
    --sizes) sizes=$2; shift 2 ;; --tools) tools=$2; shift 2 ;; --dirs) dirs=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;; --rtt) rtt=$2; shift 2 ;; --dir) dir=$2; shift 2 ;;
    --out) out=$(realpath -m "$2"); shift 2 ;; --no-loopback) loopback=0; shift ;;
    --ssh-extra) ssh_extra=$2; shift 2 ;; --firewall) firewall=1; shift ;;
    --firewall-stateful) firewall=2; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, TUN, sshd)" >&2; exit 2; }
need=()
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v scp >/dev/null || need+=(openssh-client)
command -v rsync >/dev/null || need+=(rsync)
if [ ${#need[@]} -gt 0 ]; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi
if [ -n "${LONGHAUL_BIN:-}" ]; then lh=$(readlink -f "$LONGHAUL_BIN"); else
  cargo build --release -q -p longhaul; lh=$PWD/target/release/longhaul; fi
mkdir -p "$(dirname "$out")"; : > "$out"
# longhaul's own --json logs of each copy (start line, intervals, verdict) go beside --out.
logs=${out%.jsonl}-logs; mkdir -p "$logs"

work=$(mktemp -d "$dir/ssh-compare.XXXXXX"); name="shc$$"
cleanup() {
  [ -f "$work/sshd.pid" ] && kill "$(cat "$work/sshd.pid")" 2>/dev/null || true
  pkill -f "$work/serve-marker" 2>/dev/null || true
  "$lh" emulate down "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT; trap 'exit 130' INT; trap 'exit 143' TERM

bps=$(python3 -c "
import sys; r = sys.argv[1]; m = {'k': 1e3, 'M': 1e6, 'G': 1e9}
print(int(float(r[:-1]) * m[r[-1]]) if r[-1] in m else int(r))" "$rate")
"$lh" emulate up "$name" --rate "$rate" --rtt "$rtt" --daemon >/dev/null
far=$("$lh" emulate addr "$name" b)
in_a() { "$lh" emulate exec "$name" a -- "$@"; }
in_b() { "$lh" emulate exec "$name" b -- "$@"; }

# A private sshd in b: throwaway host and user keys, root by key only.
mkdir -p "$work/ssh" "$work/src" "$work/far" "$work/back" "$work/home" /run/sshd
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
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
in_b /usr/sbin/sshd -f "$work/ssh/sshd_config"
sshopts="-p 2222 -i $work/ssh/user -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
ready_opts=$sshopts
sshopts="$sshopts $ssh_extra"
for _ in $(seq 50); do in_a ssh $ready_opts "root@$far" true 2>/dev/null && break; sleep 0.2; done
if [ "$firewall" != 0 ]; then
  command -v nft >/dev/null || { apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q nftables >/dev/null; }
  state=""
  [ "$firewall" = 2 ] && state="  ct state established,related accept\n"
  printf "table inet lhfw {\n chain input {\n  type filter hook input priority 0; policy accept;\n${state}  iifname != \"lo\" tcp dport != 2222 drop\n }\n}\n" > "$work/fw.nft"
  in_b nft -f "$work/fw.nft"
  echo "firewall: namespace b drops every new TCP connection but to 2222 (ssh)$([ "$firewall" = 2 ] && echo ', its own connections answered')"
fi

# The daemon in b (its own token and identity under the scratch HOME).
export HOME=$work/home
"$lh" serve --help >/dev/null
in_b env HOME="$work/home" bash -c "exec -a '$work/serve-marker' '$lh' serve --listen '$far' --root '$work/far' >'$work/serve.log' 2>&1 &"
for _ in $(seq 50); do grep -q "listening on" "$work/serve.log" 2>/dev/null && break; sleep 0.1; done
grep -q "listening on" "$work/serve.log" || { echo "the daemon did not start:" >&2; cat "$work/serve.log" >&2; exit 2; }

to_bytes() { python3 -c "
import sys; t = sys.argv[1].lower().rstrip('b'); m = 'kmgt'
print(int(float(t[:-2]) * 1024 ** (m.index(t[-2]) + 1)) if t.endswith('i') else int(t))" "$1"; }

run_one() { # tool direction file bytes
  local tool=$1 d=$2 f=$3 bytes=$4 src dst
  rm -f "$work/far/$f" "$work/back/$f"
  if [ "$d" = pull ]; then cp --reflink=auto "$work/src/$f" "$work/far/$f"; sync "$work/far/$f"; cat "$work/far/$f" >/dev/null; fi
  local remote="root@$far:$work/far/$f" t0 t1 rc=0
  case $d in push) src=$work/src/$f; dst=$remote ;; pull) src=$remote; dst=$work/back/$f ;; esac
  t0=$(date +%s.%N)
  case $tool in
    scp) in_a timeout 900 scp -q -P 2222 ${sshopts#-p 2222} "$src" "$dst" || rc=$? ;;
    sftp) local cmd; [ "$d" = push ] && cmd="put $src $work/far/$f" || cmd="get $work/far/$f $dst"
          echo "$cmd" | in_a timeout 900 sftp -q -b - -P 2222 ${sshopts#-p 2222} "root@$far" >/dev/null || rc=$? ;;
    rsync) in_a timeout 900 rsync --whole-file -e "ssh $sshopts" "$src" "$dst" || rc=$? ;;
    lh|lh-off) local extra=(); [ "$tool" = lh-off ] && extra=(--encryption off)
          in_a env HOME="$work/home" timeout 900 "$lh" cp --json "${extra[@]}" -e "ssh $sshopts" \
            --remote-longhaul "$lh" "$src" "$dst" > "$logs/$tool-$d-$f.jsonl" || rc=$? ;;
    lh-ssh) in_a env HOME="$work/home" timeout 900 "$lh" cp --json --via-ssh ${LH_EXTRA:-} -e "ssh $sshopts" \
            --remote-longhaul "$lh" "$src" "$dst" > "$logs/$tool-$d-$f.jsonl" || rc=$? ;;
    ssh8) local k slice=$(( (bytes + 8 * 1048576 - 1) / (8 * 1048576) )) pids=()
          [ "$d" = push ] && in_a ssh $sshopts "root@$far" "truncate -s $bytes $work/far/$f" || truncate -s "$bytes" "$work/back/$f"
          for k in 0 1 2 3 4 5 6 7; do
            if [ "$d" = push ]; then
              in_a bash -c "dd if='$work/src/$f' bs=1M skip=$((k * slice)) count=$slice status=none | timeout 900 ssh $sshopts root@$far 'dd of=$work/far/$f bs=1M seek=$((k * slice)) conv=notrunc status=none iflag=fullblock'" &
            else
              in_a bash -c "timeout 900 ssh $sshopts root@$far 'dd if=$work/far/$f bs=1M skip=$((k * slice)) count=$slice status=none' | dd of='$work/back/$f' bs=1M seek=$((k * slice)) conv=notrunc status=none iflag=fullblock" &
            fi
            pids+=($!)
          done
          for k in "${pids[@]}"; do wait "$k" || rc=$?; done ;;
    lh-sync) # sync -c into an old copy that differs in one 4 MiB chunk (the middle one).
          local old; [ "$d" = push ] && old=$work/far/$f || old=$work/back/$f
          cp --reflink=auto "$work/src/$f" "$old"
          printf 'changed' | dd of="$old" bs=1 seek=$(( bytes / 2 )) conv=notrunc status=none
          sync "$old"; cat "$old" >/dev/null
          t0=$(date +%s.%N)
          in_a env HOME="$work/home" timeout 900 "$lh" sync -c --json -e "ssh $sshopts" \
            --remote-longhaul "$lh" "$src" "$dst" > "$logs/$tool-$d-$f.jsonl" || rc=$? ;;
    lh-daemon) local r="longhaul://$far/$f"; [ "$d" = push ] && { s2=$src; d2=$r; } || { s2=$r; d2=$dst; }
          in_a env HOME="$work/home" timeout 900 "$lh" cp --json "$s2" "$d2" > "$logs/$tool-$d-$f.jsonl" || rc=$? ;;
  esac
  t1=$(date +%s.%N)
  local got; [ "$d" = push ] && got=$work/far/$f || got=$work/back/$f
  local ok=false; [ $rc = 0 ] && cmp -s "$work/src/$f" "$got" && ok=true
  python3 - "$tool" "$d" "$bytes" "$t0" "$t1" "$ok" "$bps" "$out" <<'PY'
import json, sys
tool, d, n, t0, t1, ok, bps, out = sys.argv[1:]
secs = float(t1) - float(t0); n = int(n)
rec = {"tool": tool, "direction": d, "bytes": n, "seconds": round(secs, 2),
       "mbit_s": round(n * 8 / secs / 1e6, 1), "of_bottleneck": round(n * 8 / secs / int(bps), 3),
       "verified": ok == "true"}
if not rec["verified"]:
    rec["mbit_s"] = rec["of_bottleneck"] = None
open(out, "a").write(json.dumps(rec) + "\n")
if rec["verified"]:
    print(f"{tool:10} {d:5} {n/2**30:5.1f} GiB {secs:8.1f} s {rec['mbit_s']:8.1f} Mbit/s "
          f"{100*rec['of_bottleneck']:5.1f} % ok", flush=True)
else:
    print(f"{tool:10} {d:5} {n/2**30:5.1f} GiB {secs:8.1f} s   FAILED (see its message above)", flush=True)
PY
}

echo "path: $rate x $rtt (longhaul emulate), stock sysctls: tcp_rmem=[$(sysctl -n net.ipv4.tcp_rmem)] tcp_wmem=[$(sysctl -n net.ipv4.tcp_wmem)]"
for size in ${sizes//,/ }; do
  bytes=$(to_bytes "$size"); f="f-$size"
  head -c "$bytes" /dev/urandom > "$work/src/$f"; sync "$work/src/$f"; cat "$work/src/$f" >/dev/null
  for d in ${dirs//,/ }; do for tool in ${tools//,/ }; do run_one "$tool" "$d" "$f" "$bytes"; done; done
  rm -f "$work/src/$f" "$work/far/$f" "$work/back/$f"
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("\nratios to scp (same size and direction, wall clock):")
for r in rows:
    base = [x for x in rows if x["tool"] == "scp" and x["direction"] == r["direction"] and x["bytes"] == r["bytes"]]
    if base and r["tool"] != "scp" and r["verified"] and base[0]["verified"]:
        print(f"  {r['tool']:10} {r['direction']:5} {r['bytes']/2**30:4.1f} GiB  {base[0]['seconds']/r['seconds']:5.2f}x scp")
PY

if [ "$loopback" = 1 ]; then
  echo; echo "loopback 127.0.0.1 (the CPU is the limit): longhaul bench --bytes 4GB, one stream, encrypted vs not, alternating"
  env HOME="$work/home" bash -c "exec -a '$work/serve-marker' '$lh' serve --listen 127.0.0.1 --port 5399 >'$work/serve-lo.log' 2>&1 &"
  for _ in $(seq 50); do grep -q "listening on" "$work/serve-lo.log" 2>/dev/null && break; sleep 0.1; done
  for rep in 1 2 3; do for enc in on off; do
    HOME="$work/home" "$lh" bench 127.0.0.1:5399 --bytes 4GB --encryption $enc --json | python3 -c "
import json, sys
e = [json.loads(l) for l in sys.stdin if l.startswith('{\"type\": \"end\"') or '\"type\":\"end\"' in l][-1]['summary']
print(f'  rep $rep encryption $enc: {e[\"bits_per_second\"]/1e9:6.2f} Gbit/s  CPU s/GB sender {e[\"sender\"][\"cpu_seconds_per_gb\"]:.3f} receiver {e[\"receiver\"][\"cpu_seconds_per_gb\"]:.3f}')" | tee -a "$work/lo.txt"
  done; done
fi
