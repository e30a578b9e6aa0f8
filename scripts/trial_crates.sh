#!/usr/bin/env bash
# The real-crates trial of `#[specialize]`: annotate published crates whole and check that their
# test suites still pass.
#
# For each crate (default: slab ron roaring) this script
#   1. fetches the crate's published source through cargo (a throw-away project that depends on
#      it; the source is copied out of ~/.cargo/registry/src) — this needs the network once,
#   2. makes three copies under $TRIAL_DIR:
#        CRATE-plain      the crate as published,
#        CRATE-annotated  specalloc as a path dependency and `#[specalloc::specialize]` on every
#                         fn/impl/trait/inline mod it may be put on (scripts/annotate_crate.py),
#        CRATE-installed  the annotated copy plus `specalloc::install!();` in every test binary
#                         (the library's `cfg(test)` build and each tests/ crate), with a test
#                         `specalloc_trial_installed` asserting specalloc serves (counted apart),
#      all three with the same Cargo.lock (the plain copy's, specalloc added),
#   3. runs `cargo test --offline --no-fail-fast` in each (debug, default features; one target
#      directory $TRIAL_DIR/target-CRATE shared by the three copies),
#   4. prints per configuration the passed/failed/ignored counts and the warnings, and lists
#      every test that passes plain but not in another configuration (a macro bug, when the
#      build or a test fails annotated and not plain).
#
# Usage: scripts/trial_crates.sh [crate ...]
# Environment:
#   TRIAL_DIR      work directory (default /tmp/trial); never inside the repository
#   SPECALLOC_SRC  the specalloc the copies depend on (default: this working tree)
#   TRIAL_CONFIGS  configurations to run (default "plain annotated installed"; the other two
#                  copy the plain copy's Cargo.lock, so plain must have been prepared once)
#   TRIAL_CARGO_ARGS  more arguments for `cargo test` (e.g. "--all-features"; default none)
#   TRIAL_TAG      a suffix for the result and log names of this run (e.g. "+all"; default none)
#
# Test-suite variables pass through: roaring's proptests take over 20 minutes unoptimised at
# the default 256 cases, so its trial runs with PROPTEST_CASES=16 (the same in all three copies)
# and TRIAL_TAG=+pt16.
#
# A manual tool (network, several minutes of building per crate): not part of scripts/test-all.sh.
# Run it niced on a shared machine: `nice -n 15 scripts/trial_crates.sh slab`.
set -euo pipefail

REPO=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
WORK=${TRIAL_DIR:-/tmp/trial}
SPEC=${SPECALLOC_SRC:-$REPO}
CONFIGS=${TRIAL_CONFIGS:-plain annotated installed}
CRATES=${*:-slab ron roaring}
read -r -a CARGO_ARGS <<<"${TRIAL_CARGO_ARGS:-}"
TAG=${TRIAL_TAG:-}

