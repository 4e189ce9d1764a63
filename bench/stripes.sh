#!/usr/bin/env bash
# One copy striped over two pairs of hosts, each pair on its own emulated long fat path,
# beside the same copy over one pair.
#
#   bench/stripes.sh [BIN] [RATE] [RTT] [SIZE_MIB] [FILES]
#
# Pair k (k = 1, 2) is `longhaul emulate` number k (RATE x RTT each, default 500M x 180ms):
# host Ak in its namespace a, host Bk in its namespace b, addressed 10.99.k.1 and 10.99.k.2
# on the emulated link (both emulators use 10.99.0.x themselves). A1 and A2 serve one
# directory (the hosts of a site sharing a file system), B1 and B2 another. The invoking
# host C is a fifth namespace with a plain veth into each of the four, and dials each
# server by its address on the emulated link. Runs, one after another:
#   1. one pair:   C runs `longhaul cp longhaul://A1/big longhaul://B1/one` (a third-party
#                  copy over pair 1 alone);
#   2. two pairs:  `longhaul cp longhaul://A1,A2/big longhaul://B1,B2/two`;
#   3. the tree of FILES files (1 MiB each) the same two ways;
#   4. takeover:   the striped copy into a new name, B2's server killed (-9) half way: the
#                  command runs share 2 again on pair 1 and finishes;
#   5. rerun:      the striped copy into a new name, both B servers killed half way and
#                  started again, then the same command rerun (each share resumes).
# CP_FLAGS adds flags to every cp; ONLY_KILLS=1 runs 4 and 5 alone. Every copy is checked byte for byte. Root needed.
set -euo pipefail
lh=${1:-target/release/longhaul}
rate=${2:-500M}
rtt=${3:-180ms}
size_mib=${4:-2048}
files=${5:-1000}
lh=$(readlink -f "$lh")
tag=st$$
work=$(mktemp -d /var/tmp/lh-stripes.XXXX)
export HOME=$work/home
mkdir -p "$HOME" "$work/a" "$work/b"
nsc=lh-$tag-c
cleanup() {
    pkill -f "serve --listen 0.0.0.0 --port 708[12] --root $work" 2>/dev/null || true
    ip netns del "$nsc" 2>/dev/null || true
    for k in 1 2; do "$lh" emulate down "$tag$k" >/dev/null 2>&1 || true; done
    rm -rf "$work"
}
trap cleanup EXIT

ip netns add "$nsc"
ip -n "$nsc" link set lo up
for k in 1 2; do
    "$lh" emulate up "$tag$k" --rate "$rate" --rtt "$rtt" --daemon >/dev/null
    for end in a b; do
        ns=lh-$tag$k-$end
        host=$([ "$end" = a ] && echo 1 || echo 2)
        # The pair's own addresses on its emulated link.
        ip -n "$ns" addr add "10.99.$k.$host/24" dev lh0
        # C's veth into this namespace: 10.98.N.0/30, N = 2k-1 (a) or 2k (b).
        n=$(( 2 * k - 1 + host - 1 ))
        ip link add "c$n-$$" type veth peer name "s$n-$$"
        ip link set "c$n-$$" netns "$nsc"
        ip link set "s$n-$$" netns "$ns"
        ip -n "$nsc" addr add "10.98.$n.2/30" dev "c$n-$$"
        ip -n "$ns" addr add "10.98.$n.1/30" dev "s$n-$$"
        ip -n "$nsc" link set "c$n-$$" up
        ip -n "$ns" link set "s$n-$$" up
        ip -n "$nsc" route add "10.99.$k.$host/32" via "10.98.$n.1"
    done
done
in_ns() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

head -c $((size_mib << 20)) /dev/urandom > "$work/a/big"
mkdir -p "$work/a/tree"
for i in $(seq "$files"); do head -c 1048576 /dev/urandom > "$work/a/tree/f$i"; done
sync

