//! Issue 15: a wrapper crate from the registry, `cap` (which tracks and limits the bytes
//! allocated), around `SpecAlloc` as the global allocator. Annotated code allocates through
//! it, so its count of allocated bytes rises with the allocations and comes back down after
//! the frees.

#![allow(clippy::vec_box)] // one allocation per box, on purpose

use cap::Cap;
use specalloc::{specialize, SpecAlloc};

#[global_allocator]
static GLOBAL: Cap<SpecAlloc> = Cap::new(SpecAlloc, usize::MAX);

#[specialize]
fn build() -> (Vec<Box<[u64; 4]>>, Vec<u8>, String) {
    let boxes = (0..1000).map(|i| Box::new([i; 4])).collect();
    (boxes, vec![7; 4096], String::with_capacity(100))
}

#[test]
fn cap_counts_every_annotated_allocation() {
    assert!(!specalloc::spec::installed());
    let before = GLOBAL.allocated();
    let (boxes, bytes, s) = build();
    let during = GLOBAL.allocated();
    assert!(
        during - before >= 1000 * 32 + 1000 * 8 + 4096 + 100,
        "{} bytes counted",
        during - before
    );
    assert_eq!((bytes.capacity(), s.capacity()), (4096, 100));
    assert_eq!(boxes[999][3], 999);
    drop((boxes, bytes, s));
    assert!(
        GLOBAL.allocated() <= before + 1024,
        "{} vs {before}",
        GLOBAL.allocated()
    );
}
