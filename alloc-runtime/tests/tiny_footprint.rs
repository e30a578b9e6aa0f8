//! The tiny allocator's footprint, measured as Go's book measures it (§12.6.2): allocate 2^20
//! objects each of 3, 4, 12 and 16 bytes, keep them all, and report the average heap bytes per
//! object from `stats()`. Go's figures: 3 → 3.2, 4 → 4.0, 12 → 16.0, 16 → 16.0. Also: the
//! blocks all come back once the objects are freed, and the worst case (one survivor per
//! block) stays within its bound of one 16-byte block per survivor.

use std::alloc::Layout;

use specalloc_runtime::stats;

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

const N: usize = 1 << 20;

/// Heap bytes per object for 2^20 live objects of `size` bytes.
fn bytes_per_object(size: usize) -> f64 {
    let layout = Layout::from_size_align(size, 1).unwrap();
    // Start each group on a fresh block, as Go's runtime.GC() does between groups.
    let before = stats();
    let ptrs: Vec<*mut u8> = (0..N).map(|_| specalloc_runtime::alloc(layout)).collect();
    let during = stats();
    let per = (during.bytes_in_use - before.bytes_in_use) as f64 / N as f64;
    for p in ptrs {
        // SAFETY: allocated above with `layout`, freed once.
        unsafe { specalloc_runtime::dealloc(p, layout) };
    }
    // The Vec of pointers itself is a large object counted in the delta: subtract it.
    per - (N * 8) as f64 / N as f64
}

#[test]
fn footprint_matches_go_and_blocks_come_back() {
    let base = stats();
    let f3 = bytes_per_object(3);
    let f4 = bytes_per_object(4);
    let f12 = bytes_per_object(12);
    let f16 = bytes_per_object(16);
    println!("bytes per object: 3 -> {f3:.2}, 4 -> {f4:.2}, 12 -> {f12:.2}, 16 -> {f16:.2}");
    assert!((f3 - 3.2).abs() < 0.05, "3-byte objects: {f3}");
    assert!((f4 - 4.0).abs() < 0.05, "4-byte objects: {f4}");
    assert!((f12 - 16.0).abs() < 0.05, "12-byte objects: {f12}");
    assert!((f16 - 16.0).abs() < 0.05, "16-byte objects: {f16}");
    let after = stats();
    assert!(
        after.tiny_blocks <= base.tiny_blocks + 1,
        "tiny blocks did not come back: {} -> {}",
        base.tiny_blocks,
        after.tiny_blocks
    );

    // Worst case: keep one object of every block (every fifth 3-byte object). The bound: one
    // 16-byte block per survivor, nothing more.
    let layout = Layout::from_size_align(3, 1).unwrap();
    let ptrs: Vec<*mut u8> = (0..N).map(|_| specalloc_runtime::alloc(layout)).collect();
    let mut kept = Vec::new();
    for (i, p) in ptrs.into_iter().enumerate() {
        if i % 5 == 0 {
            kept.push(p);
        } else {
            // SAFETY: allocated above with `layout`, freed once.
            unsafe { specalloc_runtime::dealloc(p, layout) };
        }
    }
    let s = stats();
    let blocks = s.tiny_blocks - base.tiny_blocks;
    assert!(
        blocks <= kept.len() as u64 + 1,
        "{blocks} blocks for {} survivors",
        kept.len()
    );
    for p in kept {
        // SAFETY: allocated above with `layout`, freed once.
        unsafe { specalloc_runtime::dealloc(p, layout) };
    }
    assert!(stats().tiny_blocks <= base.tiny_blocks + 1);
}
