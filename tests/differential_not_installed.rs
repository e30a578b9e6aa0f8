//! Issue 22: the differential corpus (`tests/differential/corpus.rs`) in a program that does
//! not install specalloc: the global allocator is a counting wrapper around the system
//! allocator, which must see every allocation of the annotated code exactly as of the plain
//! code, in the same order relative to the code around it (`vec![a, b, c]` allocates before
//! its elements are evaluated; `vec![0; N]` takes zeroed memory).

#![allow(clippy::vec_box)] // one allocation per box, on purpose

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

#[path = "differential/corpus.rs"]
#[macro_use]
mod corpus;
#[path = "differential/harness.rs"]
mod harness;

use harness::{assert_same, find, panic_text, BUF_LEN};

/// Frame sizes are compared only unoptimised (this is an optimised build).
const FRAMES_COMPARED: bool = false;

/// Counts, per thread, the allocations it forwards to the system allocator.
struct Counting;

thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
    static ZEROED: Cell<usize> = const { Cell::new(0) };
}

fn bump(c: &'static std::thread::LocalKey<Cell<usize>>) {
    // `try_with`: nothing to count once the thread's locals are gone.
    let _ = c.try_with(|c| c.set(c.get() + 1));
}

// SAFETY: every call is forwarded to `System` unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        bump(&ALLOCS);
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        bump(&ALLOCS);
        bump(&ZEROED);
        // SAFETY: forwarded.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made on this thread so far.
fn allocs() -> usize {
    ALLOCS.with(Cell::get)
}

/// Zeroed allocations made on this thread so far.
fn zeroed_allocs() -> usize {
    ZEROED.with(Cell::get)
}

corpus!(plain);
corpus!(special, specalloc::specialize);
corpus!(reported, specalloc::specialize(report));

#[test]
fn annotated_code_behaves_exactly_like_plain_code_without_install() {
    assert!(!specalloc::spec::installed());
    let plain = plain::run();
    let special = special::run();
    let reported = reported::run();
    assert_same(&plain, &special, &reported);
    assert_eq!(plain.len(), special.len());
    assert_eq!(plain.len(), reported.len());
    let find = |what: &str| find(&plain, what);
    // What std does, as the wrapper saw it.
    assert_eq!(
        find("vec![1, x?, 3] with None"),
        "vec![1, x?, 3] with None: None"
    );
    assert_eq!(
        find("panicking element"),
        "panicking element: (\"element 2 panics\", 1)"
    );
    assert_eq!(
        find("counter read inside vec![a, b]"),
        "counter read inside vec![a, b]: [1, 1]"
    );
    // Every zero value std knows takes zeroed memory (six vectors, six zeroed allocations).
    assert!(find("zero values").ends_with(", (6, 6))"));
    // A panicking clone: std drops the original first, then the clones made.
    assert_eq!(
        find("drop order of a panicking clone: (false"),
        "drop order of a panicking clone: (false, \"third clone\", [0, 1, 2])"
    );
    assert_eq!(
        find("drop order of a panicking clone: (true"),
        "drop order of a panicking clone: (true, \"third clone\", [0, 1, 2])"
    );
    // The block of `vec![1, x?, 3]` is allocated before `x?` returns, as in std's order (an
    // optimised plain build may leave out an allocation nothing uses; the annotated one keeps
    // it), and freed; likewise before a panicking element.
    for early in [
        special::early as fn(Option<u32>) -> Option<Vec<u32>>,
        reported::early,
    ] {
        let before = allocs();
        assert_eq!(early(None), None);
        assert_eq!(allocs() - before, 1);
    }
    let before = allocs();
    let text = panic_text(special::panicking_element);
    assert_eq!(text, "element 2 panics");
    // The block, then the panic's own allocations (as many as for plain code).
    let plain_before = allocs();
    panic_text(plain::panicking_element);
    let plain_count = allocs() - plain_before;
    assert!((plain_before - before).saturating_sub(plain_count) <= 1);
    // Issue 22, item 7: `Box::<T>::default()` allocates before `T::default()` runs, as std's
    // does; each reach form allocates what std's does.
    assert_eq!(
        find("Box::<T>::default() order"),
        "Box::<T>::default() order: (1, 1)"
    );
    for (what, allocs) in [
        ("Box::<T>::default() values", 3),
        ("Box::<unsized>::default()", 0),
        ("Box::<dyn Shape>::default()", 1),
        ("generic Box::<T>::default()", 2),
        ("Box::<[T]>::from([..])", 2),
        ("Box::<[T; N]>::from([..])", 2),
        ("Box::<str>::from(\"..\")", 1),
        ("Box::from and Box::default() left alone", 6),
    ] {
        let l = find(what);
        assert!(l.ends_with(&format!(", {allocs})")), "{l}");
    }
    assert_eq!(
        find("Box::<T>::default() panicking"),
        "Box::<T>::default() panicking: (\"default panics\", 0)"
    );
    // Issue 29: a `cfg`'d-out element is neither evaluated nor allocated, as with std.
    for (what, allocs) in [
        ("cfg'd-out tuple element", 0),
        ("cfg'd-out array element", 1),
        ("cfg'd-out vec! element", 2),
        ("vec![1, cfg'd-out 2, 3]", 1),
        ("attributes that keep their site", 4),
    ] {
        let l = find(what);
        assert!(l.ends_with(&format!(", {allocs})")), "{l}");
    }
    assert_eq!(find("cfg'd-out statements"), "cfg'd-out statements: 0");
    assert_eq!(
        find("vec![0u8; 256 MiB]"),
        "vec![0u8; 256 MiB]: (268435456, 268435456, 0, 0, 1, 1)"
    );
}
