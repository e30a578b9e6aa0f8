#!/usr/bin/env bash
# The cost of an alloc+free pair in a user crate built at opt-level 0 (examples/debug_bench.rs:
# 32-byte blocks through `std::alloc::alloc`/`dealloc`, as Box and Vec allocate), with specalloc
# and with glibc malloc as the global allocator, each configuration in a target directory of
# its own:
#   glibc/dev     `--features compare-system`, the plain `dev` profile
#   spec/dev      specalloc, the plain `dev` profile (the runtime at opt-level 0 too)
#   spec/dev+O3   with `opt-level = 3` for the runtime:
#                   [profile.dev.package.specalloc-runtime]
#                   opt-level = 3
#   spec/dev+rec  docs/usage.md's recommended lines: the above plus `debug-assertions = false` and
#                 `overflow-checks = false` for the runtime
#   glibc/release, spec/release   `--release`, for reference
# Prints the median ns/pair over `runs` interleaved runs (each the median of 3 rounds) and, with
# valgrind installed, callgrind's instructions per pair (repeatable on a noisy machine).
#
#   scripts/debug_bench.sh [runs] [pairs_per_round]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
pairs=${2:-2000000}
base=${CARGO_TARGET_DIR:-target}/debug-bench
configs=(glibc/dev spec/dev spec/dev+O3 spec/dev+rec glibc/release spec/release)
rt=profile.dev.package.specalloc-runtime
declare -A flags=(
    [glibc/dev]="--features compare-system"
    [spec/dev]=""
    [spec/dev+O3]="--config $rt.opt-level=3"
    [spec/dev+rec]="--config $rt.opt-level=3 --config $rt.debug-assertions=false --config $rt.overflow-checks=false"
    [glibc/release]="--release --features compare-system"
    [spec/release]="--release"
)
declare -A bin
for c in "${configs[@]}"; do
    dir="$base/${c//[\/+]/_}"
    # shellcheck disable=SC2086
    cargo build -q --example debug_bench --target-dir "$dir" ${flags[$c]} >&2
    if [[ $c == */release ]]; then bin[$c]=$dir/release/examples/debug_bench; else bin[$c]=$dir/debug/examples/debug_bench; fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for r in $(seq 1 "$runs"); do
    for c in "${configs[@]}"; do
        "${bin[$c]}" "$pairs" 3 > "$tmp/out"
        sed -n 's/^through the global allocator: *\([0-9.]*\) ns.*/\1/p' "$tmp/out" >> "$tmp/${c//\//_}"
    done
    echo "run $r/$runs done" >&2
done
med() { sort -g "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
irs() { # instructions per pair of pairs_global, by callgrind
    local n=100000 out="$tmp/cg.out"
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect='*pairs_global*' \
        "$1" "$n" 1 > /dev/null 2>&1
    awk -v n=$((n + 1000)) '/^(summary|totals):/ {printf "%.1f", $2 / n; exit}' "$out"
}
printf '%-14s %10s' config "ns/pair"
if command -v valgrind > /dev/null; then printf ' %10s' "Ir/pair"; fi
echo
for c in "${configs[@]}"; do
    printf '%-14s %10s' "$c" "$(med "$tmp/${c//\//_}")"
    if command -v valgrind > /dev/null; then printf ' %10s' "$(irs "${bin[$c]}")"; fi
    echo
done
