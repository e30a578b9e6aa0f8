#!/bin/sh
# Produces every table of bench/RESULTS.md on this machine:
#   1. the build checks (each worker configuration built alone, verified with nm),
#   2. the feature-unification trap, shown refused,
#   3. the interleaved-rounds size sweep (plain/zeroed x alloc/pair),
#   4. instructions per operation under valgrind --tool=callgrind,
#   5. the binary-size cost of specialisation (examples/nm_probe.rs).
# Outputs land in target/sweep/*.txt (tables) and *.csv (machine-readable).
#
# usage: bench/scripts/results.sh [--quick] [extra sweep flags...]
# Without the peers (mimalloc, jemalloc, snmalloc): PEERS= bench/scripts/results.sh
set -eu
cd "$(dirname "$0")/../.."
PEERS="${PEERS---features peers}"
run() {
    echo "+ cargo run --release -p specalloc-bench $PEERS --bin sweep -- $*" >&2
    # shellcheck disable=SC2086
    cargo run --release -p specalloc-bench $PEERS --bin sweep -- "$@"
}
run --verify
run --trap
run "$@"
run --callgrind
run --binsize
echo "tables: target/sweep/{checks,trap,sweep,callgrind,binsize}.txt" >&2
