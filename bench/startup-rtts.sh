#!/usr/bin/env bash
# Round trips before the first data byte, per command, on an emulated long path (a
# benchmark, not a test): longhaul bench, bench --reverse, cp push and pull to a daemon
# (longhaul://), and cp push and pull over ssh (ssh's own start-up included, for
# information). Prints each command's `first_byte_rtts` (from its --json end record: time
# from the command's start to its first data byte sent, or received on a pull or a
# --reverse run, over the measured RTT) and `first_byte_ms`. See docs/startup.md.
# Needs root (namespaces, TUN, sshd). Usage: bench/startup-rtts.sh [RTT] [RATE] [MTU] [RUNS]
# LONGHAUL_BIN=PATH measures another build (for a before/after table in one sitting).
set -euo pipefail
cd "$(dirname "$0")/.."
rtt="${1:-436ms}"; rate="${2:-1G}"; mtu="${3:-4470}"; runs="${4:-1}"
[ "$(id -u)" = 0 ] || { echo "run as root (namespaces, TUN, sshd)" >&2; exit 2; }
if [ -n "${LONGHAUL_BIN:-}" ]; then lh=$(readlink -f "$LONGHAUL_BIN"); else
  cargo build --release -q -p longhaul; lh=$PWD/target/release/longhaul; fi
work=$(mktemp -d); name="rtts$$"
cleanup() {
  [ -f "$work/sshd.pid" ] && kill "$(cat "$work/sshd.pid")" 2>/dev/null || true
  [ -f "$work/serve.pid" ] && kill "$(cat "$work/serve.pid")" 2>/dev/null || true
  "$lh" emulate down "$name" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT; trap 'exit 130' INT; trap 'exit 143' TERM
"$lh" emulate up "$name" --rate "$rate" --rtt "$rtt" --mtu "$mtu" --daemon >/dev/null
far=$("$lh" emulate addr "$name" b)
in_a() { "$lh" emulate exec "$name" a -- "$@"; }
in_b() { "$lh" emulate exec "$name" b -- "$@"; }
mkdir -p "$work/home" "$work/far" "$work/back" "$work/ssh"
export HOME=$work/home
head -c 64M /dev/urandom > "$work/src.bin"; cp "$work/src.bin" "$work/far/pull.bin"
in_b env HOME="$work/home" bash -c "'$lh' serve --listen '$far' --root '$work/far' >'$work/serve.log' 2>&1 & echo \$! > '$work/serve.pid'"
for _ in $(seq 50); do grep -q "listening on" "$work/serve.log" 2>/dev/null && break; sleep 0.1; done
ssh_ok=false
if [ -x /usr/sbin/sshd ]; then
  ssh-keygen -q -t ed25519 -N '' -f "$work/ssh/host" && ssh-keygen -q -t ed25519 -N '' -f "$work/ssh/user"
  printf '%s\n' "Port 2222" "ListenAddress $far" "HostKey $work/ssh/host" \
    "AuthorizedKeysFile $work/ssh/user.pub" "PermitRootLogin prohibit-password" "StrictModes no" \
    "UsePAM no" "PidFile $work/sshd.pid" > "$work/ssh/sshd_config"
  mkdir -p /run/sshd  # sshd's privilege separation directory (absent on a fresh host)
  in_b /usr/sbin/sshd -f "$work/ssh/sshd_config" && ssh_ok=true
fi
sshopts="-p 2222 -i $work/ssh/user -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o BatchMode=yes -o LogLevel=ERROR"
$ssh_ok && for _ in $(seq 50); do in_a ssh $sshopts "root@$far" true 2>/dev/null && break; sleep 0.2; done

row() { # LABEL JSONL-FILE
  python3 - "$1" "$2" <<'PY'
import json, sys
label, path = sys.argv[1:]
end = None
for line in open(path):
    try: rec = json.loads(line)
    except ValueError: continue
    if rec.get("type") == "end": end = rec.get("summary", rec)
if end is None or end.get("first_byte_rtts") is None:
    print("%-26s %8s %10s" % (label, "-", "-")); sys.exit()
print("%-26s %8.2f %10.0f" % (label, end["first_byte_rtts"], end["first_byte_ms"]))
PY
}
echo "path: $rate, RTT $rtt, MTU $mtu; $runs run(s) each"
printf '%-26s %8s %10s\n' command RTTs ms
for i in $(seq "$runs"); do
  in_a timeout 120 "$lh" bench --json -t 2 "$far" > "$work/b.jsonl" || true; row "bench" "$work/b.jsonl"
  in_a timeout 120 "$lh" bench --json -t 2 -R "$far" > "$work/r.jsonl" || true; row "bench --reverse" "$work/r.jsonl"
  rm -f "$work/far/push.bin" "$work/back/pull.bin"
  in_a timeout 300 "$lh" cp --json "$work/src.bin" "longhaul://$far/push.bin" > "$work/p.jsonl" || true
  row "cp push (daemon)" "$work/p.jsonl"
  in_a timeout 300 "$lh" cp --json "longhaul://$far/pull.bin" "$work/back/pull.bin" > "$work/l.jsonl" || true
  row "cp pull (daemon)" "$work/l.jsonl"
  if $ssh_ok; then
    rm -f "$work/far/push.bin" "$work/back/pull.bin"
    in_a timeout 300 "$lh" cp --json -e "ssh $sshopts" --remote-longhaul "$lh" "$work/src.bin" "root@$far:$work/far/push.bin" > "$work/sp.jsonl" || true
    row "cp push (ssh, info)" "$work/sp.jsonl"
    in_a timeout 300 "$lh" cp --json -e "ssh $sshopts" --remote-longhaul "$lh" "root@$far:$work/far/pull.bin" "$work/back/pull.bin" > "$work/sl.jsonl" || true
    row "cp pull (ssh, info)" "$work/sl.jsonl"
  fi
done