case "$WORK" in
"$REPO" | "$REPO"/*)
    echo "TRIAL_DIR must be outside the repository" >&2
    exit 2
    ;;
esac
for tool in cargo jq python3; do
    command -v "$tool" >/dev/null || {
        echo "trial_crates: $tool is required" >&2
        exit 2
    }
done
mkdir -p "$WORK/logs" "$WORK/results"
echo "specalloc: $SPEC ($(git -C "$SPEC" rev-parse --short HEAD 2>/dev/null || echo '?'))"

# Prints the directory of the crate's unpacked published source.
fetch() {
    local crate=$1 dir=$WORK/fetch-$1
    mkdir -p "$dir/src"
    cat >"$dir/Cargo.toml" <<EOF
[package]
name = "trial-fetch-$crate"
version = "0.0.0"
edition = "2021"
publish = false
[dependencies]
$crate = "*"
[workspace]
EOF
    : >"$dir/src/lib.rs"
    (cd "$dir" && cargo metadata --format-version 1 --quiet) |
        jq -r --arg c "$crate" '.packages[] | select(.name == $c) | .manifest_path' |
        head -1 | xargs dirname
}

# Copies the source $1 to $2 as configuration $3.
prepare() {
    local src=$1 dst=$2 config=$3 plain=$4
    rm -rf "$dst"
    cp -r "$src" "$dst"
    chmod -R u+w "$dst"
    # A workspace of its own, so that nothing above it is taken for its workspace root.
    grep -q '^\[workspace\]' "$dst/Cargo.toml" || printf '\n[workspace]\n' >>"$dst/Cargo.toml"
    if [ "$config" = plain ]; then
        # Resolve (and download the dev-dependencies) once; the other copies reuse the lock.
        (cd "$dst" && { [ -e Cargo.lock ] || cargo generate-lockfile --quiet; } && cargo fetch --quiet)
        return 0
    fi
    cp "$plain/Cargo.lock" "$dst/Cargo.lock"
    (cd "$dst" && cargo add --quiet --offline specalloc --path "$SPEC")
    local meta lib build args=()
    meta=$(cd "$dst" && cargo metadata --offline --format-version 1 --no-deps --quiet)
    lib=$(jq -r '.packages[0].targets[] | select(.kind | index("lib")) | .src_path' <<<"$meta")
    build=$(jq -r '.packages[0].targets[] | select(.kind | index("custom-build")) | .src_path' <<<"$meta")
    [ -n "$lib" ] && args+=(--lib "${lib#"$dst"/}")
    [ -n "$build" ] && args+=(--exclude "${build#"$dst"/}")
    if [ "$config" = installed ]; then
        args+=(--install)
        local t
        while IFS= read -r t; do
            [ -n "$t" ] && args+=(--test-root "${t#"$dst"/}")
        done < <(jq -r '.packages[0].targets[] | select(.kind | index("test")) | .src_path' <<<"$meta")
    fi
    python3 "$REPO/scripts/annotate_crate.py" "$dst" "${args[@]}" >"$WORK/logs/$(basename "$dst").annotate"
    tail -1 "$WORK/logs/$(basename "$dst").annotate"
}

# Runs the suite of $2 (configuration $3); writes $WORK/results/$1.$3.{tests,summary}.
run_suite() {
    local crate=$1 dir=$2 config=$3
    local log=$WORK/logs/$crate$TAG-$config.log out=$WORK/results/$crate$TAG.$config
    local rc=0
    (cd "$dir" && CARGO_TARGET_DIR=$WORK/target-$crate cargo test --offline --no-fail-fast \
        ${CARGO_ARGS[@]+"${CARGO_ARGS[@]}"} >"$log" 2>&1) || rc=$?
    # One line per test: "<binary> <test name> <ok|FAILED|ignored>", the binary named by its
    # source (the hash differs between the copies).
    awk '
        /^ *Running / { bin = ($2 == "unittests") ? $3 : $2; next }
        /^ *Doc-tests / { bin = "doc:" $2; next }
        /^test .* \.\.\. / {
            r = $NF; sub(/^test /, ""); sub(/ \.\.\. [^ ]*$/, "");
            print bin "\t" $0 "\t" r
        }' "$log" | sort >"$out.tests"
    local passed failed ignored proof warnings
    passed=$({ grep -v 'specalloc_trial_installed' "$out.tests" || true; } | awk -F'\t' '$3=="ok"' | wc -l)
    failed=$({ grep -v 'specalloc_trial_installed' "$out.tests" || true; } | awk -F'\t' '$3=="FAILED"' | wc -l)
    ignored=$(awk -F'\t' '$3=="ignored"' "$out.tests" | wc -l)
    proof=$(grep -c 'specalloc_trial_installed.*ok$' "$out.tests" || true)
    warnings=$({ grep -E '^warning: .* generated [0-9]+ warning' "$log" || true; } |
        sed -E 's/.* generated ([0-9]+) warning.*/\1/' | awk '{s += $1} END {print s + 0}')
    local build=ok
    # Compile errors (not cargo's "error: test failed" / "error: N targets failed").
    grep -E '^error(\[E[0-9]+\])?:' "$log" | grep -qvE 'test failed|targets? failed' &&
        build="errors"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$crate$TAG" "$config" "$passed" "$failed" "$ignored" \
        "$warnings" "$proof" "$build/rc=$rc" >"$out.summary"
    cat "$out.summary"
}

for crate in $CRATES; do
    echo "== $crate: fetching"
    src=$(fetch "$crate")
    [ -d "$src" ] || {
        echo "could not fetch $crate" >&2
        exit 1
    }
    echo "   $(basename "$src")"
    plain=$WORK/$crate-plain
    for config in $CONFIGS; do
        echo "== $crate [$config]"
        prepare "$src" "$WORK/$crate-$config" "$config" "$plain"
        run_suite "$crate" "$WORK/$crate-$config" "$config"
    done
    for config in $CONFIGS; do
        [ "$config" = plain ] && continue
        lost=$(comm -23 \
            <(awk -F'\t' '$3=="ok" {print $1 " " $2}' "$WORK/results/$crate$TAG.plain.tests" | sort) \
            <(awk -F'\t' '$3=="ok" {print $1 " " $2}' "$WORK/results/$crate$TAG.$config.tests" | sort))
        if [ -n "$lost" ]; then
            echo "!! $crate$TAG [$config]: passes plain, not here:"
            sed 's/^/   /' <<<"$lost"
        fi
    done
done

echo
echo "| crate | config | passed | failed | ignored | warnings | installed proven | build |"
echo "|---|---|---|---|---|---|---|---|"
for crate in $CRATES; do
    for config in $CONFIGS; do
        f=$WORK/results/$crate$TAG.$config.summary
        [ -e "$f" ] && awk -F'\t' '{printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8}' "$f"
    done
    a=$WORK/logs/$crate-annotated.annotate
    [ -e "$a" ] && echo "|   | annotations: $(tail -1 "$a" | sed 's/^TOTAL //') | | | | | | |"
done
