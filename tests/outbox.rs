//! A thread's frees into spans another thread owns are gathered per span and handed over a batch
//! at a time (one atomic push for several blocks). What a batch still holds is handed over when
//! the freeing thread calls `collect()` or exits, so the owner gets every block back.

use std::sync::mpsc;
use std::thread;

use specalloc::size_class::{class_objects, class_of};

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// Spans of the class of `size` in use, in the whole program.
fn spans(size: usize) -> usize {
    specalloc::stats().classes[class_of(size, 1)].spans
}

/// An owner thread fills one span of `SIZE`-byte blocks and starts a second; a freeing thread
/// frees every block of the first span and then hands its batches over by `how` (its
/// `collect()`, or its exit). Before that, the first span still has a block out and stays;
/// after it, the owner's `collect()` gives the emptied span back. Counts are taken against the
/// spans of the class in use before (other threads' spans, which nobody trims meanwhile).
///
/// `SIZE` is a size in a class this test binary hardly uses, whose span is not a whole number
/// of batches, so the last frees of a span wait in a batch.
fn batches_are_handed_over<const SIZE: usize>(how: &'static str) {
    // Spans of exited threads whose blocks are all free go back first: a refill could adopt
    // one of them, which would change the count under the test.
    specalloc::collect();
    let base = spans(SIZE);
    let n = class_objects(class_of(SIZE, 1));
    let (blocks_tx, blocks_rx) = mpsc::channel();
    let (ask_owner, owner_asked) = mpsc::channel::<()>();
    let (owner_says, owner_said) = mpsc::channel();
    // The owner: a fresh thread, with no span of the class yet. After each request it trims its
    // heap and says how many spans of the class are in use.
    let owner = thread::spawn(move || {
        let first: Vec<Box<[u8; SIZE]>> = (0..n).map(|i| Box::new([i as u8; SIZE])).collect();
        // (Kept from the optimiser, which could otherwise leave it unallocated.)
        let second = std::hint::black_box(Box::new([7u8; SIZE]));
        blocks_tx.send(first).unwrap();
        while owner_asked.recv().is_ok() {
            specalloc::collect();
            owner_says.send(spans(SIZE)).unwrap();
        }
        second[SIZE - 1]
    });
    let mut first = blocks_rx.recv().unwrap();
    let owner_spans = || {
        ask_owner.send(()).unwrap();
        owner_said.recv().unwrap() - base
    };
    assert_eq!(
        owner_spans(),
        2,
        "one full span and the current one ({n} blocks)"
    );

    let (freed_tx, freed_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let freer = thread::spawn(move || {
        // A heap of its own first: the frees of a thread that has none yet are not batched.
        let mine = std::hint::black_box(Box::new(1u64));
        assert!(first
            .iter()
            .enumerate()
            .all(|(i, b)| b[SIZE - 1] == i as u8));
        // The blocks only: a free into another span could take the batch's place and hand it
        // over early (the vector's buffer is freed when the thread is done).
        first.clear();
        freed_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        if how == "collect" {
            specalloc::collect();
            freed_tx.send(()).unwrap();
            go_rx.recv().unwrap();
        }
        assert_eq!(*mine, 1);
    });
    freed_rx.recv().unwrap();
    assert_eq!(
        owner_spans(),
        2,
        "the last frees of the span wait in the freeing thread's batch"
    );
    go_tx.send(()).unwrap();
    if how == "collect" {
        freed_rx.recv().unwrap();
        assert_eq!(
            owner_spans(),
            1,
            "the freeing thread's collect() handed its batch over"
        );
        go_tx.send(()).unwrap();
        freer.join().unwrap();
    } else {
        freer.join().unwrap();
        assert_eq!(
            owner_spans(),
            1,
            "the freeing thread's exit handed its batch over"
        );
    }
    drop(ask_owner);
    assert_eq!(owner.join().unwrap(), 7);
}

/// One test, so that nothing else in this binary allocates the classes while it counts spans.
#[test]
fn batched_frees_reach_the_owner() {
    batches_are_handed_over::<1100>("collect"); // 56 blocks of 1,152 B to a span
    batches_are_handed_over::<850>("exit"); // 73 blocks of 896 B
}
