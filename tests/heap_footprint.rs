//! What a thread's heap costs in memory: a thread that allocates a few blocks of a few classes,
//! frees them, frees a block of a thread that exited (as the C library does on every
//! `pthread_join`: the joined thread's TLS vector was allocated by its creator) and a few blocks
//! of live threads (a Rust thread frees its spawner's closure as it starts; a channel's blocks)
//! writes only the first page of its heap. The rest of a heap (two of its three pages, the
//! outboxes that gather frees into other threads' spans) holds no memory until the thread
//! makes many such frees; with thousands of live threads (a thread per connection) that is
//! what each one costs.

use std::sync::mpsc;

use specalloc_runtime::test_hooks::thread_heap;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

mod common;
use common::{written_pages, PAGE};

#[test]
fn a_thread_writes_only_the_first_page_of_its_heap() {
    // A block of a thread that exits while it is live: its span goes to the central pool.
    let orphan = std::thread::spawn(|| Box::new([7u8; 200]))
        .join()
        .expect("allocating thread");
    // Blocks of this (live) thread's spans: the channel's, and the boxes sent through it.
    let (tx, rx) = mpsc::channel::<Box<[u8]>>();
    for n in [40, 500, 2000] {
        tx.send(vec![3u8; n].into_boxed_slice()).expect("channel");
    }
    drop(tx);
    let (heap, size, pages) = std::thread::spawn(move || {
        let mut kept: Vec<Vec<u8>> = [24, 100, 700, 3000].iter().map(|&n| vec![1u8; n]).collect();
        assert_eq!(orphan[199], 7);
        drop(orphan);
        for b in rx {
            assert_eq!(b[b.len() - 1], 3);
        }
        kept.truncate(1);
        let (heap, size) = thread_heap();
        (heap, size, written_pages(heap, size))
    })
    .join()
    .expect("measuring thread");
    assert_eq!(
        heap % PAGE,
        0,
        "the heap at {heap:#x} does not start a page"
    );
    assert!(size > 2 * PAGE, "a heap of {size} bytes");
    assert!(pages[0], "the thread did not write its heap's first page");
    let written: Vec<usize> = (1..pages.len()).filter(|&i| pages[i]).collect();
    assert!(
        written.is_empty(),
        "the thread wrote pages {written:?} of its {}-page heap, beyond the first",
        pages.len()
    );
}
