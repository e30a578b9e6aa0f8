//! The tiny class's footprint, measured as Go's book measures it (§12.6.2): allocate 2^20
//! objects each of 3, 4, 12 and 16 bytes, keep them all, and report the average heap bytes per
//! object from `stats()`. Go's figures: 3 → 3.2, 4 → 4.0, 12 → 16.0, 16 → 16.0. specalloc
//! trades the first row for a tiny class without shared blocks (any object can be freed by any
//! thread on its own): 3 → 4.0, 4 → 4.0, 12 → 16.0, 16 → 16.0, and the resident figure (pages)
//! is the same, since tiny spans carry no header. Also: freed blocks are reused, so a heap with
//! holes does not grow when it allocates again.

use std::alloc::Layout;

use specalloc_runtime::stats;

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

const N: usize = 1 << 20;

/// (Heap bytes, resident page bytes) per object for 2^20 live objects of `size` bytes.
fn bytes_per_object(size: usize) -> (f64, f64) {
    let layout = Layout::from_size_align(size, 1).unwrap();
    let mut ptrs: Vec<*mut u8> = Vec::with_capacity(N);
    let before = stats();
    ptrs.extend((0..N).map(|_| specalloc_runtime::alloc(layout)));
    let during = stats();
    let per = (during.bytes_in_use - before.bytes_in_use) as f64 / N as f64;
    // The runs a thread holds for its next spans hold no memory until used.
    let pages = ((during.pages_in_use - during.reserved) as f64
        - (before.pages_in_use - before.reserved) as f64)
        / N as f64;
    for p in ptrs {
        // SAFETY: allocated above with `layout`, freed once.
        unsafe { specalloc_runtime::dealloc(p, layout) };
    }
    (per, pages)
}

#[test]
fn footprint_and_reuse() {
    let base = stats();
    let rows: Vec<(usize, f64, f64)> = [1, 3, 4, 8, 12, 16]
        .into_iter()
        .map(|n| {
            let (b, p) = bytes_per_object(n);
            (n, b, p)
        })
        .collect();
    for (n, b, p) in &rows {
        println!("{n:>2} B: {b:.2} bytes per object, {p:.2} resident");
    }
    let want = [4.0, 4.0, 4.0, 8.0, 16.0, 16.0];
    for ((n, b, p), w) in rows.iter().zip(want) {
        assert!(
            (b - w).abs() < 0.01,
            "{n}-byte objects: {b} bytes each, want {w}"
        );
        // Resident pages: the objects, plus at most the spans kept partly used or cached.
        assert!(*p < w + 0.05, "{n}-byte objects: {p} resident bytes each");
    }
    let after = stats();
    assert_eq!(after.tiny_objects, base.tiny_objects, "tiny objects leaked");

    // Holes are reused: free four objects in five, then allocate as many again; the pages in
    // use do not grow by more than a span.
    let layout = Layout::from_size_align(3, 1).unwrap();
    let ptrs: Vec<*mut u8> = (0..N).map(|_| specalloc_runtime::alloc(layout)).collect();
    let mut kept = Vec::with_capacity(N);
    for (i, p) in ptrs.into_iter().enumerate() {
        if i % 5 == 0 {
            kept.push(p);
        } else {
            // SAFETY: allocated above with `layout`, freed once.
            unsafe { specalloc_runtime::dealloc(p, layout) };
        }
    }
    let mut again: Vec<*mut u8> = Vec::with_capacity(N - kept.len());
    let holes = stats();
    again.extend((0..N - kept.len()).map(|_| specalloc_runtime::alloc(layout)));
    let refilled = stats();
    assert!(
        refilled.pages_in_use <= holes.pages_in_use + 8192,
        "allocating into holes grew the heap: {} -> {}",
        holes.pages_in_use,
        refilled.pages_in_use
    );
    for p in kept.into_iter().chain(again) {
        // SAFETY: allocated above with `layout`, freed once.
        unsafe { specalloc_runtime::dealloc(p, layout) };
    }
    assert_eq!(stats().tiny_objects, base.tiny_objects);
}
