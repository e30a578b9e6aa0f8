//! The cost of an alloc+free pair in a user crate built at opt-level 0 (cargo's `dev` profile):
//! 32-byte blocks through the global allocator (`std::alloc::alloc`/`dealloc`, the path `Box`,
//! `Vec` and `String` take), and, for reference, glibc's `malloc`/`free` called directly
//! (`std::alloc::System`), in interleaved rounds; then `boxes` `Box::new(i)` kept in a `Vec` and
//! then dropped, each round. The global allocator is specalloc, or glibc's with `--features
//! compare-system`. With a non-zero `stack_kib` it only runs a thread with that much stack that
//! allocates and frees boxes, and prints `ok` (a stack overflow kills the process).
//!
//! ```text
//! cargo run --example debug_bench [pairs_per_round] [rounds] [boxes] [stack_kib]
//! cargo run --example debug_bench --features compare-system        # glibc as the global allocator
//! # with the profile lines docs/usage.md ("Debug builds") recommends:
//! cargo run --example debug_bench --config 'profile.dev.package.specalloc-runtime.opt-level=3'
//! ```
//!
//! `scripts/debug_bench.sh` runs it in the configurations that matter, with callgrind's
//! instruction counts (the repeatable figure on a noisy machine).

#[path = "common/args.rs"]
mod args;

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::time::Instant;

#[cfg(not(feature = "compare-system"))]
specalloc::install!(static GLOBAL);

#[cfg(feature = "compare-system")]
#[global_allocator]
static GLOBAL: System = System;

/// The global allocator of this build.
const GLOBAL_NAME: &str = if cfg!(feature = "compare-system") {
    "glibc malloc (System)"
} else {
    "specalloc"
};

const USAGE: &str = "usage: debug_bench [pairs_per_round] [rounds] [boxes] [stack_kib]
  pairs_per_round  alloc+free pairs timed per allocator and round (default 2000000)
  rounds           interleaved rounds; the median is printed (default 7)
  boxes            Box::new(i) kept in a Vec and then dropped, timed each round through the
                   global allocator (default 3000000)
  stack_kib        if not 0: only run a thread with this many KiB of stack that allocates and
                   frees boxes, and print `ok` (default 0)";

/// The arguments (see `common/args.rs`).
fn args() -> (u64, usize, u64, u64) {
    let [pairs, rounds, boxes, stack] = args::numbers(
        "debug_bench",
        USAGE,
        [2_000_000, 7, 3_000_000, 0],
        |i, n| i == 3 || n > 0,
    );
    (pairs, rounds as usize, boxes, stack)
}

const LAYOUT: Layout = match Layout::from_size_align(32, 8) {
    Ok(l) => l,
    Err(_) => panic!("valid layout"),
};

/// `n` pairs through the global allocator, as `Box` and `Vec` allocate.
#[inline(never)]
fn pairs_global(n: u64) {
    for _ in 0..n {
        // SAFETY: a non-zero-sized layout; the block is freed once, with the same layout.
        unsafe {
            let p = std::alloc::alloc(LAYOUT);
            black_box(p);
            std::alloc::dealloc(p, LAYOUT);
        }
    }
}

/// `n` pairs through glibc's `malloc` and `free`.
#[inline(never)]
fn pairs_system(n: u64) {
    for _ in 0..n {
        // SAFETY: as above, with the system allocator on both sides.
        unsafe {
            let p = System.alloc(LAYOUT);
            black_box(p);
            System.dealloc(p, LAYOUT);
        }
    }
}

/// `n` boxes kept in a `Vec`, then dropped (the vector's capacity reserved first, so that only
/// the boxes allocate).
#[inline(never)]
fn keep_boxes(n: u64) {
    let mut v = Vec::with_capacity(n as usize);
    for i in 0..n {
        v.push(Box::new(i));
    }
    black_box(&v);
    drop(v);
}

/// A thread with `kib` KiB of stack allocates and frees boxes; a stack overflow kills the
/// process.
fn small_stack(kib: u64) {
    std::thread::Builder::new()
        .stack_size(kib as usize * 1024)
        .spawn(|| {
            for i in 0..100_000u64 {
                black_box(Box::new(i));
            }
        })
        .expect("spawn")
        .join()
        .expect("join");
    println!("ok");
}

/// Nanoseconds per pair of one timed run.
fn time(f: fn(u64), n: u64) -> f64 {
    let t = Instant::now();
    f(n);
    t.elapsed().as_nanos() as f64 / n as f64
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let (pairs, rounds, boxes, stack) = args();
    if stack > 0 {
        return small_stack(stack);
    }
    let opt = if cfg!(debug_assertions) {
        "debug assertions on (dev profile)"
    } else {
        "release"
    };
    println!("32-byte alloc+free pairs, {pairs} per round, {rounds} rounds, {opt}");
    // Warm up both (the thread heap, glibc's arena).
    pairs_global(1000);
    pairs_system(1000);
    let (mut spec, mut sys) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        // Alternate which goes first.
        if r % 2 == 0 {
            spec.push(time(pairs_global, pairs));
            sys.push(time(pairs_system, pairs));
        } else {
            sys.push(time(pairs_system, pairs));
            spec.push(time(pairs_global, pairs));
        }
    }
    let mut kept: Vec<f64> = (0..rounds)
        .map(|_| {
            let t = Instant::now();
            keep_boxes(boxes);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    let (s, g) = (median(&mut spec), median(&mut sys));
    println!("global allocator: {GLOBAL_NAME}");
    println!("through the global allocator: {s:.1} ns/pair (median)");
    println!("System called directly:       {g:.1} ns/pair (median)");
    println!(
        "{boxes} boxes kept, then dropped: {:.1} ms (median)",
        median(&mut kept)
    );
}
