//! Blocks that other threads freed come back to their span's owner as a list taken whole: on its
//! own it becomes the span's free list without a block being read, and beside blocks the owner
//! freed itself the two lists are joined (whichever ends first is linked to the other). Either
//! way every block comes back exactly once: the owner's next allocations never hand out a live
//! block or one block twice, and once everything is freed the class's spans all go back.

use std::alloc::{alloc, dealloc, Layout};
use std::collections::HashSet;
use std::thread;

use specalloc::size_class::{class_objects, class_of};

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// The pattern block `i` holds: its index, in as many bytes as fit.
fn fill(p: *mut u8, size: usize, i: usize) {
    for k in 0..size.min(8) {
        // SAFETY: `p` is a live block of `size` bytes of ours.
        unsafe { p.add(k).write((i >> (8 * k)) as u8 ^ 0x5a) };
    }
}

fn holds(p: *mut u8, size: usize, i: usize) -> bool {
    // SAFETY: `p` is a live block of `size` bytes of ours.
    (0..size.min(8)).all(|k| unsafe { p.add(k).read() } == (i >> (8 * k)) as u8 ^ 0x5a)
}

/// Live blocks and spans of the class of `size`, in the whole program.
fn class_use(size: usize) -> (u64, usize) {
    let s = specalloc::stats();
    if size <= 4 {
        return (s.tiny_objects, s.tiny_spans);
    }
    let c = &s.classes[class_of(size, 1)];
    (c.live_objects, c.spans)
}

/// Blocks of `size` bytes in one span of their class.
fn per_span(size: usize) -> usize {
    if size <= 4 {
        // The 4-byte class: 64 KiB spans.
        (64 << 10) / 4
    } else {
        class_objects(class_of(size, 1))
    }
}

/// An owner thread allocates three spans' worth of `size`-byte blocks (the spans fill in order);
/// of each span, it frees the first `local` blocks itself, and then another thread frees the
/// next `remote` ones (and exits, which hands its batches over). A span parked full that got
/// fewer local frees than wake it up has both a local list and a remote list when the owner
/// takes it back: the two are joined. The owner then allocates as many blocks as were freed.
/// They must all come from the freed blocks (no new span is taken), none may be a kept block or
/// another new block, every kept block still holds its pattern, and after the owner frees
/// everything and collects, the class is back where it started.
fn round_trip(size: usize, local: usize, remote: usize) {
    specalloc::collect();
    let before = class_use(size);
    let layout = Layout::from_size_align(size, if size >= 8 { 8 } else { 1 }).unwrap();
    let owner = thread::spawn(move || {
        let per = per_span(size);
        let n = 3 * per;
        // SAFETY: a non-zero size.
        let blocks: Vec<usize> = (0..n).map(|_| unsafe { alloc(layout) } as usize).collect();
        assert!(blocks.iter().all(|&p| p != 0));
        for (i, &p) in blocks.iter().enumerate() {
            fill(p as *mut u8, size, i);
        }
        let spans_full = class_use(size).1;
        let (mut far, mut near, mut kept) = (Vec::new(), Vec::new(), Vec::new());
        for (i, &p) in blocks.iter().enumerate() {
            match i % per {
                k if k < local => near.push(p),
                k if k < local + remote => far.push(p),
                _ => kept.push((i, p)),
            }
        }
        for &p in &near {
            // SAFETY: blocks allocated above with `layout`, freed once.
            unsafe { dealloc(p as *mut u8, layout) };
        }
        let freed = far.len() + near.len();
        let freed_set: HashSet<usize> = far.iter().chain(&near).copied().collect();
        thread::spawn(move || {
            for p in far {
                // SAFETY: blocks allocated above with `layout`, freed once.
                unsafe { dealloc(p as *mut u8, layout) };
            }
        })
        .join()
        .unwrap();
        let live: HashSet<usize> = kept.iter().map(|&(_, p)| p).collect();

        let mut again = Vec::with_capacity(freed);
        let mut seen = HashSet::new();
        for j in 0..freed {
            // SAFETY: a non-zero size.
            let p = unsafe { alloc(layout) } as usize;
            assert!(p != 0);
            assert!(!live.contains(&p), "a live block was handed out again");
            assert!(
                freed_set.contains(&p),
                "a freed block was lost: another was handed out (size {size}, {local} local \
                 and {remote} remote frees per span)"
            );
            assert!(seen.insert(p), "one block was handed out twice");
            fill(p as *mut u8, size, n + j);
            again.push(p);
        }
        assert_eq!(
            class_use(size).1,
            spans_full,
            "the freed blocks were not all found again: a new span was taken (size {size}, \
             {local} local and {remote} remote frees per span)"
        );
        for &(i, p) in &kept {
            assert!(holds(p as *mut u8, size, i), "a kept block was overwritten");
        }
        for (j, &p) in again.iter().enumerate() {
            assert!(
                holds(p as *mut u8, size, n + j),
                "a new block was overwritten"
            );
        }
        for p in kept.into_iter().map(|(_, p)| p).chain(again) {
            // SAFETY: live blocks of ours, allocated with `layout`.
            unsafe { dealloc(p as *mut u8, layout) };
        }
    });
    owner.join().unwrap();
    specalloc::collect();
    assert_eq!(
        class_use(size),
        before,
        "the class's live blocks and spans (size {size}, {local} local and {remote} remote \
         frees per span) did not come back"
    );
}

#[test]
fn every_block_comes_back_once() {
    // Sizes this test binary hardly uses otherwise (a thread's start allocates blocks of 48
    // bytes and less): a 4-byte block (links are chunk offsets), a small and a larger block
    // (links are addresses).
    for size in [3, 136, 700] {
        // Local frees that leave a span parked (fewer than wake it), with more remote frees
        // (the local list ends first when joined) or fewer (the remote list ends first); remote
        // frees only; and local frees that wake the span before the remote ones come.
        for (local, remote) in [(2, 30), (3, 1), (0, 40), (20, 20)] {
            round_trip(size, local, remote);
        }
    }
}
