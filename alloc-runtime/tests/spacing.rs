//! A thread's 64 KiB spans taken from fresh pages lie a free page apart (`chunk/place.rs`):
//! side by side, they start at only two places of a 128 KiB period (the sets of a 2 MiB,
//! 16-way L2 cache); a page apart, at all sixteen. Longer spans lie side by side.
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

    // Longer spans (8 KiB blocks, 16 to a 128 KiB span) are not spaced: side by side.
    const BIG: usize = 8 << 10;
    const BIG_PER_SPAN: usize = 16;
    let big: Vec<Box<[u8; BIG]>> = (0..ROUNDS * BIG_PER_SPAN)
        .map(|i| Box::new([i as u8; BIG]))
        .collect();
    let mut big_starts = BTreeSet::new();
    for round in big.chunks(BIG_PER_SPAN) {
        let lo = round.iter().map(|b| b.as_ptr() as usize).min().unwrap();
        let hi = round.iter().map(|b| b.as_ptr() as usize).max().unwrap();
        if hi - lo == (BIG_PER_SPAN - 1) * BIG {
            big_starts.insert(lo);
        }
    }
    let side_by_side = big_starts
        .iter()
        .filter(|&&s| big_starts.contains(&(s + BIG_PER_SPAN * BIG)))
        .count();
    assert!(
        side_by_side >= ROUNDS / 2,
        "{side_by_side} of {} longer spans right after another",
        big_starts.len()
    );
    assert!(big.iter().enumerate().all(|(i, b)| b[BIG - 1] == i as u8));
}
