#!/usr/bin/env bash
# A third-party copy over an emulated long fat path, beside a direct pull on the same path.
#
#   bench/third-party.sh [BIN] [RATE] [RTT] [SIZE_MIB] [FILES]
#
# Hosts A and B are the two ends of `longhaul emulate` (RATE x RTT, default 1G x 180ms),
# each running `longhaul serve`. The invoking host C is a third namespace behind A on a
# slow link (20 Mbit/s each way, tbf), routed through A. Runs, one after another:
#   1. direct:      B pulls the SIZE_MIB file from A itself (`longhaul cp` in B);
#   2. third-party: C runs `longhaul cp longhaul://A/big longhaul://B/big3` (the data goes
#                   A -> B; C sees only the progress);
#   3. kill:        the third-party copy again into a new name, B's server killed half way,
#                   started again, and the same command rerun (it must resume);
#   4. tree:        a tree of FILES files (1 MiB each), direct and third-party.
# THIRD_PARTY_FIRST=1 runs the third-party copy of the file before the direct pull;
# REPS=N repeats that pair N times; CP_FLAGS adds flags to every cp (--no-jump-start).
# Every copy is checked byte for byte (cmp). Prints one line per run; root needed.
set -euo pipefail
lh=${1:-target/release/longhaul}
rate=${2:-1G}
rtt=${3:-180ms}
size_mib=${4:-2048}
files=${5:-1000}
lh=$(readlink -f "$lh")
name=tp$$
work=$(mktemp -d /var/tmp/lh-third-party.XXXX)
export HOME=$work/home
mkdir -p "$HOME" "$work/a" "$work/b"
cleanup() {
    pkill -f "serve --listen 10.99.0" 2>/dev/null || true
    ip netns del "lh-$name-c" 2>/dev/null || true
    "$lh" emulate down "$name" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
"$lh" emulate up "$name" --rate "$rate" --rtt "$rtt" --daemon >/dev/null
A=$("$lh" emulate addr "$name" a)
B=$("$lh" emulate addr "$name" b)
nsa=lh-$name-a nsb=lh-$name-b nsc=lh-$name-c
# C: a third namespace behind A on a slow link, routed through A.
ip netns add "$nsc"
ip link add "c$$" type veth peer name "ca$$"
ip link set "c$$" netns "$nsc"
ip link set "ca$$" netns "$nsa"
ip -n "$nsc" addr add 10.98.0.2/30 dev "c$$"
ip -n "$nsa" addr add 10.98.0.1/30 dev "ca$$"
ip -n "$nsc" link set lo up
ip -n "$nsc" link set "c$$" up
ip -n "$nsa" link set "ca$$" up
ip -n "$nsc" route add default via 10.98.0.1
ip -n "$nsb" route add 10.98.0.0/30 dev lh0 via "$A"
ip netns exec "$nsa" sysctl -qw net.ipv4.ip_forward=1
tc -n "$nsc" qdisc add dev "c$$" root tbf rate 20mbit burst 16kb latency 50ms
tc -n "$nsa" qdisc add dev "ca$$" root tbf rate 20mbit burst 16kb latency 50ms
in_a() { ip netns exec "$nsa" "$@"; }
in_b() { ip netns exec "$nsb" "$@"; }
in_c() { ip netns exec "$nsc" "$@"; }

head -c $((size_mib << 20)) /dev/urandom > "$work/a/big"
mkdir -p "$work/a/tree"
for i in $(seq "$files"); do head -c 1048576 /dev/urandom > "$work/a/tree/f$i"; done
sync

serve_b() {
    in_b "$lh" serve --listen "$B" --port 7080 --root "$work/b" >>"$work/b.log" 2>&1 &
    for _ in $(seq 50); do grep -q "listening on" "$work/b.log" 2>/dev/null && return; sleep 0.1; done
}
in_a "$lh" serve --listen "$A" --port 7080 --root "$work/a" >"$work/a.log" 2>&1 &
serve_b
sleep 0.5
echo "path: $rate x $rtt, A=$A B=$B, C behind A on 20 Mbit/s; file $size_mib MiB, tree $files x 1 MiB"

run() { # label, namespace runner, args...
    local label=$1 runner=$2
    shift 2
    local t0 t1 out
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    out=$($runner "$lh" cp --json ${CP_FLAGS:-} "$@" | tail -1)
    t1=$(date +%s.%N)
    python3 - "$label" "$t0" "$t1" "$out" <<'EOP'
import json, sys
label, t0, t1, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
moved = out.get("sent_bytes", 0)
secs = out.get("seconds", 0.0)
wall = t1 - t0
print(f"{label:28s} moved {moved/2**20:8.0f} MiB in {secs:6.2f} s = {moved*8/max(secs,1e-9)/1e6:7.1f} Mbit/s "
      f"(wall {wall:6.2f} s = {moved*8/wall/1e6:7.1f} Mbit/s), resumed {out.get('resumed_bytes',0)/2**20:.0f} MiB, ok={out.get('ok')}")
EOP
}

# The second copy on a path starts at the rate the first remembered (jump-start):
# THIRD_PARTY_FIRST=1 swaps the order, to see both ways.
direct() { rm -f "$work/b/big1"; run "direct pull (in B)" in_b "longhaul://$A:7080/big" "$work/b/big1"; cmp "$work/a/big" "$work/b/big1"; }
third() { rm -f "$work/b/big3"; run "third-party (from C)" in_c "longhaul://$A:7080/big" "longhaul://$B:7080/big3"; cmp "$work/a/big" "$work/b/big3"; }
for _ in $(seq "${REPS:-1}"); do
    if [ "${THIRD_PARTY_FIRST:-0}" = 1 ]; then third; direct; else direct; third; fi
done

# Killed half way: B's server stops (kill -9), starts again, the same command is rerun.
(in_c "$lh" cp --json "longhaul://$A:7080/big" "longhaul://$B:7080/big4" >/dev/null 2>&1 || true) &
cpid=$!
sleep 3
for _ in $(seq 100); do
    got=$(stat -c %s "$work/b/.big4.longhaul-manifest" 2>/dev/null || echo 0)
    [ "$got" -gt 4096 ] && break
    sleep 0.2
done
pkill -9 -f "serve --listen $B" || true
wait "$cpid" || true
serve_b
run "third-party rerun after kill" in_c "longhaul://$A:7080/big" "longhaul://$B:7080/big4"
cmp "$work/a/big" "$work/b/big4"

run "tree direct pull (in B)" in_b -r "longhaul://$A:7080/tree" "$work/b/t1"
diff -r "$work/a/tree" "$work/b/t1/tree" >/dev/null 2>&1 || diff -r "$work/a/tree" "$work/b/t1" >/dev/null
run "tree third-party (from C)" in_c -r "longhaul://$A:7080/tree" "longhaul://$B:7080/t3"
diff -r "$work/a/tree" "$work/b/t3" >/dev/null 2>&1 || diff -r "$work/a/tree" "$work/b/t3/tree" >/dev/null
echo "all copies identical"
