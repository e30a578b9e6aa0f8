#!/usr/bin/env bash
# Runs the test suites of well-known crates with specalloc as their global allocator.
#
# For each crate (default: serde_json hashbrown indexmap bytes regex smallvec) this script
#   1. fetches the crate's published source through cargo (a throw-away project that depends on
#      it; the source is copied out of ~/.cargo/registry/src),
#   2. makes one copy per configuration:
#        system     the crate as published (the system allocator, as a baseline),
#        specalloc  specalloc as a dev-dependency, and in the library's `cfg(test)` build and in
#                   every integration-test crate a
#                   `#[global_allocator] static _: specalloc::SpecAlloc = specalloc::SpecAlloc;`
#                   plus one extra test, `specalloc_peer_installed`, asserting at run time that
#                   allocations went through specalloc (`specalloc::stats().allocs` grew),
#        checked    the same with specalloc's `checked` feature (misuse aborts),
#   3. builds the unit and integration test binaries (`cargo test --lib --tests --no-run`),
#      checks with `nm` that every binary of the specalloc configurations contains specalloc's
#      runtime, runs each binary and counts passed/failed/ignored tests (the extra proof test is
#      counted apart, not in "passed"),
#   4. prints a table of all results found under the work directory.
#
# Doc tests are not run: rustdoc compiles each example as its own program, which would not have
# specalloc installed. Integration-test crates that define their own `#[global_allocator]`
# (bytes has two) keep it; they are counted in the `own` column and run with their allocator.
# Test crates compiled empty (a `#![cfg(feature = ...)]` for a feature off by default) are
# counted in the `empty` column. Fix-ups of published packages (applied to every configuration):
#   regex  its package leaves out tests/fuzz/ (fuzz regression inputs) that tests/lib.rs
#          declares as a module: an empty module stands in for it.
#
# Usage: scripts/peer-suites.sh [crate ...]          (run and print the table)
#        scripts/peer-suites.sh --table               (print the table of earlier runs)
# Environment:
#   PEER_SUITES_DIR   work directory (default /tmp/specalloc-peer-suites); never the repo
#   SPECALLOC_SRC     specalloc source to test (default: `git archive HEAD` of this repository,
#                     so uncommitted edits in the working tree are not picked up)
#   PEER_CONFIGS      configurations to run (default "system specalloc checked")
#   PEER_TIMEOUT      seconds per test binary (default 1800)
#
# It downloads and builds a lot (several GB of target directories): it is not part of .ci/run.
# Run it niced: `nice -n 15 scripts/peer-suites.sh`.
set -euo pipefail

REPO=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
WORK=${PEER_SUITES_DIR:-/tmp/specalloc-peer-suites}
CONFIGS=${PEER_CONFIGS:-system specalloc checked}
TIMEOUT=${PEER_TIMEOUT:-1800}
DEFAULT_CRATES="serde_json hashbrown indexmap bytes regex smallvec"