serve() { # pair, end (a|b)
    local k=$1 end=$2 log=$work/$2$1.log
    in_ns "lh-$tag$k-$end" "$lh" serve --listen 0.0.0.0 --port "708$k" --root "$work/$end" >>"$log" 2>&1 &
    for _ in $(seq 50); do grep -q "listening on" "$log" 2>/dev/null && return; sleep 0.1; done
}
for k in 1 2; do serve "$k" a; serve "$k" b; done
sleep 0.5
A1=10.99.1.1:7081 A2=10.99.2.1:7082 B1=10.99.1.2:7081 B2=10.99.2.2:7082
echo "two pairs, each $rate x $rtt on its own emulator; file $size_mib MiB, tree $files x 1 MiB"

run() { # label, args...
    local label=$1
    shift
    local t0 t1 out
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    out=$(in_ns "$nsc" "$lh" cp --json ${CP_FLAGS:-} "$@" | tail -1)
    t1=$(date +%s.%N)
    python3 - "$label" "$t0" "$t1" "$out" <<'EOP'
import json, sys
label, t0, t1, out = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), json.loads(sys.argv[4])
moved = out.get("sent_bytes", 0)
wall = t1 - t0
pairs = out.get("pairs") or [out]
each = "; ".join(
    f"{p.get('destination','?').split('/')[2]} {p.get('sent_bytes',0)/2**20:.0f} MiB "
    f"{p.get('bits_per_second',0)/1e6:.0f} Mbit/s resumed {p.get('resumed_bytes',0)/2**20:.0f} MiB"
    for p in pairs)
print(f"{label:26s} {moved/2**20:7.0f} MiB in {wall:6.2f} s wall = {moved*8/wall/1e6:7.1f} Mbit/s, ok={out.get('ok')} [{each}]")
EOP
}

if [ "${ONLY_KILLS:-0}" != 1 ]; then
    run "file, one pair" "longhaul://$A1/big" "longhaul://$B1/one"
    cmp "$work/a/big" "$work/b/one"
    run "file, two pairs" "longhaul://$A1,$A2/big" "longhaul://$B1,$B2/two"
    cmp "$work/a/big" "$work/b/two"
    run "tree, one pair" -r "longhaul://$A1/tree" "longhaul://$B1/t1"
    diff -r "$work/a/tree" "$work/b/t1" >/dev/null
    run "tree, two pairs" -r "longhaul://$A1,$A2/tree" "longhaul://$B1,$B2/t2"
    diff -r "$work/a/tree" "$work/b/t2" >/dev/null
fi

half_way() { # manifest to watch: returns once its share has verified 8 chunks
    sleep 3
    for _ in $(seq 100); do
        local got
        got=$(stat -c %s "$1" 2>/dev/null || echo 0)
        [ "$got" -gt $((56 + 8 * 40)) ] && return
        sleep 0.2
    done
}

# B2 dies half way: the command gives share 2 to pair 1.
(sleep 0.1; half_way "$work/b/.three.2-of-2.longhaul-manifest"; pkill -9 -f "serve --listen 0.0.0.0 --port 7082 --root $work/b") &
killer=$!
run "file, B2 killed (takeover)" "longhaul://$A1,$A2/big" "longhaul://$B1,$B2/three"
cmp "$work/a/big" "$work/b/three"
wait "$killer"
serve 2 b

# Both destinations die half way; started again, the rerun resumes each share.
(in_ns "$nsc" "$lh" cp --json "longhaul://$A1,$A2/big" "longhaul://$B1,$B2/four" >/dev/null 2>&1 || true) &
cpid=$!
half_way "$work/b/.four.2-of-2.longhaul-manifest"
pkill -9 -f "serve --listen 0.0.0.0 --port 708[12] --root $work/b" || true
wait "$cpid" || true
serve 1 b
serve 2 b
run "file, rerun after both died" "longhaul://$A1,$A2/big" "longhaul://$B1,$B2/four"
cmp "$work/a/big" "$work/b/four"
echo "all copies identical"
