//! Library-safe (issue 15, case 3): this binary keeps the system allocator, as the tests of a
//! library using `#[specialize]` do. The annotated code runs, without a panic, through the
//! global allocator, with the results, capacities and allocation counts of the same code
//! unannotated.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use specalloc::specialize;

/// The system allocator, counting the calls it gets (to see that every annotated site went
/// through the global allocator).
struct Counting;

thread_local! {
    /// The calls this thread made: the tests of this binary run in parallel threads, whose
    /// allocations must not count in each other's.
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: delegates to `System`, which upholds the contract.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.with(|n| n.set(n.get() + 1));
        // SAFETY: the caller's guarantees are passed on.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        // SAFETY: the caller's guarantees are passed on.
        unsafe { System.dealloc(p, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[specialize]
fn annotated() -> (Box<[u64; 3]>, Vec<u32>, String, Vec<u8>) {
    (
        Box::new([1, 2, 3]),
        vec![1, 2, 3, 4, 5],
        "seventeen chars!!".to_string(),
        Vec::with_capacity(100),
    )
}

fn unannotated() -> (Box<[u64; 3]>, Vec<u32>, String, Vec<u8>) {
    (
        Box::new([1, 2, 3]),
        vec![1, 2, 3, 4, 5],
        "seventeen chars!!".to_string(),
        Vec::with_capacity(100),
    )
}

fn allocs_of<R>(f: impl Fn() -> R) -> (R, usize) {
    let before = ALLOCS.with(Cell::get);
    let r = f();
    (r, ALLOCS.with(Cell::get) - before)
}

#[test]
fn annotated_code_runs_through_the_global_allocator() {
    assert!(!specalloc::spec::installed());
    let (a, na) = allocs_of(annotated);
    let (u, nu) = allocs_of(unannotated);
    assert_eq!(format!("{a:?}"), format!("{u:?}"));
    assert_eq!(
        (a.1.capacity(), a.2.capacity(), a.3.capacity()),
        (u.1.capacity(), u.2.capacity(), u.3.capacity())
    );
    assert_eq!(
        na, nu,
        "every annotated site allocated through the global allocator"
    );
    assert_eq!(na, 4);
}

#[test]
fn entry_points_do_not_panic_without_install() {
    let b = specalloc::spec::boxed([1u64, 2, 3]);
    assert_eq!(b.iter().sum::<u64>(), 6);
    let v = specalloc::spec::vec_from_elem::<u8, 4096>(7);
    assert_eq!((v.len(), v.capacity()), (4096, 4096));
}
