#!/usr/bin/env bash
# The cost of durable commits: `longhaul cp` pushes over loopback into a directory on a
# real disk, a SIZE file and a tree of FILES small files (1-16 KiB in 10 directories),
# with two builds alternating (e.g. before and after a change), REPS runs each; prints
# each run's wall time and the medians. `sync` runs before every copy so that one run's
# write-back does not land in the next; the sources stay in the page cache.
#
# Usage: bench/cp-durability.sh BIN_A BIN_B [--dir /var/tmp] [--size 2GiB] [--files 2000]
#                               [--reps 3] [--cp-args "--sync"]
set -euo pipefail
a=$(readlink -f "$1"); b=$(readlink -f "$2"); shift 2
dir=/var/tmp; size=2GiB; files=2000; reps=3; cpargs=""
while [ $# -gt 0 ]; do
  case $1 in
    --dir) dir=$2 ;; --size) size=$2 ;; --files) files=$2 ;; --reps) reps=$2 ;;
    --cp-args) cpargs=$2 ;; *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift 2
done
work=$(mktemp -d "$dir/cp-durability.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$work"; }
trap cleanup EXIT
mkdir -p "$work/home" "$work/src/tree" "$work/dst"
head -c "$(numfmt --from=iec "${size%iB}")" /dev/urandom > "$work/src/big"
for i in $(seq 1 "$files"); do
  d=$work/src/tree/d$((i % 10)); mkdir -p "$d"
  head -c $((1024 + RANDOM % 15360)) /dev/urandom > "$d/f$i"
done
cat "$work/src/big" > /dev/null

serve() { # BIN -> sets port
  HOME=$work/home "$1" serve --listen 127.0.0.1 --port 0 --root "$work/dst" 2> "$work/serve.log" &
  pids+=($!)
  for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/serve.log")
    [ -n "$port" ] && return; sleep 0.05
  done
  echo "server did not start" >&2; exit 1
}
one() { # BIN SRC [-r] -> prints seconds
  local bin=$1 src=$2; shift 2
  rm -rf "${work:?}/dst/"* ; sync
  local t0 t1; t0=$(date +%s.%N)
  HOME=$work/home "$bin" cp $cpargs "$@" --no-progress "$src" "longhaul://127.0.0.1:$port/" \
    > /dev/null || { echo "cp failed" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}
median() { sort -g | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
declare -A runs
for r in $(seq 1 "$reps"); do
  for which in a b; do
    bin=${!which}
    serve "$bin"
    s_big=$(one "$bin" "$work/src/big") || exit 1
    s_tree=$(one "$bin" "$work/src/tree" -r) || exit 1
    kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
    echo "run $r $which: ${size} file ${s_big} s, ${files} files ${s_tree} s"
    runs[$which-big]+="$s_big "; runs[$which-tree]+="$s_tree "
  done
done
for which in a b; do
  mb=$(echo ${runs[$which-big]} | tr ' ' '\n' | median)
  mt=$(echo ${runs[$which-tree]} | tr ' ' '\n' | median)
  echo "median $which (${!which}): ${size} file ${mb} s, ${files} files ${mt} s"
done
