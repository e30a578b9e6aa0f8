//! A probe of the generic path's instruction count, for callgrind: a loop of 1,000
//! allocations of one size through an allocator's `GlobalAlloc` (the size hidden from the
//! compiler), then their frees in allocation order, repeated. Every allocator runs the same
//! monomorphised loop; callgrind counts only `measured_loop` (`--toggle-collect`).
//!
//! ```text
//! cargo build --release -p specalloc-bench --features peers --bin tiny_probe
//! valgrind --tool=callgrind --toggle-collect='*measured_loop*' \
//!     target/release/tiny_probe --alloc specalloc --size 4 --rounds 200
//! ```
//!
//! The instructions per alloc+free are the collected total divided by `rounds * 1000`.
//! `--alloc` is one of `specalloc`, `system`, and with `--features peers` `mimalloc`,
//! `jemalloc`, `snmalloc` (snmalloc cannot run under valgrind).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;

/// Allocations per round.
const BATCH: usize = 1000;

/// The measured loop: `rounds` times, `BATCH` allocations of `size` bytes, then their frees.
#[inline(never)]
fn measured_loop<A: GlobalAlloc>(a: &A, size: usize, rounds: usize) -> usize {
    let layout = Layout::from_size_align(size, 1).expect("valid layout");
    let mut ptrs = [std::ptr::null_mut::<u8>(); BATCH];
    let mut sink = 0usize;
    for _ in 0..rounds {
        for p in ptrs.iter_mut() {
            // SAFETY: a non-zero-sized layout.
            *p = unsafe { a.alloc(layout) };
            sink = sink.wrapping_add(black_box(*p) as usize);
        }
        for p in ptrs.iter() {
            // SAFETY: allocated just above with `layout`, freed once.
            unsafe { a.dealloc(*p, layout) };
        }
    }
    sink
}

fn usage() -> ! {
    println!("usage: tiny_probe --alloc NAME [--size N] [--rounds N]");
    std::process::exit(2)
}

fn main() {
    let mut alloc = None;
    let mut size = 4usize;
    let mut rounds = 200usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--alloc" => alloc = Some(val()),
            "--size" => size = val().parse().unwrap_or_else(|_| usage()),
            "--rounds" => rounds = val().parse().unwrap_or_else(|_| usage()),
            "--help" | "-h" => {
                println!("usage: tiny_probe --alloc NAME [--size N] [--rounds N]");
                return;
            }
            _ => usage(),
        }
    }
    if size == 0 {
        usage();
    }
    let size = black_box(size);
    let sink = match alloc.as_deref() {
        Some("specalloc") => measured_loop(&specalloc_runtime::SpecAlloc, size, rounds),
        Some("system") => measured_loop(&System, size, rounds),
        #[cfg(feature = "peers")]
        Some("mimalloc") => measured_loop(&mimalloc::MiMalloc, size, rounds),
        #[cfg(feature = "peers")]
        Some("jemalloc") => measured_loop(&tikv_jemallocator::Jemalloc, size, rounds),
        #[cfg(feature = "peers")]
        Some("snmalloc") => measured_loop(&snmalloc_rs::SnMalloc, size, rounds),
        _ => usage(),
    };
    black_box(sink);
}
