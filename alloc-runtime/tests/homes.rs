//! Two threads that take fresh pages for spans at the same time take them in chunks of their
//! own, once each has made a few: a heap's home chunk (`chunk/place.rs`) serves its new spans,
//! and no other heap's while another chunk can. A thread that exits lets its home go.
//!
//! One test in this file, so that no other test thread takes spans meanwhile.

use std::collections::BTreeSet;
use std::sync::{Arc, Barrier};
use std::thread;

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

/// Chunks are 4 MiB, aligned to their size.
const CHUNK_SHIFT: u32 = 22;
/// A block size whose spans hold 128 blocks (64 KiB spans).
const SIZE: usize = 512;
const PER_SPAN: usize = 128;
/// Rounds of one span's worth of blocks per thread, in step with the other thread.
const ROUNDS: usize = 24;
/// Spans a heap makes before it reserves runs, and so before it has a home (`heap/reserve.rs`),
/// with room to spare.
const HOMELESS: usize = 8;

/// Allocates `ROUNDS` spans' worth of blocks, a span's worth between two waits on `step`;
/// returns the blocks' chunks from the round `HOMELESS` on, and the blocks.
// Boxes: each block is an allocation of its own, which a `Vec` of arrays would not be.
#[allow(clippy::vec_box)]
fn take_spans(step: &Barrier) -> (BTreeSet<usize>, Vec<Box<[u8; SIZE]>>) {
    let mut blocks = Vec::with_capacity(ROUNDS * PER_SPAN);
    let mut chunks = BTreeSet::new();
    for round in 0..ROUNDS {
        step.wait();
        for _ in 0..PER_SPAN {
            let b = Box::new([round as u8; SIZE]);
            if round >= HOMELESS {
                chunks.insert(b.as_ptr() as usize >> CHUNK_SHIFT);
            }
            blocks.push(b);
        }
    }
    (chunks, blocks)
}

#[test]
fn threads_that_take_spans_at_once_take_them_in_chunks_of_their_own() {
    let step = Arc::new(Barrier::new(2));
    let other = {
        let step = Arc::clone(&step);
        // Frees its blocks before it exits: its spans' pages go back to the page heap, free
        // pages that still hold memory.
        thread::spawn(move || take_spans(&step).0)
    };
    let (mine, my_blocks) = take_spans(&step);
    let theirs = other.join().unwrap();
    assert!(!mine.is_empty() && !theirs.is_empty());
    assert!(
        mine.is_disjoint(&theirs),
        "both threads' spans in chunks {:?}",
        mine.intersection(&theirs).collect::<Vec<_>>()
    );
    // Every block is intact.
    for (round, blocks) in my_blocks.chunks(PER_SPAN).enumerate() {
        assert!(blocks.iter().all(|b| b.iter().all(|&x| x == round as u8)));
    }
    // The other thread let its home go when it exited: a new thread takes its spans there, on
    // the pages the other one freed (free pages that hold memory go first, whoever's home they
    // are in, so that a home costs no memory).
    let newcomer = thread::spawn(|| take_spans(&Barrier::new(1)).0);
    let new_chunks = newcomer.join().unwrap();
    assert!(
        !theirs.is_disjoint(&new_chunks),
        "the new thread took none of the exited thread's chunks {theirs:?}: {new_chunks:?}"
    );
    drop(my_blocks);
}
