//! Benchmark of the allocator's *generic* path: plain `GlobalAlloc` calls
//! with a constant `Layout`, for specalloc against the system allocator and
//! (with `--features peers`) mimalloc, jemalloc and snmalloc, all in one
//! process.
//!
//! # What it measures
//!
//! A process has only one `#[global_allocator]`, so each allocator's
//! `GlobalAlloc` impl is called directly (`A.alloc(layout)` /
//! `A.dealloc(p, layout)`). The timed loops are generic over the allocator
//! and over `const SIZE: usize` and marked `#[inline(never)]`, so every
//! (allocator, size) pair gets its own monomorphised loop in which the
//! layout is a compile-time constant, exactly as at a call site of
//! `Box::new` for a fixed type. Every returned pointer goes through
//! `std::hint::black_box`, so no call can be optimised away; the size is
//! not hidden from the optimiser. This measures the path every allocation
//! takes through `GlobalAlloc`, not the size-specialised entry points.
//!
//! Sizes: 8, 16, 24, 48, 80, 96, 256 and 1024 bytes, align 8. Two shapes:
//!
//! * `lifo`: allocate one block and free it at once, repeatedly (the
//!   hot-cache best case). One operation = one alloc + one dealloc.
//! * `batch`: allocate 1000 blocks into a preallocated array, then free all
//!   1000 in allocation order, repeatedly. Reported per allocation: total
//!   time / 1000 / repetitions, so **the frees are included** in the figure.
//!
//! All runs are single-threaded, on the main thread.
//!
//! # Configurations
//!
//! `specalloc` (`specalloc_runtime::SpecAlloc`, the baseline of every
//! comparison), `specalloc A/A` (the very same loops again, as a noise
//! control: its delta should be `~`), `system` (`std::alloc::System`, the
//! platform's malloc), and with `--features peers`: `mimalloc`, `jemalloc`
//! (tikv-jemallocator) and `snmalloc` (snmalloc-rs, built with the `cc` crate: a
//! C++ compiler to build).
//!
//! # Running
//!
//! ```text
//! cargo run --release -p specalloc-bench --features peers --bin generic
//! cargo run --release -p specalloc-bench --bin generic -- --quick
//! ```
//!
//! Flags: `--quick` (6 short rounds, under 10 s: a smoke test, not a
//! measurement), `--rounds N` (default 30), `--out PATH` (raw samples;
//! default `target/bench-generic.csv`), `--seed N` (order of the cells).
//! The default run takes about a minute with the peers. Progress goes to
//! stderr, the tables to stdout.
//!
//! # Reading the tables
//!
//! One table per shape; one line per size; one column per configuration
//! with `median ± spread` in ns per operation over the rounds (the spread is
//! the largest deviation from the median among the non-outlier samples, as
//! a percentage of it). Each non-baseline configuration also has a
//! `vs specalloc` column: the change of its median against specalloc's
//! (`+50.0%` = takes 1.5× as long as specalloc, i.e. specalloc is faster;
//! negative = that allocator is faster) and the two-sided Mann-Whitney
//! p-value. When `p >= 0.05` the change is printed as `~`: it is not
//! distinguishable from noise. The last line is the geometric mean over the
//! sizes. In every round all cells run once, in a freshly shuffled order,
//! so drift of the machine hits all configurations alike; the `specalloc
//! A/A` column tells how large a delta noise alone produces on this machine.

