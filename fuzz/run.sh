#!/usr/bin/env bash
# Runs every cargo-fuzz target (or the ones named) for SECONDS each, one after another:
#
#   fuzz/run.sh SECONDS [TARGET...]
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz --locked`). Builds
# once with debug assertions (integer overflow is a finding too), then runs each target on
# its corpus (fuzz/corpus/T, not in git) plus its seeds (fuzz/seeds/T, in git). Exits 1
# if any target found a crash, naming the input saved under fuzz/artifacts/T and the
# command that replays it; 2 on a usage or build error.
set -euo pipefail
cd "$(dirname "$0")"

secs=${1:-}
if ! [[ "$secs" =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: fuzz/run.sh SECONDS [TARGET...]   (SECONDS per target, e.g. 20)" >&2
  exit 2
fi
shift
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(cargo +nightly fuzz list)
fi

echo "fuzz: building ${#targets[@]} targets (nightly, ASan, debug assertions)"
cargo +nightly fuzz build --debug-assertions || exit 2

failed=()
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t"
  dirs=("corpus/$t")
  [ -d "seeds/$t" ] && dirs+=("seeds/$t")
  echo "fuzz: $t for ${secs}s"
  log=$(mktemp)
  if cargo +nightly fuzz run --debug-assertions "$t" "${dirs[@]}" -- \
      -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 >"$log" 2>&1; then
    tail -n 1 "$log"
  else
    cat "$log"
    failed+=("$t")
  fi
  rm -f "$log"
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "FUZZ FAILED: ${failed[*]}"
  for t in "${failed[@]}"; do
    for a in artifacts/"$t"/*; do
      [ -e "$a" ] && echo "  replay: (cd fuzz && cargo +nightly fuzz run --debug-assertions $t $a)"
    done
  done
  exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${secs}s each, no crash"
