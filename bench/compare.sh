#!/usr/bin/env bash
# longhaul bench against iperf3 in the same run (see compare.py for the method).
# Example: bench/compare.sh --time 10 --reps 3 --streams 1
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -q -p longhaul
exec python3 bench/compare.py "$@"
