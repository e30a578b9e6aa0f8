//! A thread's spans taken from fresh pages lie a free page apart (`chunk/place.rs`): side by
//! side, 64 KiB spans start at only two places of a 128 KiB period, where the lines of every
//! span at the same offset share the cache's sets; a page apart, they start at all sixteen.
//!
//! One test in this file, so that no other test thread takes spans meanwhile.

use std::collections::BTreeSet;

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

/// A block size whose spans hold 128 blocks (64 KiB spans of 8 KiB pages).
const SIZE: usize = 512;
const PER_SPAN: usize = 128;
const SPAN_BYTES: usize = SIZE * PER_SPAN;
/// Spans' worth of blocks allocated.
const ROUNDS: usize = 40;
/// The period of the cache's sets the test looks at (2 MiB, 16 ways, 64-byte lines).
const PERIOD: usize = 128 << 10;

#[test]
fn spans_from_fresh_pages_are_a_page_apart() {
    let mut blocks: Vec<Box<[u8; SIZE]>> = Vec::with_capacity(ROUNDS * PER_SPAN);
    for round in 0..ROUNDS {
        for _ in 0..PER_SPAN {
            blocks.push(Box::new([round as u8; SIZE]));
        }
    }
    // A span's blocks are handed out in address order from its start, so a round whose blocks
    // cover exactly one span's bytes filled one fresh span (the first may finish a span the
    // test harness began).
    let mut starts = BTreeSet::new();
    for round in blocks.chunks(PER_SPAN) {
        let lo = round.iter().map(|b| b.as_ptr() as usize).min().unwrap();
        let hi = round.iter().map(|b| b.as_ptr() as usize).max().unwrap();
        if hi - lo == SPAN_BYTES - SIZE {
            starts.insert(lo);
        }
    }
    assert!(starts.len() >= ROUNDS - 2, "{} whole spans", starts.len());
    let adjacent: Vec<_> = starts
        .iter()
        .filter(|&&s| starts.contains(&(s + SPAN_BYTES)))
        .collect();
    assert!(
        adjacent.is_empty(),
        "spans right after others: {adjacent:x?}"
    );
    let places: BTreeSet<usize> = starts.iter().map(|s| s % PERIOD).collect();
    assert!(
        places.len() >= 8,
        "spans start at {} places of {PERIOD} bytes: {places:x?}",
        places.len()
    );
    for (round, blocks) in blocks.chunks(PER_SPAN).enumerate() {
        assert!(blocks.iter().all(|b| b.iter().all(|&x| x == round as u8)));
    }
}
