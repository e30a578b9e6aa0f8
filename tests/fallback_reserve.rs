//! A thread that allocates after specalloc tore its heap down (in a pthread-key destructor of
//! the last round) is served by the shared fallback heap. That heap takes its spans' pages one
//! run at a time: it keeps no reserve of runs for later spans, which nothing would give back.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// Blocks allocated by the destructor, over all its rounds.
static BLOCKS: AtomicUsize = AtomicUsize::new(0);

/// Each destructor round: 2 MiB of 1 KiB blocks (many new spans), allocated and freed.
fn work(_round: usize) {
    let blocks: Vec<Box<[u8; 1024]>> = (0..2048).map(|i| Box::new([i as u8; 1024])).collect();
    assert!(blocks.iter().enumerate().all(|(i, b)| b[1023] == i as u8));
    BLOCKS.fetch_add(blocks.len(), Ordering::Relaxed);
}

#[test]
fn fallback_heap_keeps_no_reserve() {
    let key = common::rearming_key(work);
    // The runs other live threads hold (the harness's): this thread gives its own back.
    specalloc::collect();
    let base = specalloc::stats().reserved;
    for _ in 0..4 {
        std::thread::spawn(move || {
            drop(Box::new(2u64));
            common::arm_rearming_key(key);
        })
        .join()
        .unwrap();
    }
    // glibc runs the destructors up to four rounds; specalloc's heap is gone in the last.
    let blocks = BLOCKS.load(Ordering::Relaxed);
    assert!(
        blocks >= 4 * 3 * 2048,
        "the destructor did not re-arm: {blocks} blocks"
    );
    // The threads have exited and given their reserves back.
    specalloc::collect();
    let s = specalloc::stats();
    assert_eq!(
        s.reserved, base,
        "runs held in reserve after the threads' destructors allocated: {s}"
    );
}
