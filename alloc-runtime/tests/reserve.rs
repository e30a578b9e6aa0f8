//! A thread takes the pages for its new spans from the page heap a few runs at a time: one lock
//! and one search give it the run it needs and up to three more of the same length, kept for
//! its next new spans. The reserve is counted in `pages_in_use` and in `reserved`, and goes back
//! to the page heap when the thread exits and when it calls `collect()`.

use std::alloc::Layout;
use std::thread;

use specalloc_runtime::{collect, stats};

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

const SIZE: usize = 1024;

/// The class of `SIZE`-byte blocks.
fn class() -> usize {
    stats()
        .classes
        .iter()
        .position(|c| c.size == SIZE)
        .expect("a 1 KiB class")
}

/// Allocates `SIZE`-byte blocks, written whole, into `v` up to its capacity.
fn alloc_into(v: &mut Vec<*mut u8>) {
    let layout = Layout::from_size_align(SIZE, 8).unwrap();
    while v.len() < v.capacity() {
        let p = specalloc_runtime::alloc(layout);
        assert!(!p.is_null());
        // SAFETY: a fresh block of SIZE bytes.
        unsafe { p.write_bytes(0xa5, SIZE) };
        v.push(p);
    }
}

fn alloc_n(n: usize) -> Vec<*mut u8> {
    let mut v = Vec::with_capacity(n);
    alloc_into(&mut v);
    v
}

fn free_all(ptrs: Vec<*mut u8>) {
    let layout = Layout::from_size_align(SIZE, 8).unwrap();
    for p in ptrs {
        // SAFETY: allocated by `alloc_n` with `layout`, freed once.
        unsafe { specalloc_runtime::dealloc(p, layout) };
    }
}

/// Allocates `SIZE`-byte blocks into `v` until this thread holds runs in reserve (`others`:
/// the bytes other threads hold), 64 at a time, at most 8,192 blocks. Returns the reserve.
fn alloc_until_reserved(v: &mut Vec<*mut u8>, others: usize) -> usize {
    let max = v.len() + 8192;
    while v.len() < max {
        v.reserve_exact(64);
        alloc_into(v);
        let held = stats().reserved - others;
        if held > 0 {
            return held;
        }
    }
    panic!("8,192 blocks of 1 KiB left no page run in reserve");
}

#[test]
fn new_spans_take_the_page_heap_lock_a_few_at_a_time() {
    let c = class();
    // Only this thread runs besides the spawned ones, and it waits for them. A first thread
    // makes the spans that spawning and joining take here, so that this thread's reserve
    // stays as it is from now on.
    thread::spawn(|| free_all(alloc_n(1))).join().unwrap();
    // No free page holds memory, so the thread's runs below are on pages that hold none; and
    // none is advised or returned meanwhile.
    specalloc_runtime::set_page_policy(specalloc_runtime::PagePolicy {
        purge_delay_ms: 1 << 30,
        decommit_delay_ms: 1 << 30,
        ..specalloc_runtime::page_policy()
    });
    collect();
    let base = stats();
    assert_eq!(base.free_resident, 0);

    // A thread making new spans takes a lock for every few of them.
    let (spans, takes, in_use, reserved, end) = thread::spawn(move || {
        // The thread's heap, made by its first allocation, is not part of the count.
        free_all(alloc_n(1));
        let mut blocks = Vec::with_capacity(2048);
        let before = stats();
        alloc_into(&mut blocks);
        let after = stats();
        let spans = after.classes[c].spans - before.classes[c].spans;
        let takes = after.page_takes - before.page_takes;
        // Spans' pages: those in use less those in reserve.
        let in_use =
            (after.pages_in_use - after.reserved) - (before.pages_in_use - before.reserved);
        // Blocks until the thread holds runs in reserve, for the exit below.
        alloc_until_reserved(&mut blocks, base.reserved);
        free_all(blocks);
        (
            spans,
            takes,
            in_use,
            after.reserved - base.reserved,
            stats(),
        )
    })
    .join()
    .unwrap();
    assert!(spans >= 16, "2,048 blocks of 1 KiB made {spans} spans");
    // One take gives up to four runs; without the reserve every span is one take.
    assert!(
        takes as usize * 2 <= spans,
        "{spans} new spans took the page-heap lock {takes} times"
    );
    // Less the reserve, the pages in use grew by the spans made.
    assert_eq!(in_use % spans, 0, "in use {in_use} over {spans} spans");
    let span_bytes = in_use / spans;
    // The span the heap's first block came from holds the rest.
    assert!(
        (spans + 1) * span_bytes >= 2048 * SIZE,
        "{spans} spans of {span_bytes} bytes"
    );
    assert_eq!(reserved % span_bytes, 0, "{reserved} bytes reserved");
    assert!(reserved <= 3 * span_bytes, "{reserved} bytes reserved");

    // The reserve goes back when the thread exits: its spans' pages as pages that hold memory,
    // its reserve (never written) as pages that hold none.
    let after_exit = stats();
    let own = end.reserved - base.reserved;
    assert!(own > 0, "the thread ended with nothing in reserve");
    let dropped = end.pages_in_use - after_exit.pages_in_use;
    let held = after_exit.free_resident - end.free_resident;
    assert_eq!(
        held,
        dropped - own,
        "of {dropped} bytes given back at exit ({own} of them reserved), {held} counted as holding memory"
    );
    assert_eq!(
        after_exit.reserved, base.reserved,
        "the exited thread kept its reserve"
    );

    // And on collect(); the thread goes on allocating afterwards.
    thread::spawn(move || {
        let mut blocks = Vec::new();
        let held = alloc_until_reserved(&mut blocks, base.reserved);
        free_all(blocks);
        let c = collect();
        assert!(
            c.thread_spans >= held,
            "collect() handed back {} bytes, the reserve held {held}",
            c.thread_spans
        );
        assert_eq!(
            stats().reserved,
            base.reserved,
            "collect() left the reserve"
        );
        // The next new span takes pages from the page heap again.
        let takes = stats().page_takes;
        let again = alloc_n(100);
        assert!(stats().page_takes > takes);
        free_all(again);
    })
    .join()
    .unwrap();
    assert_eq!(stats().reserved, base.reserved);
    println!(
        "{spans} new spans, {takes} page-heap takes, {in_use} bytes in use, {reserved} reserved"
    );
}
