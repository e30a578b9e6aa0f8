//! The loom models' stand-in for a chunk: one leaked, 4 MiB-aligned region (links are offsets
//! within it; offset 0 is never a block).

use std::sync::OnceLock;

/// The region's address.
pub fn arena() -> usize {
    static ARENA: OnceLock<usize> = OnceLock::new();
    *ARENA.get_or_init(|| {
        let layout = std::alloc::Layout::from_size_align(64 << 10, 4 << 20).unwrap();
        // SAFETY: a non-zero-sized layout; the region is leaked on purpose.
        let p = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!p.is_null());
        p as usize
    })
}
