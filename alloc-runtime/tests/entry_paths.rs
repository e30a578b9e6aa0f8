//! The `GlobalAlloc` entry points against the size-class table, for every small layout: the
//! class each allocation is counted in, its alignment and usable bytes, the order a freed block
//! comes back in, frees that empty spans, frees from other threads and after the owner exited.
//!
//! In a `dev`-based build with the runtime at opt-level 0 (`cargo test --profile dev`) on
//! x86_64 Linux these entry points start with the fast paths written in assembly
//! (`src/generic/asm.rs`), so this checks them against the Rust definitions
//! (`size_class::route`, `usable_size`); in an optimised build it checks the Rust paths the
//! same way. One test function: the per-class counters are process-wide, and a second test running
//! beside it would move them.

use std::alloc::{alloc, dealloc, Layout};

use specalloc_runtime::size_class::{route, Route};
use specalloc_runtime::{stats, usable_size};

specalloc_runtime::install!(static GLOBAL);

/// Every alignment a small class can serve, and one above.
const ALIGNS: [usize; 13] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096];

/// Allocates `layout` through the global allocator, checks the block and writes it whole.
fn take(layout: Layout) -> *mut u8 {
    // SAFETY: `layout` has a non-zero size (the callers' sizes start at 1).
    let p = unsafe { alloc(layout) };
    assert!(!p.is_null(), "{layout:?}: null");
    assert_eq!(
        p as usize % layout.align(),
        0,
        "{layout:?}: misaligned {p:?}"
    );
    // SAFETY: the block holds at least `usable_size(layout)` bytes.
    unsafe { p.write_bytes(0xa5, usable_size(layout)) };
    p
}

/// Frees a block of [`take`].
fn give(p: *mut u8, layout: Layout) {
    // SAFETY: allocated by `take` with this layout, freed once.
    unsafe { dealloc(p, layout) }
}

/// The allocations and frees counted for `layout`'s class (the tiny counters for the tiny
/// class), and the process's remote frees.
fn counts(layout: Layout) -> (u64, u64, u64) {
    let s = stats();
    let (a, f) = match route(layout.size(), layout.align()) {
        Route::Tiny => (s.tiny_allocs, s.tiny_frees),
        Route::Small(c) => (s.classes[c].allocs, s.classes[c].frees),
        Route::Large => (s.allocs - s.tiny_allocs, s.frees - s.tiny_frees),
    };
    (a, f, s.remote_frees)
}

#[test]
fn entry_points_follow_the_class_table() {
    // Each small layout: counted in its class, aligned, writable to its usable size; a freed
    // block is the next one handed out (LIFO, pointer and tiny offset links alike).
    for size in 1..=1100 {
        for align in ALIGNS {
            let layout = Layout::from_size_align(size, align).unwrap();
            let small = !matches!(route(size, align), Route::Large);
            let before = counts(layout);
            let p = take(layout);
            let q = take(layout);
            assert_ne!(p, q, "{layout:?}: one block twice");
            give(q, layout);
            let mid = counts(layout);
            if small {
                assert_eq!(mid.0 - before.0, 2, "{layout:?}: allocations counted");
                assert_eq!(mid.1 - before.1, 1, "{layout:?}: frees counted");
                assert_eq!(
                    take(layout),
                    q,
                    "{layout:?}: the freed block comes back first"
                );
            } else {
                give(take(layout), layout);
            }
            give(p, layout);
            if small {
                give(q, layout);
            }
        }
    }

    // A block freed dirty reads zero when it comes back zeroed: the free marks its span's free
    // list as no longer all zero.
    for size in (1..=1100).step_by(7) {
        let layout = Layout::from_size_align(size, 8).unwrap();
        for _ in 0..2 {
            // SAFETY: a non-zero size.
            let z = unsafe { std::alloc::alloc_zeroed(layout) };
            assert!(!z.is_null());
            // SAFETY: the block holds `size` bytes.
            let bytes = unsafe { std::slice::from_raw_parts(z, size) };
            assert!(bytes.iter().all(|&b| b == 0), "{layout:?}: not zeroed");
            // SAFETY: as above.
            unsafe { z.write_bytes(0x5a, size) };
            give(z, layout);
        }
    }

    // Frees that empty spans: many spans' worth of a class and of the tiny class, freed in
    // the order taken and then taken again.
    for layout in [
        Layout::new::<u32>(),
        Layout::new::<[u64; 4]>(),
        Layout::from_size_align(1000, 8).unwrap(),
    ] {
        for _ in 0..3 {
            let live = stats().live_objects;
            let blocks: Vec<_> = (0..20_000).map(|_| take(layout)).collect();
            let mut sorted: Vec<_> = blocks.iter().map(|&p| p as usize).collect();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(
                sorted.len(),
                blocks.len(),
                "{layout:?}: a block handed out twice"
            );
            drop(sorted);
            for p in blocks {
                give(p, layout);
            }
            assert!(
                stats().live_objects <= live,
                "{layout:?}: blocks still counted live"
            );
        }
    }

    // Frees from another thread, and blocks of a thread that has exited, freed here: the
    // entry points' misses.
    for layout in [Layout::new::<u16>(), Layout::new::<[u8; 48]>()] {
        let before = counts(layout);
        let blocks: Vec<usize> = (0..5_000).map(|_| take(layout) as usize).collect();
        std::thread::spawn(move || {
            for p in blocks {
                give(p as *mut u8, layout);
            }
        })
        .join()
        .unwrap();
        let after = counts(layout);
        assert!(
            after.1 - before.1 >= 5_000,
            "{layout:?}: remote frees counted"
        );
        assert!(after.2 - before.2 >= 5_000, "{layout:?}: counted as remote");

        let theirs: Vec<usize> =
            std::thread::spawn(move || (0..5_000).map(|_| take(layout) as usize).collect())
                .join()
                .unwrap();
        for p in theirs {
            give(p as *mut u8, layout);
        }
        let blocks: Vec<_> = (0..5_000).map(|_| take(layout)).collect();
        for p in blocks {
            give(p, layout);
        }
    }
}
