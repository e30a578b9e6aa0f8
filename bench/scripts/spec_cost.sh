#!/usr/bin/env bash
# Instructions (callgrind) of binary-trees, plain against `#[specialize]`-annotated, in each
# profile (dev, release, thin LTO, fat LTO with one codegen unit) and under each global
# allocator: `install!`, a hand-written `#[global_allocator] static: SpecAlloc` and `System`
# (the last two: not installed, the entry points must cost nothing). Builds
# `examples/spec_cost_*.rs` in target/spec-cost/<profile> and prints a Markdown table.
#
#   bench/scripts/spec_cost.sh [max_depth] [profile ...]     # depth 14, all four profiles
#
# The real-workload suite's programs, the same way: bench/scripts/suite_spec_cost.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
depth=${1:-14}
shift || true
profiles=("$@")
[ ${#profiles[@]} -gt 0 ] || profiles=(dev release thin fat)
allocs=(installed static system)

# shellcheck source=bench/scripts/profile_build.sh
source bench/scripts/profile_build.sh

build() { # profile
    local args=()
    for a in "${allocs[@]}"; do args+=(--example "spec_cost_$a"); done
    cargo_build "$1" "target/spec-cost/$1" "${args[@]}"
}

instructions() { # binary which
    local out
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$1" "$2" "$depth" >/dev/null 2>&1
    grep -m1 '^summary:' "$out" | awk '{print $2}'
    rm -f "$out"
}

echo "| profile | global allocator | plain | annotated | annotated/plain |"
echo "| --- | --- | ---: | ---: | ---: |"
for p in "${profiles[@]}"; do
    build "$p"
    sub=release
    [ "$p" = dev ] && sub=debug
    for a in "${allocs[@]}"; do
        bin=target/spec-cost/$p/$sub/examples/spec_cost_$a
        plain=$(instructions "$bin" plain)
        ann=$(instructions "$bin" annotated)
        ratio=$(awk -v a="$ann" -v b="$plain" 'BEGIN { printf "%.4f", a / b }')
        case $a in
            installed) name='`install!`' ;;
            static) name='hand-written `static: SpecAlloc`' ;;
            system) name='`System`' ;;
        esac
        printf '| %s | %s | %s | %s | %s |\n' "$p" "$name" "$plain" "$ann" "$ratio"
    done
done
