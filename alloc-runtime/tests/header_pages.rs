//! A chunk header's pages of span descriptors go back to the OS when no run's descriptor is
//! in them (`chunk/decay.rs`): a thread's spans spread their descriptors over the header
//! (`chunk/slot.rs`), and once the spans are freed and their pages returned, the header keeps
//! no page for them: at once with `collect()`, and by itself within a few seconds.
//!
//! One test in this file, so that no other test thread takes spans meanwhile.

use std::time::{Duration, Instant};

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

/// Chunks are 4 MiB, aligned to their size.
const CHUNK: usize = 4 << 20;
/// The part of a chunk header the test looks at: its page map (4 KiB) and its descriptors
/// (512 of 128 bytes).
const HEADER: usize = (4 << 10) + 512 * 128;
/// A block size whose spans hold 128 blocks (64 KiB spans).
const SIZE: usize = 512;
const PER_SPAN: usize = 128;
const SPANS: usize = 40;
/// Resident header pages once the spans went back: the page map, and at most a page or two of
/// descriptors of runs that other allocations (the harness's, the test's vector) keep.
const AFTER: usize = 3;

/// Runs a live thread's heap keeps without `collect()`: its current span of the class and its
/// reserve of up to four runs (`heap/reserve.rs`), whose descriptors may lie in as many pages.
const KEPT: usize = 5;

/// Resident OS pages of the first [`HEADER`] bytes of the chunk at `chunk`.
fn resident(chunk: usize) -> usize {
    let mut out = vec![0u8; HEADER / 4096];
    // SAFETY: the range is part of a chunk the allocator mapped (a block of ours was in it),
    // and mincore writes a byte per page into `out`, which has that many.
    let r = unsafe { libc::mincore(chunk as *mut libc::c_void, HEADER, out.as_mut_ptr()) };
    assert_eq!(r, 0, "mincore");
    out.iter().filter(|&&b| b & 1 == 1).count()
}

/// Allocates [`SPANS`] spans' worth of blocks, checks that their descriptors took pages of the
/// header of the chunk most of them are in, frees them and calls `after_free` with the chunk;
/// returns what it returns and the resident header pages before the free.
fn spans_come_and_go(after_free: impl FnOnce(usize) -> usize) -> (usize, usize) {
    let blocks: Vec<Box<[u8; SIZE]>> = (0..SPANS * PER_SPAN)
        .map(|i| Box::new([i as u8; SIZE]))
        .collect();
    let mut chunks: Vec<usize> = blocks
        .iter()
        .map(|b| b.as_ptr() as usize & !(CHUNK - 1))
        .collect();
    chunks.sort_unstable();
    let chunk = chunks[chunks.len() / 2];
    let in_chunk = chunks.iter().filter(|&&c| c == chunk).count() / PER_SPAN;
    assert!(in_chunk >= SPANS / 2, "{in_chunk} spans in one chunk");
    assert!(blocks
        .iter()
        .enumerate()
        .all(|(i, b)| b[SIZE - 1] == i as u8));
    let before = resident(chunk);
    // The page map and a page of descriptors for each of the eight groups of slots that spaced
    // spans' descriptors fill.
    assert!(
        before >= 9,
        "{before} header pages resident with {in_chunk} spans"
    );
    drop(blocks);
    (after_free(chunk), before)
}

#[test]
fn descriptor_pages_of_freed_spans_go_back() {
    // At once, with `collect()`.
    let (after, before) = spans_come_and_go(|chunk| {
        specalloc_runtime::collect();
        resident(chunk)
    });
    assert!(
        after <= AFTER,
        "{after} header pages resident after collect(), {before} before"
    );
    // Without being asked: the page-return clock (the background trimmer runs it) gives them
    // back once they stayed unused a second or two, but those of the runs this thread's heap
    // keeps. Up to 20 s on a loaded machine.
    let (after, before) = spans_come_and_go(|chunk| {
        let start = Instant::now();
        while resident(chunk) > AFTER + KEPT && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(100));
        }
        resident(chunk)
    });
    assert!(
        after <= AFTER + KEPT,
        "{after} header pages resident 20 s after the free, {before} before"
    );
}
