#!/usr/bin/env bash
# What annotating a real crate whole costs a real workload: instructions (callgrind), annotated
# against plain, both installed (`specalloc::install!()`), release builds.
#
# The workload (scripts/real_crate_cost/petgraph_astar.rs): a 100,000-node petgraph `DiGraphMap`
# built edge by edge (each new node through `add_edge`'s `or_insert_with(|| Vec::with_capacity(1))`)
# and three A* searches. This script
#   1. fetches petgraph's published source through cargo (network once),
#   2. copies it to $BENCH_DIR/petgraph-annotated, with specalloc as a path dependency and
#      `#[specalloc::specialize]` on every item the attribute may be put on
#      (scripts/annotate_crate.py, as scripts/trial_crates.sh does),
#   3. builds the workload twice, release: against petgraph as published (`plain`) and against
#      the annotated copy (`annotated`, through `[patch.crates-io]`),
#   4. counts each run's instructions with `valgrind --tool=callgrind` and prints both totals
#      and annotated / plain (the promise: at most 1).
#
# Usage: scripts/real_crate_cost.sh
# Environment:
#   BENCH_DIR      work directory (default /tmp/real-crate-cost); never inside the repository
#   SPECALLOC_SRC  the specalloc both sides depend on (default: this working tree)
#
# A manual tool (network, minutes of building): not part of scripts/test-all.sh. Instruction
# counts do not depend on the machine's load; run it niced on a shared machine.
set -euo pipefail

REPO=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
WORK=${BENCH_DIR:-/tmp/real-crate-cost}
SPEC=${SPECALLOC_SRC:-$REPO}
case "$WORK" in
"$REPO" | "$REPO"/*)
    echo "BENCH_DIR must be outside the repository" >&2
    exit 2
    ;;
esac
for tool in cargo jq python3 valgrind; do
    command -v "$tool" >/dev/null || {
        echo "real_crate_cost: $tool is required" >&2
        exit 2
    }
done
mkdir -p "$WORK"

# The published source of petgraph.
mkdir -p "$WORK/fetch/src"
cat >"$WORK/fetch/Cargo.toml" <<TOML
[package]
name = "cost-fetch"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
petgraph = "=0.8.3"
[workspace]
TOML
: >"$WORK/fetch/src/lib.rs"
SRC=$(cd "$WORK/fetch" && cargo metadata --format-version 1 --quiet |
    jq -r '.packages[] | select(.name == "petgraph") | .manifest_path' | head -1 | xargs dirname)

# The annotated copy.
ANN=$WORK/petgraph-annotated
rm -rf "$ANN"
cp -r "$SRC" "$ANN"
chmod -R u+w "$ANN"
grep -q '^\[workspace\]' "$ANN/Cargo.toml" || printf '\n[workspace]\n' >>"$ANN/Cargo.toml"
(cd "$ANN" && cargo add --quiet specalloc --path "$SPEC")
python3 "$REPO/scripts/annotate_crate.py" "$ANN" --lib src/lib.rs | tail -1

# The workload, twice.
for side in plain annotated; do
    dir=$WORK/$side
    mkdir -p "$dir/src"
    cp "$REPO/scripts/real_crate_cost/petgraph_astar.rs" "$dir/src/main.rs"
    {
        printf '[package]\nname = "cost-%s"\nversion = "0.0.0"\nedition = "2021"\npublish = false\n\n' "$side"
        printf '[dependencies]\npetgraph = "=0.8.3"\nspecalloc = { path = "%s" }\n\n' "$SPEC"
        printf '[profile.release]\ndebug = "line-tables-only"\n\n[workspace]\n'
        if [ "$side" = annotated ]; then
            printf '\n[patch.crates-io]\npetgraph = { path = "%s" }\n' "$ANN"
        fi
    } >"$dir/Cargo.toml"
    (cd "$dir" && CARGO_TARGET_DIR=$WORK/target cargo build --release --quiet)
done

declare -A IR
for side in plain annotated; do
    out=$WORK/callgrind.$side.out
    valgrind --tool=callgrind --callgrind-out-file="$out" "$WORK/target/release/cost-$side" \
        >"$WORK/$side.stdout" 2>"$WORK/$side.valgrind"
    IR[$side]=$(grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}')
    echo "$side: ${IR[$side]} instructions ($(tr '\n' ' ' <"$WORK/$side.stdout"))"
done
cmp -s "$WORK/plain.stdout" "$WORK/annotated.stdout" || {
    echo "real_crate_cost: the two outputs differ" >&2
    exit 1
}
awk -v a="${IR[annotated]}" -v p="${IR[plain]}" 'BEGIN { printf "annotated / plain: %.4f\n", a / p }'
