#!/usr/bin/env bash
# Debug builds against glibc (examples/debug_bench.rs), each configuration in a target directory
# of its own:
#   glibc/dev     `--features compare-system`, the plain `dev` profile
#   spec/dev      specalloc, the plain `dev` profile (the runtime at opt-level 0 too)
#   spec/dev+O3   with `opt-level = 3` for the runtime:
#                   [profile.dev.package.specalloc-runtime]
#                   opt-level = 3
#   spec/dev+rec  the above plus `debug-assertions = false` and `overflow-checks = false` for
#                 the runtime
#   glibc/release, spec/release   `--release`, for reference
# Prints two tables:
# - time: the median over `runs` interleaved runs of a 32-byte alloc+free pair through the
#   global allocator (ns/pair, each run the median of 3 rounds) and of `boxes` `Box::new(i)`
#   kept in a Vec and then dropped (ms); with valgrind installed, callgrind's instructions per
#   pair and per box (repeatable on a noisy machine);
# - stack: whether a thread with that much stack that allocates and frees boxes runs (`ok`) or
#   dies (the signal), in the debug builds and in release.
#
#   scripts/debug_bench.sh [runs] [pairs_per_round] [boxes]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
pairs=${2:-2000000}
boxes=${3:-3000000}
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
        "${bin[$c]}" "$pairs" 3 "$boxes" > "$tmp/out"
        sed -n 's/^through the global allocator: *\([0-9.]*\) ns.*/\1/p' "$tmp/out" >> "$tmp/${c//\//_}"
        sed -n 's/^[0-9]* boxes kept, then dropped: *\([0-9.]*\) ms.*/\1/p' "$tmp/out" >> "$tmp/${c//\//_}.boxes"
    done
    echo "run $r/$runs done" >&2
done
med() { sort -g "$1" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
irs() { # instructions per pair of pairs_global, by callgrind
    local n=100000 out="$tmp/cg.out"
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect='*pairs_global*' \
        "$1" "$n" 1 1 > /dev/null 2>&1
    awk -v n=$((n + 1000)) '/^(summary|totals):/ {printf "%.1f", $2 / n; exit}' "$out"
}
irb() { # instructions per box of keep_boxes (allocation, push, free), by callgrind
    local n=300000 out="$tmp/cgb.out"
    valgrind --tool=callgrind --callgrind-out-file="$out" --toggle-collect='*keep_boxes*' \
        "$1" 1 1 "$n" > /dev/null 2>&1
    awk -v n=$n '/^(summary|totals):/ {printf "%.1f", $2 / n; exit}' "$out"
}
have_valgrind=$(command -v valgrind > /dev/null && echo 1 || true)
printf '%-14s %10s' config "ns/pair"
if [[ -n $have_valgrind ]]; then printf ' %10s' "Ir/pair"; fi
printf ' %12s' "boxes ms"
if [[ -n $have_valgrind ]]; then printf ' %10s' "Ir/box"; fi
echo
for c in "${configs[@]}"; do
    printf '%-14s %10s' "$c" "$(med "$tmp/${c//\//_}")"
    if [[ -n $have_valgrind ]]; then printf ' %10s' "$(irs "${bin[$c]}")"; fi
    printf ' %12s' "$(med "$tmp/${c//\//_}.boxes")"
    if [[ -n $have_valgrind ]]; then printf ' %10s' "$(irb "${bin[$c]}")"; fi
    echo
done
echo
stack_configs=(glibc/dev spec/dev glibc/release spec/release)
printf '%-14s' "thread stack"
for c in "${stack_configs[@]}"; do printf ' %14s' "$c"; done
echo
for kib in 12 16 24 32 40 48; do
    printf '%-14s' "$kib KiB"
    for c in "${stack_configs[@]}"; do
        status=0
        "${bin[$c]}" 1 1 1 "$kib" > /dev/null 2>&1 || status=$?
        if ((status == 0)); then
            verdict=ok
        elif ((status > 128)); then
            verdict=SIG$(kill -l $((status - 128)))
        else
            verdict="exit $status"
        fi
        printf ' %14s' "$verdict"
    done
    echo
done