case "$WORK" in
"$REPO" | "$REPO"/*)
    echo "PEER_SUITES_DIR must be outside the repository" >&2
    exit 2
    ;;
esac
for tool in cargo jq nm timeout; do
    command -v "$tool" >/dev/null || {
        echo "peer-suites: $tool is required" >&2
        exit 2
    }
done
mkdir -p "$WORK/results" "$WORK/logs"

# The table of every result file under $WORK/results (one line per crate).
print_table() {
    local f crate
    echo
    echo "specalloc: $(cat "$WORK/specalloc.rev" 2>/dev/null || echo '?')"
    echo
    echo "| crate | version | system | specalloc | checked | test binaries: specalloc proven / own allocator / empty / total |"
    echo "|---|---|---|---|---|---|"
    for f in "$WORK"/results/*.version; do
        [ -e "$f" ] || continue
        crate=$(basename "$f" .version)
        local row="| $crate | $(cat "$f")"
        local bins="-"
        for config in system specalloc checked; do
            local r="$WORK/results/$crate.$config"
            if [ -e "$r.build-failed" ]; then
                row+=" | build failed"
            elif [ -e "$r.tsv" ]; then
                # Columns: binary passed failed ignored proof(0/1/-) crashed(0/1) nm(0/1) own(0/1)
                row+=$(awk -F'\t' '{p+=$2; f+=$3; i+=$4; c+=$6}
                    END {printf " | %d passed, %d failed, %d ignored%s", p, f, i,
                         (c ? sprintf(", %d binaries crashed", c) : "")}' "$r.tsv")
                if [ "$config" = specalloc ]; then
                    bins=$(awk -F'\t' '{n++; if ($5=="1" && $7=="1") ok++; if ($8=="1") own++;
                                         if ($8=="2") empty++}
                        END {printf "%d / %d / %d / %d", ok, own, empty, n}' "$r.tsv")
                fi
            else
                row+=" | -"
            fi
        done
        echo "$row | $bins |"
    done
    local totals="| **total** |"
    for config in system specalloc checked; do
        totals+=$(cat "$WORK"/results/*."$config".tsv 2>/dev/null | awk -F'\t' '{p+=$2; f+=$3; c+=$6}
            END {printf " | %d passed, %d failed%s", p, f, (c ? sprintf(", %d crashed", c) : "")}')
    done
    echo "$totals | |"
    echo
}

if [ "${1:-}" = --table ]; then
    print_table
    exit 0
fi
CRATES=${*:-$DEFAULT_CRATES}

# --- specalloc: a snapshot of the committed tree -------------------------------------------------
if [ -n "${SPECALLOC_SRC:-}" ]; then
    SPEC=$SPECALLOC_SRC
    echo "$SPEC (as found)" >"$WORK/specalloc.rev"
else
    SPEC=$WORK/specalloc
    rm -rf "$SPEC"
    mkdir -p "$SPEC"
    git -C "$REPO" archive HEAD | tar -x -C "$SPEC"
    echo "commit $(git -C "$REPO" rev-parse --short HEAD)" >"$WORK/specalloc.rev"
fi

# --- fetching ------------------------------------------------------------------------------------
# Prints the directory of the crate's unpacked published source.
fetch() {
    local crate=$1 dir=$WORK/fetch/$1
    mkdir -p "$dir/src"
    cat >"$dir/Cargo.toml" <<EOF
[package]
name = "peer-fetch-$crate"
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

# The code added to the library (under cfg(test)) and to each integration-test crate.
inject() {
    local file=$1 cfg=$2
    cat >>"$file" <<EOF

// ---- added by specalloc's scripts/peer-suites.sh ----
$cfg
extern crate specalloc as specalloc_peer;
$cfg
extern crate std as specalloc_peer_std;
$cfg
#[global_allocator]
static SPECALLOC_PEER_GLOBAL: specalloc_peer::SpecAlloc = specalloc_peer::SpecAlloc;
$cfg
#[test]
fn specalloc_peer_installed() {
    let before = specalloc_peer::stats().allocs;
    // black_box: at opt-level 3 (regex's test profile) an unobserved Box is elided.
    let b = specalloc_peer_std::hint::black_box(specalloc_peer_std::boxed::Box::new([7u8; 100]));
    assert_eq!(b[99], 7);
    assert!(specalloc_peer::stats().allocs > before, "specalloc is not the global allocator");
}
EOF
}

# Prepares $dst as configuration $config of the crate whose source is $src.
prepare() {
    local src=$1 dst=$2 config=$3
    rm -rf "$dst"
    mkdir -p "$(dirname "$dst")"
    cp -r "$src" "$dst"
    chmod -R u+w "$dst"
    rm -f "$dst/Cargo.lock"
    # A workspace of its own, so that nothing above it is taken for its workspace root.
    grep -q '^\[workspace\]' "$dst/Cargo.toml" || printf '\n[workspace]\n' >>"$dst/Cargo.toml"
    case "$(basename "$(dirname "$dst")")" in
    regex)
        if [ ! -e "$dst/tests/fuzz" ] && grep -q '^mod fuzz;' "$dst/tests/lib.rs"; then
            mkdir -p "$dst/tests/fuzz"
            echo '// tests/fuzz is not in the published package (see scripts/peer-suites.sh)' \
                >"$dst/tests/fuzz/mod.rs"
        fi
        ;;
    esac
    : >"$dst/.own-allocator"
    [ "$config" = system ] && return 0
    local features=()
    [ "$config" = checked ] && features=(--features checked)
    (cd "$dst" && cargo add --quiet --dev specalloc --path "$SPEC" "${features[@]}")
    local meta
    meta=$(cd "$dst" && cargo metadata --format-version 1 --no-deps --quiet)
    local lib
    lib=$(jq -r '.packages[0].targets[] | select(.kind | index("lib")) | .src_path' <<<"$meta")
    [ -n "$lib" ] && inject "$lib" '#[cfg(test)]'
    local t
    while IFS= read -r t; do
        [ -n "$t" ] || continue
        if grep -q 'global_allocator' "$t"; then
            echo "  $(basename "$t"): has its own #[global_allocator]; left as it is"
            basename "$t" .rs >>"$dst/.own-allocator"
        else
            inject "$t" ''
        fi
    done < <(jq -r '.packages[0].targets[] | select(.kind | index("test")) | .src_path' <<<"$meta")
}

# Builds and runs the test binaries of $dir; writes $WORK/results/$crate.$config.tsv.
run_config() {
    local crate=$1 config=$2 dir=$3
    local out=$WORK/results/$crate.$config log=$WORK/logs/$crate.$config
    rm -f "$out.tsv" "$out.build-failed"
    echo "== $crate [$config]: building"
    if ! (cd "$dir" && CARGO_TARGET_DIR=$WORK/target/$crate \
        cargo test --lib --tests --no-run --message-format=json 2>"$log.build.err") \
        >"$log.build.json"; then
        echo "   build failed; see $log.build.err"
        tail -20 "$log.build.err"
        touch "$out.build-failed"
        return 0
    fi
    local exes
    exes=$(jq -r 'select(.reason == "compiler-artifact" and .profile.test == true and .executable != null) | .executable' "$log.build.json" | sort -u)
    : >"$out.tsv.tmp"
    local exe
    for exe in $exes; do
        local name
        name=$(basename "$exe")
        local blog=$log.$name.log
        echo "   running $name"
        local rc=0
        (cd "$dir" && CARGO_MANIFEST_DIR=$dir CARGO_PKG_NAME=$crate \
            timeout "$TIMEOUT" "$exe" >"$blog" 2>&1) || rc=$?
        local passed=0 failed=0 ignored=0 crashed=0 proof=- nm_ok=0 own=0
        local res
        res=$(grep -E '^test result: ' "$blog" | tail -1 || true)
        if [ -n "$res" ]; then
            passed=$(sed -E 's/.* ([0-9]+) passed.*/\1/' <<<"$res")
            failed=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$res")
            ignored=$(sed -E 's/.* ([0-9]+) ignored.*/\1/' <<<"$res")
        fi
        if [ -z "$res" ] || { [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; }; then
            crashed=1
            echo "   $name: exit status $rc without a test summary; see $blog"
        fi
        if [ "$config" != system ]; then
            if grep -q '^test specalloc_peer_installed \.\.\. ok' "$blog"; then
                proof=1
                passed=$((passed - 1))
            else
                proof=0
                grep -q '^test specalloc_peer_installed ' "$blog" && failed=$((failed - 1))
            fi
            # (grep -c reads all of nm's output: grep -q would make nm fail with SIGPIPE.)
            local nsyms
            nsyms=$(nm "$exe" 2>/dev/null | grep -c specalloc_runtime || true)
            [ "${nsyms:-0}" -gt 0 ] && nm_ok=1
        fi
        # own: 1 = the test crate has its own #[global_allocator]; 2 = it compiled to no tests.
        if grep -qx "${name%-*}" "$dir/.own-allocator"; then
            own=1
        elif [ "$passed" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$ignored" -eq 0 ] && [ "$proof" != 1 ]; then
            own=2
        fi
        printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$passed" "$failed" "$ignored" \
            "$proof" "$crashed" "$nm_ok" "$own" >>"$out.tsv.tmp"
    done
    mv "$out.tsv.tmp" "$out.tsv"
    awk -F'\t' '{printf "   %-40s passed %5d  failed %3d  ignored %3d  proof %s  nm %s%s\n",
        $1, $2, $3, $4, $5, $7, ($8 == "1" ? "  (own allocator)" : ($8 == "2" ? "  (empty)" : ""))}' "$out.tsv"
}

for crate in $CRATES; do
    echo "== $crate: fetching"
    src=$(fetch "$crate")
    [ -d "$src" ] || {
        echo "could not fetch $crate" >&2
        exit 1
    }
    basename "$src" | sed "s/^$crate-//" >"$WORK/results/$crate.version"
    for config in $CONFIGS; do
        prepare "$src" "$WORK/src/$crate/$config" "$config"
        run_config "$crate" "$config" "$WORK/src/$crate/$config"
    done
done
print_table
