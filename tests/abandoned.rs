//! Blocks that outlive the thread that allocated them (a server's pattern): their spans go to
//! the central pool of their class when the thread exits, frees into them from other threads
//! take no lock, and once all their blocks are freed, `collect()` gives them back.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use specalloc_runtime::size_class::{class_of, span_bytes};
use specalloc_runtime::test_hooks::{self, Lock};

/// A block of its own: the test needs each one allocated separately, not a `Vec` of arrays.
type Block = Box<[u8; SIZE]>;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// A size of its own in this test binary: 3 KiB blocks (class 3072, three pages per span in
/// Go's table), which nothing else here allocates.
const SIZE: usize = 3000;
const BLOCKS: usize = 2000;

/// Boxes made on a thread that exits before they are freed.
fn blocks_of_an_exited_thread() -> Vec<Block> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let v: Vec<Block> = (0..BLOCKS).map(|i| Box::new([i as u8; SIZE])).collect();
        tx.send(v).unwrap();
    })
    .join()
    .unwrap();
    rx.recv().unwrap()
}

/// One test, so that nothing else in this binary pools spans while it counts them.
#[test]
fn spans_of_exited_threads() {
    // What this test counts is what the program's own calls give back: the background trimmer,
    // which would sweep the pools on its own clock, is off.
    specalloc::set_background_purge(None).unwrap();
    frees_take_no_lock_and_collect_gives_the_spans_back();
    a_refill_adopts_pooled_spans_with_the_frees_in_them();
    emptied_pooled_spans_go_back_as_the_program_allocates();
}

fn frees_take_no_lock_and_collect_gives_the_spans_back() {
    let class = class_of(SIZE, 1);
    let v = blocks_of_an_exited_thread();
    let pooled = specalloc::stats().central_spans;
    assert!(
        pooled * span_bytes(class) >= BLOCKS * SIZE,
        "the exited thread's spans are pooled: {pooled} spans"
    );
    assert!(v.iter().enumerate().all(|(i, b)| b[SIZE - 1] == i as u8));

    // Another thread holds the class's pool lock for a long time; the frees must not wait.
    let held = Arc::new(AtomicBool::new(false));
    let released = Arc::new(AtomicBool::new(false));
    let holder = {
        let (held, released) = (held.clone(), released.clone());
        std::thread::spawn(move || {
            test_hooks::hold_lock(Lock::Central(class), &held, Duration::from_secs(5));
            released.store(true, Ordering::Release);
        })
    };
    while !held.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
    std::thread::spawn(move || drop(v)).join().unwrap();
    assert!(
        !released.load(Ordering::Acquire),
        "the frees waited for the pool's lock"
    );
    holder.join().unwrap();

    let c = specalloc::collect();
    assert!(
        c.abandoned_spans >= BLOCKS * SIZE,
        "collect gave back the emptied pooled spans: {c:?}"
    );
    assert_eq!(specalloc::stats().central_spans, 0);
}

/// Without `collect()`: a thread's exit and the fresh spans other classes take sweep the pools.
fn emptied_pooled_spans_go_back_as_the_program_allocates() {
    specalloc::collect();
    assert_eq!(specalloc::stats().central_spans, 0);
    let v = blocks_of_an_exited_thread();
    let pooled = specalloc::stats().central_spans;
    assert!(pooled > 0);
    std::thread::spawn(move || drop(v)).join().unwrap();
    // The freeing thread swept as it went (two pooled spans per span's worth of its frees,
    // oldest first, so some of those it looks at are not yet empty): most went back.
    let after_frees = specalloc::stats().central_spans;
    assert!(
        after_frees * 2 <= pooled,
        "{after_frees} of {pooled} emptied pooled spans left after their frees"
    );
    // Another class, on a thread of its own that stays alive (its spans are not pooled) until
    // the count is read: 8 MiB of fresh pages in 64-byte blocks (128 spans of 64 KiB), each
    // fresh span sweeping a few pooled ones.
    let (done, wait) = (mpsc::channel(), mpsc::channel::<()>());
    let other = std::thread::spawn(move || {
        let v: Vec<_> = (0..1024 * 128).map(|i| Box::new([i as u8; 64])).collect();
        done.0.send(()).unwrap();
        wait.1.recv().unwrap();
        v.iter().enumerate().all(|(i, b)| b[63] == i as u8)
    });
    done.1.recv().unwrap();
    let left = specalloc::stats().central_spans;
    wait.0.send(()).unwrap();
    assert!(other.join().unwrap());
    assert_eq!(left, 0, "{pooled} emptied pooled spans were not swept");
}

fn a_refill_adopts_pooled_spans_with_the_frees_in_them() {
    let class = class_of(SIZE, 1);
    let v: Vec<Block> = {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            tx.send((0..BLOCKS).map(|i| Box::new([i as u8; SIZE])).collect())
                .unwrap();
        })
        .join()
        .unwrap();
        rx.recv().unwrap()
    };
    // Free every other block from a thread of its own, then allocate as many on another: the
    // refills adopt the pooled spans and reuse the freed blocks rather than taking new pages.
    let (keep, free): (Vec<_>, Vec<_>) = v.into_iter().enumerate().partition(|(i, _)| i % 2 == 0);
    std::thread::spawn(move || drop(free)).join().unwrap();
    let spans_before = specalloc::stats().classes[class].spans;
    let again = std::thread::spawn(|| {
        (0..BLOCKS / 2)
            .map(|i| Box::new([i as u8; SIZE]))
            .collect::<Vec<_>>()
    })
    .join()
    .unwrap();
    let spans_after = specalloc::stats().classes[class].spans;
    assert!(
        spans_after <= spans_before + 1,
        "refills took new spans ({spans_before} -> {spans_after}) instead of adopting"
    );
    assert!(keep.iter().all(|(i, b)| b[0] == *i as u8));
    assert!(again
        .iter()
        .enumerate()
        .all(|(i, b)| b[SIZE - 1] == i as u8));
}