use std::alloc::{handle_alloc_error, GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::ptr;
use std::time::{Duration, Instant};

use specalloc_bench::harness::{self, Benchmark, Cli, Results};

/// Blocks per repetition of the batch shape.
const BATCH: usize = 1000;

/// The layout of a `SIZE`-byte, 8-aligned block, as a constant.
const fn layout<const SIZE: usize>() -> Layout {
    match Layout::from_size_align(SIZE, 8) {
        Ok(l) if SIZE > 0 => l,
        _ => panic!("invalid benchmark layout"),
    }
}

/// `iters` times: allocate one `SIZE`-byte block from `a` and free it.
#[inline(never)]
fn lifo<A: GlobalAlloc, const SIZE: usize>(a: &A, iters: u64) -> Duration {
    let layout = const { layout::<SIZE>() };
    let start = Instant::now();
    for _ in 0..iters {
        // SAFETY: `layout` has a non-zero size (checked by `layout()` at
        // compile time), as `GlobalAlloc::alloc` requires.
        let p = black_box(unsafe { a.alloc(layout) });
        if p.is_null() {
            handle_alloc_error(layout);
        }
        // SAFETY: `p` is non-null, was just returned by `a.alloc(layout)`
        // with this same layout, and has not been freed.
        unsafe { a.dealloc(p, layout) };
    }
    start.elapsed()
}

/// `reps` times: allocate `BATCH` `SIZE`-byte blocks from `a` into `slots`,
/// then free them all in allocation order.
#[inline(never)]
fn batch<A: GlobalAlloc, const SIZE: usize>(
    a: &A,
    slots: &mut [*mut u8; BATCH],
    reps: u64,
) -> Duration {
    let layout = const { layout::<SIZE>() };
    let start = Instant::now();
    for _ in 0..reps {
        for slot in slots.iter_mut() {
            // SAFETY: `layout` has a non-zero size (checked by `layout()` at
            // compile time), as `GlobalAlloc::alloc` requires.
            let p = black_box(unsafe { a.alloc(layout) });
            if p.is_null() {
                handle_alloc_error(layout);
            }
            *slot = p;
        }
        for &p in slots.iter() {
            // SAFETY: every slot was filled by the loop above with a
            // non-null block from `a.alloc(layout)`, same layout, and each
            // is freed exactly once here before the slots are refilled.
            unsafe { a.dealloc(p, layout) };
        }
    }
    start.elapsed()
}

/// Adds the `lifo` and `batch` cells of one (allocator, size) pair.
fn add_size<A: GlobalAlloc + Sync, const SIZE: usize>(
    lifo_bench: &mut Benchmark<'static>,
    batch_bench: &mut Benchmark<'static>,
    config: &str,
    a: &'static A,
) {
    let row = SIZE.to_string();
    lifo_bench.add(&row, config, 1, move |n| lifo::<A, SIZE>(a, n));
    let mut slots = Box::new([ptr::null_mut(); BATCH]);
    batch_bench.add(&row, config, BATCH as u64, move |n| {
        batch::<A, SIZE>(a, &mut slots, n)
    });
}

/// Adds all sizes for allocator `a` under the name `config`.
fn add_allocator<A: GlobalAlloc + Sync>(
    lifo_bench: &mut Benchmark<'static>,
    batch_bench: &mut Benchmark<'static>,
    config: &str,
    a: &'static A,
) {
    let (l, b) = (&mut *lifo_bench, &mut *batch_bench);
    add_size::<A, 8>(l, b, config, a);
    add_size::<A, 16>(l, b, config, a);
    add_size::<A, 24>(l, b, config, a);
    add_size::<A, 48>(l, b, config, a);
    add_size::<A, 80>(l, b, config, a);
    add_size::<A, 96>(l, b, config, a);
    add_size::<A, 256>(l, b, config, a);
    add_size::<A, 1024>(l, b, config, a);
}

static SPECALLOC: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
static SYSTEM: System = System;
#[cfg(feature = "peers")]
static MIMALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;
#[cfg(feature = "peers")]
static JEMALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[cfg(feature = "peers")]
static SNMALLOC: snmalloc_rs::SnMalloc = snmalloc_rs::SnMalloc;

fn main() {
    let cli = Cli::from_env("generic");
    let mut lifo_bench = Benchmark::new(
        "lifo",
        "alloc + immediate dealloc of one block; ns per alloc/dealloc pair",
    );
    let mut batch_bench = Benchmark::new(
        "batch",
        "1000 allocs then 1000 deallocs; ns per allocation, frees included",
    );
    let (l, b) = (&mut lifo_bench, &mut batch_bench);
    add_allocator(l, b, "specalloc", &SPECALLOC);
    add_allocator(l, b, "specalloc A/A", &SPECALLOC);
    add_allocator(l, b, "system", &SYSTEM);
    #[cfg(feature = "peers")]
    {
        add_allocator(l, b, "mimalloc", &MIMALLOC);
        add_allocator(l, b, "jemalloc", &JEMALLOC);
        add_allocator(l, b, "snmalloc", &SNMALLOC);
    }
    l.baseline("specalloc");
    b.baseline("specalloc");

    if !cfg!(feature = "peers") {
        eprintln!("note: built without `--features peers`: only specalloc and system are measured");
    }
    if cli.quick {
        eprintln!("note: --quick: few short rounds; a smoke test, not a measurement");
    }
    let results: Vec<Results> = [lifo_bench, batch_bench]
        .iter_mut()
        .map(|bench| bench.run(&cli.options))
        .collect();

    println!(
        "generic path: GlobalAlloc::alloc/dealloc with a constant Layout (align 8), single thread"
    );
    for r in &results {
        println!();
        print!("{}", r.table("size (B)"));
    }
    match harness::write_csv(&cli.out, &results) {
        Ok(()) => eprintln!("raw samples: {}", cli.out.display()),
        Err(e) => {
            eprintln!("error: writing {}: {e}", cli.out.display());
            std::process::exit(1);
        }
    }
}
