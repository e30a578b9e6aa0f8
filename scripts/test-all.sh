#!/usr/bin/env bash
# Every check CI runs (`.ci/run` calls this script; the README's test command is this script):
# formatting, clippy with warnings as errors (and on the shared library's `local-dynamic-tls`
# build), the docs with warnings as errors, the whole workspace's tests, the facade's suite
# again with the checked mode and the opt-out switch on,
# the runtime's unit tests and the facade's multi-threaded suites in a release build,
# the runtime's JSON stats test under its `serde` feature, and the install mark set by a
# constructor, and the heap profiler (with `go tool pprof` where it can be installed).
set -euo pipefail
cd "$(dirname "$0")/.."
# `go tool pprof` reads the heap profiler's dumps in its tests: Debian's golang-go, installed
# here where the machine allows it (as root with apt); the tests skip that check, with a line,
# without it.
if ! command -v go >/dev/null && command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get install -y -q golang-go >/dev/null 2>&1 ||
        { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q golang-go >/dev/null 2>&1; } ||
        echo "golang-go could not be installed: pprof's reading of the dumps is not checked"
fi
cargo fmt --all --check
cargo clippy --workspace --all-targets -- -D warnings
# The shared library's thread-locals through `thread_local!` (its `local-dynamic-tls` build).
cargo clippy -p specalloc-capi --features local-dynamic-tls -- -D warnings
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
cargo test --workspace
cargo test -p specalloc --features checked,no-size-specialized
# The heap profiler through the facade's `profiling` feature.
cargo clippy -p specalloc --features profiling --all-targets -- -D warnings
cargo test -p specalloc --features profiling --test profiling
cargo test -p specalloc --features profiling,checked --test profiling
# The runtime's optimised-build variants: `dev`-based builds (the test profile among them) read
# the thread-locals and relaxed atomics with inline assembly, so the release variants are run
# here on the multi-threaded suites.
cargo test --release -p specalloc-runtime --lib
cargo test --release -p specalloc --test stress --test thread_churn --test global_alloc \
    --test teardown --test abandoned --test outbox
# The fast paths in assembly serve a runtime compiled at opt-level 0 (`generic/asm.rs`,
# `heap/fast_asm.rs`; the test profile is optimised): the entry points, the model and the
# multi-threaded suites in the plain `dev` profile.
cargo test --profile dev -p specalloc-runtime --test entry_paths --test spec --test model \
    --test large_dealloc
cargo test --profile dev -p specalloc --test stress --test thread_churn --test global_alloc \
    --test tiny --test outbox
cargo test -p specalloc-runtime --features serde --test stats_json
cargo test -p specalloc-runtime --features serde --doc -- snapshot::Stats
# The install mark of targets without weak symbols (a constructor), forced here, in a target
# directory of its own so that the builds above stay cached.
SPECALLOC_RUN_TIME_MARK=1 CARGO_TARGET_DIR=target/run-time-mark \
    cargo test -p specalloc --test install_mark --test not_installed --test differential \
    --test differential_not_installed
