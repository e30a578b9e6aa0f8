//! Issue 15, case 1: a pass-through counting `GlobalAlloc` wrapper around `SpecAlloc`,
//! installed as the global allocator. The routines serve only a program whose global
//! allocator `install!` declared as `SpecAlloc` itself, so here every annotated site and every
//! `spec` entry point goes through the wrapper: it sees every allocation and every free, and
//! its live-byte count returns to where it was.

#![allow(clippy::vec_box)] // one allocation per box, on purpose

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};
use std::sync::Mutex;

use specalloc::{specialize, SpecAlloc};

struct Counting {
    inner: SpecAlloc,
    allocs: AtomicUsize,
    frees: AtomicUsize,
    live: AtomicIsize,
}

thread_local! {
    /// Bytes this thread allocated and has not freed, as the wrapper sees them (other threads,
    /// the test harness's among them, allocate and free meanwhile).
    static MINE: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
}

fn mine(delta: isize) {
    let _ = MINE.try_with(|m| m.set(m.get() + delta));
}

// SAFETY: every call is passed on to `SpecAlloc` unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.allocs.fetch_add(1, Ordering::Relaxed);
        self.live
            .fetch_add(layout.size() as isize, Ordering::Relaxed);
        mine(layout.size() as isize);
        // SAFETY: the caller's guarantees are passed on.
        unsafe { self.inner.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.allocs.fetch_add(1, Ordering::Relaxed);
        self.live
            .fetch_add(layout.size() as isize, Ordering::Relaxed);
        mine(layout.size() as isize);
        // SAFETY: the caller's guarantees are passed on.
        unsafe { self.inner.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.live.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        mine(new_size as isize - layout.size() as isize);
        // SAFETY: the caller's guarantees are passed on.
        unsafe { self.inner.realloc(p, layout, new_size) }
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        self.frees.fetch_add(1, Ordering::Relaxed);
        self.live
            .fetch_sub(layout.size() as isize, Ordering::Relaxed);
        mine(-(layout.size() as isize));
        // SAFETY: the caller's guarantees are passed on.
        unsafe { self.inner.dealloc(p, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting {
    inner: SpecAlloc,
    allocs: AtomicUsize::new(0),
    frees: AtomicUsize::new(0),
    live: AtomicIsize::new(0),
};

#[specialize]
fn build(n: usize) -> Vec<Box<[u64; 2]>> {
    let mut v = Vec::with_capacity(1000);
    for i in 0..n {
        v.push(Box::new([i as u64; 2]));
    }
    v
}

#[specialize]
fn strings() -> (String, Vec<u8>, Vec<u32>) {
    ("sixteen bytes!!!".to_string(), vec![1; 100], vec![1, 2, 3])
}

/// The tests of this binary read the wrapper's global counts between two points: they take
/// turns, so that one's frees do not land inside the other's window.
static SERIAL: Mutex<()> = Mutex::new(());

#[test]
fn the_wrapper_sees_every_allocation_and_free() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert!(!specalloc::spec::installed());
    let (a0, f0, l0) = (
        GLOBAL.allocs.load(Ordering::SeqCst),
        GLOBAL.frees.load(Ordering::SeqCst),
        MINE.with(|m| m.get()),
    );
    let v = build(1000);
    let s = strings();
    let a1 = GLOBAL.allocs.load(Ordering::SeqCst);
    // 1000 boxes, the vector, the string and two vectors (other tests of this binary may add a
    // few of their own, never fewer).
    assert!(a1 - a0 >= 1004, "{}", a1 - a0);
    // This thread's live bytes grew by exactly what it built: the boxes, the vector of 1000
    // pointers, the string, the two vectors.
    let grown = MINE.with(|m| m.get()) - l0;
    assert_eq!(grown, 1000 * 16 + 1000 * 8 + 16 + 100 + 12);
    assert_eq!(v[999][1], 999);
    assert_eq!(s.0.capacity(), 16);
    drop((v, s));
    assert!(GLOBAL.frees.load(Ordering::SeqCst) - f0 >= 1004);
    let live = GLOBAL.live.load(Ordering::SeqCst);
    assert!(live >= 0, "live bytes went negative: {live}");
    assert_eq!(
        MINE.with(|m| m.get()),
        l0,
        "this thread's live bytes are back"
    );
}

#[test]
fn spec_entry_points_go_through_the_wrapper() {
    let _turn = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = GLOBAL.allocs.load(Ordering::SeqCst);
    let boxes: Vec<_> = (0..100)
        .map(|i| specalloc::spec::boxed([i as u8; 24]))
        .collect();
    assert!(GLOBAL.allocs.load(Ordering::SeqCst) - before >= 101);
    drop(boxes);
    assert!(GLOBAL.live.load(Ordering::SeqCst) >= 0);
}
