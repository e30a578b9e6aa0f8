#!/usr/bin/env bash
# The aarch64 build of libspecalloc.so, checked from an x86_64 Linux machine (not part of CI,
# which has no aarch64 toolchain): its thread-locals use the initial-exec TLS model (the same
# objdump check as on x86_64, alloc-capi/tests/tls.rs, here for TLS descriptors), and
# multi-threaded C workloads run on it under user-mode emulation with glibc's output and a
# report that shows specalloc ran. `--tests` also runs the runtime's own tests, built for
# aarch64 with the initial-exec feature, under the emulator (slow: tens of minutes).
#
# Needs: `rustup target add aarch64-unknown-linux-gnu`, and on Debian or Ubuntu
# `apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user`.
set -euo pipefail
cd "$(dirname "$0")/.."
target=aarch64-unknown-linux-gnu
sysroot=/usr/aarch64-linux-gnu
for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-objdump qemu-aarch64; do
    command -v "$tool" >/dev/null || { echo "check-aarch64: $tool is not installed" >&2; exit 2; }
done
rustup target list --installed | grep -qx "$target" ||
    { echo "check-aarch64: run rustup target add $target" >&2; exit 2; }
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $sysroot"

echo "== libspecalloc.so for $target"
cargo build --release --target "$target" -p specalloc-capi
lib=$PWD/target/$target/release/libspecalloc.so

echo "== its thread-locals: no TLS descriptor call in the allocator's functions"
SPECALLOC_SO=$lib SPECALLOC_BINUTILS_PREFIX=aarch64-linux-gnu- \
    cargo test --release -p specalloc-capi --test tls -- --nocapture

echo "== C workloads under qemu-aarch64, glibc then specalloc"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for w in larson xmalloc mallocthread prodcons; do
    aarch64-linux-gnu-gcc -O2 -Ibench/c "bench/c/$w.c" -o "$out/$w" -lpthread
    want=$(qemu-aarch64 -L "$sysroot" "$out/$w" 0.05 4)
    got=$(qemu-aarch64 -L "$sysroot" -E LD_PRELOAD="$lib" \
        -E SPECALLOC_STATS_AT_EXIT="$out/$w.stats" "$out/$w" 0.05 4)
    [ "$want" = "$got" ] || { echo "$w: specalloc printed '$got', glibc '$want'" >&2; exit 1; }
    grep -q '^specalloc pid=' "$out/$w.stats" ||
        { echo "$w: no report from specalloc: did it run?" >&2; exit 1; }
    echo "$w: $got; $(cat "$out/$w.stats")"
done

if [ "${1:-}" = --tests ]; then
    echo "== the runtime's tests for $target, under qemu-aarch64"
    cargo test --release --target "$target" -p specalloc-runtime --features initial-exec-tls
fi
echo "check-aarch64: all passed"
