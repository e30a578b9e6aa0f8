//! Issue 22: the differential corpus (`tests/differential/corpus.rs`) in a program that does
//! not install specalloc: the global allocator is a counting wrapper around the system
//! allocator, which must see every allocation of the annotated code exactly as of the plain
//! code, in the same order relative to the code around it (`vec![a, b, c]` allocates before
//! its elements are evaluated; `vec![0; N]` takes zeroed memory).

#![allow(clippy::vec_box)] // one allocation per box, on purpose

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};

#[path = "differential/corpus.rs"]
#[macro_use]
mod corpus;

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

/// Read under `unsafe` as a length: a `static mut` is no const.
static mut BUF_LEN: usize = 48;

thread_local! {
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs `f`, returning its panic message (or "no panic").
fn panic_text<R>(f: impl FnOnce() -> R) -> String {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(move |info| {
            let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                s.to_string()
            } else if let Some(s) = info.payload().downcast_ref::<String>() {
                s.clone()
            } else {
                "<non-string payload>".to_string()
            };
            LAST_PANIC.with(|l| *l.borrow_mut() = msg);
        }));
    });
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(_) => "no panic".to_string(),
        Err(_) => LAST_PANIC.with(|l| l.borrow().clone()),
    }
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
    for ((p, s), r) in plain.iter().zip(&special).zip(&reported) {
        if p != s || p != r {
            // The corpus's panic hook keeps assertion texts to itself: say it here.
            eprintln!("plain:    {p}\nspecial:  {s}\nreported: {r}");
        }
    }
    assert_eq!(plain, special);
    assert_eq!(plain, reported);
    assert_eq!(plain.len(), special.len());
    assert_eq!(plain.len(), reported.len());
    let find = |what: &str| {
        let l = plain
            .iter()
            .find(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no {what}"))
            .clone();
        eprintln!("{l}");
        l
    };
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
    assert_eq!(
        find("vec![0u8; 256 MiB]"),
        "vec![0u8; 256 MiB]: (268435456, 268435456, 0, 0, 1, 1)"
    );
}
