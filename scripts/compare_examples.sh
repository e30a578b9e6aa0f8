#!/usr/bin/env bash
# Runs the three example programs (binary_trees, expr_parser, cross_thread_queue) in three
# configurations, each built in its own target directory so cargo cannot unify their features:
#   specialised   default build (#[specialize] sites call the size-specialised routines)
#   opt-out       --features no-size-specialized (the same code through the generic path)
#   mimalloc      --features compare-mimalloc (mimalloc as the global allocator)
# Rounds are interleaved (every configuration once per round, in turn) and the median of each
# example's own reported time is printed, with the ratio to the specialised build.
#
#   scripts/compare_examples.sh [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
examples=(binary_trees expr_parser cross_thread_queue)
declare -A args=([binary_trees]=18 [expr_parser]=4000 [cross_thread_queue]=2000000)
configs=(specialised opt-out mimalloc)
declare -A features=([specialised]="" [opt-out]="no-size-specialized" [mimalloc]="compare-mimalloc")
for c in "${configs[@]}"; do
    f=${features[$c]}
    cargo build -q --release --target-dir "target/compare/$c" \
        $(for e in "${examples[@]}"; do echo --example "$e"; done) \
        ${f:+--features "$f"} >&2
    n=$(nm -C --defined-only "target/compare/$c/release/examples/binary_trees" \
        | grep -c 'specalloc_runtime::routines::' || true)
    echo "$c: $n specialised routine symbols in binary_trees" >&2
    if [[ $c == specialised && $n -eq 0 ]] || [[ $c != specialised && $n -ne 0 ]]; then
        echo "configuration $c failed its symbol check; refusing to report" >&2
        exit 1
    fi
done
tmp=$(mktemp -d)
for r in $(seq 1 "$rounds"); do
    for e in "${examples[@]}"; do
        for c in "${configs[@]}"; do
            t=$("target/compare/$c/release/examples/$e" "${args[$e]}" | sed -n 's/^time: \([0-9.]*\) s.*/\1/p')
            echo "$t" >> "$tmp/$e.$c"
        done
    done
    echo "round $r/$rounds done" >&2
done
median() { sort -g "$1" | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
printf '%-20s %14s %14s %14s %10s %10s\n' example specialised opt-out mimalloc opt/spec mi/spec
for e in "${examples[@]}"; do
    s=$(median "$tmp/$e.specialised"); o=$(median "$tmp/$e.opt-out"); m=$(median "$tmp/$e.mimalloc")
    printf '%-20s %12.3f s %12.3f s %12.3f s %10.3f %10.3f\n' "$e" "$s" "$o" "$m" \
        "$(awk "BEGIN {print $o / $s}")" "$(awk "BEGIN {print $m / $s}")"
done
rm -rf "$tmp"
