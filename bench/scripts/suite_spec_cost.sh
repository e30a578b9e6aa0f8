#!/usr/bin/env bash
# Instructions (callgrind) of the real-workload suite's programs whose own code has
# constant-size allocation sites, plain against `#[specialize]`-annotated (the same source
# compiled twice, `bench/src/realworld/mod.rs`'s `plain_and_annotated!`, chosen by the worker's
# `--annotated`), in each profile (dev, release, thin LTO, fat LTO with one codegen unit), with
# specalloc installed (`install!`) and, in release and fat LTO, under `System` (not installed:
# the entry points must cost nothing). Also what LTO alone gives: the plain programs, and
# binary-trees (`examples/spec_cost_installed.rs`, max depth 14), in release, thin and fat.
#
# Builds `src/bin/realworld_worker.rs` with the `annotated` feature in
# target/suite-spec-cost/<profile> (and, for binary-trees, `examples/spec_cost_installed.rs` in
# target/spec-cost/<profile>, as spec_cost.sh does), runs each program once per (profile,
# allocator, variant) under `valgrind --tool=callgrind`, checks that every run of a program
# printed the same checksum, and prints three Markdown tables.
#
#   bench/scripts/suite_spec_cost.sh [scale] [profile ...]   # scale 1, all four profiles
#
# PROGRAMS="json graph" overrides the programs (default: json pipeline1 pipeline4 graph
# rebuild1; any of the worker's programs with an annotated variant). The single-threaded programs'
# counts are deterministic (two runs agree to the instruction); the pipelines' depend on how the
# threads interleave (about ±1.5 %), so each of their cells is the median of REPEAT runs (default
# 3), and the spread of those runs is printed under the tables.
set -euo pipefail
cd "$(dirname "$0")/../.."
scale=${1:-1}
shift || true
profiles=("$@")
[ ${#profiles[@]} -gt 0 ] || profiles=(dev release thin fat)
read -r -a programs <<<"${PROGRAMS:-json pipeline1 pipeline4 graph rebuild1}"
depth=14          # binary-trees' max depth, as spec_cost.sh's default
repeat=${REPEAT:-3}
system_profiles=" release fat "
lto_profiles=" release thin fat "

# shellcheck source=bench/scripts/profile_build.sh
source bench/scripts/profile_build.sh

subdir() { [ "$1" = dev ] && echo debug || echo release; }

# The worker of `profile` with `alloc` (installed or system): built, checked, its path printed.
worker() { # profile alloc
    local p=$1 a=$2 dir=target/suite-spec-cost/$1 feats=(--features annotated) want=specalloc
    if [ "$a" = system ]; then feats=(--features annotated,global-system); want=system; fi
    cargo_build "$p" "$dir" -p specalloc-bench --bin realworld_worker "${feats[@]}"
    local bin=$dir/realworld_worker-$a
    cp "$dir/$(subdir "$p")/realworld_worker" "$bin"
    if [ "$("$bin" describe)" != "global,$want" ]; then
        echo "$bin: not the $want worker" >&2
        exit 1
    fi
    echo "$bin"
}

# Runs `cmd...` under callgrind; prints "<instructions> <stdout's last line>".
callgrind() {
    local out stdout
    out=$(mktemp)
    stdout=$(valgrind --tool=callgrind --callgrind-out-file="$out" "$@" 2>/dev/null | tail -n1)
    printf '%s %s\n' "$(grep -m1 '^summary:' "$out" | awk '{print $2}')" "$stdout"
    rm -f "$out"
}

# Runs `cmd...` under callgrind `k` times; prints "<median instructions> <spread %> <stdout's
# last line of the first run>" (the spread: (max - min) / median).
callgrind_median() { # k cmd...
    local k=$1 i n line first=
    shift
    local counts=()
    for ((i = 0; i < k; i++)); do
        read -r n line < <(callgrind "$@")
        [ -n "$n" ] || { echo "no count from: $*" >&2; exit 1; }
        counts+=("$n")
        [ -n "$first" ] || first=$line
    done
    printf '%s\n' "${counts[@]}" | sort -n | awk -v line="$first" '
        { c[NR] = $1 }
        END { m = c[int((NR + 1) / 2)]; printf "%s %.2f %s\n", m, 100 * (c[NR] - c[1]) / m, line }'
}

declare -A ir sum spread
# Records one measurement: key, instructions, checksum (the same for every run of a program).
record() { # program key instructions checksum
    ir[$2]=$3
    if [ -z "${sum[$1]:-}" ]; then
        sum[$1]=$4
    elif [ "${sum[$1]}" != "$4" ]; then
        echo "$1: checksum $4 in $2, ${sum[$1]} before: plain and annotated differ" >&2
        exit 1
    fi
}

measure_worker() { # profile alloc
    local bin line
    bin=$(worker "$1" "$2")
    for prog in "${programs[@]}"; do
        local k=1 s
        if [[ $prog == pipeline* ]]; then k=$repeat; fi
        for v in plain annotated; do
            local args=(run "$prog" --scale "$scale")
            if [ "$v" = annotated ]; then args+=(--annotated); fi
            read -r n s line < <(callgrind_median "$k" "$bin" "${args[@]}")
            record "$prog" "$prog/$1/$2/$v" "$n" "$(cut -d, -f4 <<<"$line")"
            if [ "$k" -gt 1 ]; then spread[$prog/$1/$2/$v]=$s; fi
        done
    done
}

measure_trees() { # profile
    local dir=target/spec-cost/$1 n line
    cargo_build "$1" "$dir" --example spec_cost_installed
    for v in plain annotated; do
        read -r n _ line < <(callgrind_median 1 "$dir/$(subdir "$1")/examples/spec_cost_installed" "$v" "$depth")
        record binary-trees "binary-trees/$1/installed/$v" "$n" "${line##*: }"
    done
}

for p in "${profiles[@]}"; do
    measure_worker "$p" installed
    if [[ $system_profiles == *" $p "* ]]; then measure_worker "$p" system; fi
    if [[ $lto_profiles == *" $p "* ]]; then measure_trees "$p"; fi
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.4f", a / b }'; }

row() { # program profile alloc
    local pl=${ir[$1/$2/$3/plain]:-} an=${ir[$1/$2/$3/annotated]:-}
    [ -n "$pl" ] && printf '| %s | %s | %s | %s | %s |\n' "$1" "$2" "$pl" "$an" "$(ratio "$an" "$pl")"
    return 0
}

echo "scale $scale (binary-trees: max depth $depth); instructions, valgrind --tool=callgrind"
echo
echo "Installed (\`install!\`): plain against annotated"
echo
echo "| program | profile | plain | annotated | annotated/plain |"
echo "| --- | --- | ---: | ---: | ---: |"
for prog in "${programs[@]}" binary-trees; do
    for p in "${profiles[@]}"; do row "$prog" "$p" installed; done
done
echo
echo "Not installed (\`System\`): plain against annotated"
echo
echo "| program | profile | plain | annotated | annotated/plain |"
echo "| --- | --- | ---: | ---: | ---: |"
for prog in "${programs[@]}"; do
    for p in "${profiles[@]}"; do row "$prog" "$p" system; done
done
if [[ " ${profiles[*]} " == *" release "* ]]; then
    echo
    echo "What LTO alone gives (installed): plain in thin and fat LTO, and annotated, against plain release"
    echo
    echo "| program | release plain | thin plain | fat plain | release annotated | fat annotated |"
    echo "| --- | ---: | ---: | ---: | ---: | ---: |"
    for prog in "${programs[@]}" binary-trees; do
        base=${ir[$prog/release/installed/plain]}
        cell() { # key
            local n=${ir[$1]:-}
            if [ -n "$n" ]; then printf '%s (%s)' "$n" "$(ratio "$n" "$base")"; else printf -- '-'; fi
        }
        printf '| %s | %s | %s | %s | %s | %s |\n' "$prog" "$base" \
            "$(cell "$prog/thin/installed/plain")" "$(cell "$prog/fat/installed/plain")" \
            "$(cell "$prog/release/installed/annotated")" "$(cell "$prog/fat/installed/annotated")"
    done
fi
if [ ${#spread[@]} -gt 0 ]; then
    echo
    printf 'medians of %s runs, spread (max - min) / median: ' "$repeat"
    for k in $(printf '%s\n' "${!spread[@]}" | sort); do printf '%s %s %%; ' "$k" "${spread[$k]}"; done | sed 's/; $//'
    echo
fi
echo
echo "checksums: every run of a program agreed ($(for k in "${!sum[@]}"; do printf '%s=%s ' "$k" "${sum[$k]}"; done | sed 's/ $//'))"
