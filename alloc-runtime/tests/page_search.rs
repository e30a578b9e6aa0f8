//! The page heap looks at every chunk it has before it maps a new one. The search for fresh
//! pages goes on from the chunk where the last one found room, round the list of chunks (newest
//! first) and back: room given back in an older chunk than that one, and then in a newer one,
//! is found both times without a new chunk.
//!
//! One test in this file, so no other test thread allocates while it counts pages and chunks.

use std::hint::black_box;

use specalloc_runtime::{collect, stats};

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

/// A medium object of 8 pages: a page run of its own, left untouched.
const BLOCK: usize = 64 << 10;
const PAGE: usize = 8 << 10;
/// Chunks are 4 MiB, aligned to their size.
const CHUNK_SHIFT: u32 = 22;

fn chunk_of(b: &[u8]) -> usize {
    b.as_ptr() as usize >> CHUNK_SHIFT
}

/// Gives `held[i]`'s pages back to the OS and allocates a block again: it must take that room
/// (in `what` chunk than the search's start), with the `chunks` mapped so far.
fn take_again(held: &mut Vec<Vec<u8>>, i: usize, chunks: usize, what: &str) {
    let chunk = chunk_of(&held[i]);
    drop(held.swap_remove(i));
    collect();
    held.push(Vec::with_capacity(BLOCK));
    assert_eq!(chunk_of(held.last().unwrap()), chunk);
    assert_eq!(
        stats().chunks,
        chunks,
        "the room in {what} chunk was not found"
    );
}

#[test]
fn room_before_and_after_the_last_search_is_found_without_a_new_chunk() {
    // Blocks are `Vec`s with capacity: a page run each, untouched.
    let mut held: Vec<Vec<u8>> = Vec::with_capacity(4096);
    // 1. Fill until a new chunk is mapped: then no older chunk has a run of 8 free pages.
    let mut before;
    loop {
        before = stats();
        held.push(Vec::with_capacity(BLOCK));
        if stats().chunks > before.chunks {
            break;
        }
        assert!(
            held.len() < 4000,
            "no new chunk after {} blocks",
            held.len()
        );
    }
    let newest = chunk_of(held.last().unwrap());
    // The older chunks' free pages stay as they are while the newest one fills.
    let old_free = before.free_pages;
    // 2. Fill the newest chunk.
    while stats().free_pages - old_free >= BLOCK / PAGE {
        held.push(Vec::with_capacity(BLOCK));
        assert_eq!(chunk_of(held.last().unwrap()), newest);
    }
    let chunks = stats().chunks;

    // 3. Room in the oldest chunk of ours, given back to the OS: the search starts at the
    // newest chunk and goes on to it.
    let oldest = chunk_of(&held[0]);
    assert_ne!(oldest, newest);
    take_again(&mut held, 0, chunks, "an older");

    // 4. Room in the newest chunk: the search starts at the oldest one now, goes on to the end
    // of the list and round to the newest.
    let i = held.iter().position(|b| chunk_of(b) == newest).unwrap();
    take_again(&mut held, i, chunks, "a newer");
    black_box(&held);
}
