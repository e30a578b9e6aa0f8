//! The order in which a thread refills a class from its spans that were full and got blocks
//! back: the span taken back first is refilled from first. A program that frees at random into
//! full spans otherwise refills from the span it freed into last, often with a block or two, and
//! moves on at once (C `churn`: 7 % more instructions and a sixth more resident memory that
//! way, `bench/RESULTS.md`).
//!
//! On a thread of its own (a heap with nothing else in this class), with blocks of a class that
//! nothing else in this test binary allocates: three spans are filled, blocks are freed back into
//! the first two (enough for each to be taken off the full list), and the next allocation after
//! the third runs out must come from the first.

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

use std::alloc::{alloc, dealloc, Layout};

use specalloc::size_class::{class_objects, class_of};

/// Blocks freed back into each full span: more than a span needs to be taken back (a parked span
/// wakes once a quarter of its blocks, or four, are free).
const FREED: usize = 8;

#[test]
fn the_span_taken_back_first_is_refilled_from_first() {
    let size = 3072;
    let layout = Layout::from_size_align(size, 8).unwrap();
    let class = class_of(size, 8);
    assert_ne!(class, 0, "3072 B is a size class");
    let per_span = class_objects(class);
    assert!(per_span > FREED, "{per_span} blocks per span");
    std::thread::spawn(move || {
        // Three spans' worth, each span filled by bump allocation in turn: blocks [k * per_span,
        // (k + 1) * per_span) are span k's.
        let blocks: Vec<*mut u8> = (0..3 * per_span)
            .map(|_| {
                // SAFETY: a layout of non-zero size.
                let p = unsafe { alloc(layout) };
                assert!(!p.is_null());
                p
            })
            .collect();
        let spans: Vec<&[*mut u8]> = blocks.chunks(per_span).collect();
        // Every block of a span lies within the span's pages: the chunks really are spans.
        for s in &spans {
            let lo = s.iter().min().unwrap();
            let hi = s.iter().max().unwrap();
            assert!(
                (*hi as usize - *lo as usize) < per_span * size,
                "a span's blocks are not together: the class was in use before"
            );
        }
        // Back into the first span, then the second: the first is taken back first.
        for s in &spans[..2] {
            for &p in &s[..FREED] {
                // SAFETY: a live block of `layout`, freed once (the rest are freed below).
                unsafe { dealloc(p, layout) };
            }
        }
        // The third span is full: the next block comes from a span taken back.
        // SAFETY: as above.
        let next = unsafe { alloc(layout) };
        let from_first = spans[0][..FREED].contains(&next);
        let from_second = spans[1][..FREED].contains(&next);
        assert!(
            from_first,
            "the refill took a block of the {} span, not of the one taken back first",
            if from_second { "second" } else { "another" }
        );
        // SAFETY: `next` is live (allocated again above); the others were not freed yet.
        unsafe { dealloc(next, layout) };
        for s in &spans {
            for &p in &s[FREED..] {
                // SAFETY: live, freed once.
                unsafe { dealloc(p, layout) };
            }
        }
        for &p in &spans[2][..FREED] {
            // SAFETY: live, freed once.
            unsafe { dealloc(p, layout) };
        }
    })
    .join()
    .unwrap();
}
