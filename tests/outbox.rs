//! A thread's frees into spans another thread owns are gathered per span and handed over a batch
//! at a time (one atomic push for several blocks). What a batch still holds is handed over when
//! the freeing thread calls `collect()`, refills the class, or exits, so the owner gets every
//! block back; and a batch follows its span when the owner exits and the span is pooled.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::thread;

use specalloc::size_class::{class_objects, class_of};
use specalloc_runtime::test_hooks::DIRECT_FREES;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// Spans of the class of `size` in use, in the whole program.
fn spans(size: usize) -> usize {
    specalloc::stats().classes[class_of(size, 1)].spans
}

/// Blocks of the calling thread, for a freeing thread to free before the frees under test: a
/// heap's first frees into other live threads' spans are pushed at once, not batched (a thread
/// that makes few such frees never writes its outboxes), and these use them up.
// Each block is an allocation of its own: the boxes are the point.
#[allow(clippy::vec_box)]
fn direct_frees() -> Vec<Box<u64>> {
    (0..u64::from(DIRECT_FREES)).map(Box::new).collect()
}

/// How the freeing thread hands its batch over.
#[derive(Clone, Copy, PartialEq)]
enum Handover {
    /// Its own `collect()`.
    Collect,
    /// An allocation of the class: its first, so a refill.
    Refill,
    /// Its exit.
    Exit,
}

/// An owner thread fills one span of `SIZE`-byte blocks and starts a second; a freeing thread
/// frees every block of the first span and then hands its batch over by `how`. Before that, the
/// first span still has a block out and stays; after it, the owner's `collect()` gives the
/// emptied span back. Counts are taken against the spans of the class in use before.
///
/// `SIZE` is a size in a class this test binary hardly uses, whose span is not a whole number
/// of batches, so the last frees of a span wait in a batch.
fn batches_are_handed_over<const SIZE: usize>(how: Handover) {
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
    let direct = direct_frees();
    let freer = thread::spawn(move || {
        // A heap of its own first: the frees of a thread that has none yet are not batched.
        let mine = std::hint::black_box(Box::new(1u64));
        drop(direct);
        assert!(first
            .iter()
            .enumerate()
            .all(|(i, b)| b[SIZE - 1] == i as u8));
        // The blocks only: a free into another span could take the batch's place and hand it
        // over early (the vector's buffer is freed when the thread is done).
        first.clear();
        freed_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        let mut refilled = None;
        match how {
            Handover::Collect => {
                specalloc::collect();
            }
            Handover::Refill => {
                refilled = Some(std::hint::black_box(Box::new([3u8; SIZE])));
            }
            Handover::Exit => return,
        }
        freed_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        assert_eq!(*mine, 1);
        assert!(refilled.is_none_or(|b| b[SIZE - 1] == 3));
    });
    freed_rx.recv().unwrap();
    assert_eq!(
        owner_spans(),
        2,
        "the last frees of the span wait in the freeing thread's batch"
    );
    go_tx.send(()).unwrap();
    if how == Handover::Exit {
        freer.join().unwrap();
        assert_eq!(
            owner_spans(),
            1,
            "the freeing thread's exit handed its batch over"
        );
    } else {
        freed_rx.recv().unwrap();
        // After a refill the freeing thread has a span of the class of its own.
        let own = usize::from(how == Handover::Refill);
        assert_eq!(
            owner_spans(),
            1 + own,
            "the freeing thread's collect() or refill handed its batch over"
        );
        go_tx.send(()).unwrap();
        freer.join().unwrap();
    }
    drop(ask_owner);
    assert_eq!(owner.join().unwrap(), 7);
}

/// A freeing thread batches frees into a live owner's span; the owner exits, and the span goes
/// to the central pool with blocks still in the batch; the freeing thread's later frees into the
/// pooled span (pushed at once) take the batch with them, so the span empties and another
/// thread's `collect()` gives it back while the freeing thread still lives.
fn a_batch_follows_its_span_into_the_pool<const SIZE: usize>() {
    specalloc::collect();
    let base = spans(SIZE);
    let n = class_objects(class_of(SIZE, 1));
    let (blocks_tx, blocks_rx) = mpsc::channel();
    let (exit_tx, exit_rx) = mpsc::channel::<()>();
    let owner = thread::spawn(move || {
        let first: Vec<Box<[u8; SIZE]>> = (0..n).map(|i| Box::new([i as u8; SIZE])).collect();
        let second = std::hint::black_box(Box::new([9u8; SIZE]));
        blocks_tx.send(first).unwrap();
        exit_rx.recv().unwrap();
        second
    });
    let first = blocks_rx.recv().unwrap();
    let (step_tx, step_rx) = mpsc::channel();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let direct = direct_frees();
    let freer = thread::spawn(move || {
        let mine = std::hint::black_box(Box::new(1u64));
        drop(direct);
        let mut first = first;
        let mut rest: Vec<_> = first.drain(n / 2..).collect();
        first.clear(); // batched: the owner lives
        step_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        rest.clear(); // pushed at once: the span is pooled
        step_tx.send(()).unwrap();
        go_rx.recv().unwrap();
        assert_eq!(*mine, 1);
    });
    step_rx.recv().unwrap();
    exit_tx.send(()).unwrap();
    let second = owner.join().unwrap();
    go_tx.send(()).unwrap();
    step_rx.recv().unwrap();
    specalloc::collect();
    assert_eq!(
        spans(SIZE) - base,
        1,
        "the emptied pooled span went back (the other holds a live block)"
    );
    go_tx.send(()).unwrap();
    freer.join().unwrap();
    assert_eq!(second[SIZE - 1], 9);
}

/// Two owner threads each fill a span of `SIZE`-byte blocks and start a second; a freeing thread
/// frees every block of both first spans, taking them in turn, one of each. Its frees into each
/// span are batched apart (a class has outboxes for several spans), so the last frees of both
/// spans wait, and both spans stay, until the freeing thread's `collect()` hands them over. With
/// a single outbox per class, every change of span would publish, and one span would empty at
/// once.
///
/// `SIZE` is in a class whose span is not a whole number of batches, and that no other case
/// here uses: a span an earlier case's exited thread left in the pool, with free blocks, would
/// be adopted by an owner and split its blocks over other spans.
fn interleaved_batches_wait_together<const SIZE: usize>() {
    specalloc::collect();
    let base = spans(SIZE);
    let n = class_objects(class_of(SIZE, 1));
    let mut owners = Vec::new();
    let mut asks = Vec::new();
    let mut firsts = Vec::new();
    let (said_tx, said_rx) = mpsc::channel();
    for tag in [5u8, 6] {
        let (blocks_tx, blocks_rx) = mpsc::channel();
        let (ask_tx, ask_rx) = mpsc::channel::<()>();
        let said_tx = said_tx.clone();
        owners.push(thread::spawn(move || {
            // Blocks up to the first one in a fresh span are kept aside: a refill may first
            // adopt a pooled span with room (another thread's leftovers), whose blocks would not
            // all be freed here. Nothing else allocates the class meanwhile.
            let mut aside = Vec::new();
            let before = spans(SIZE);
            let mut first = Vec::with_capacity(n);
            loop {
                let b = Box::new([tag; SIZE]);
                if spans(SIZE) > before {
                    first.push(b);
                    break;
                }
                aside.push(b);
            }
            // The fresh span's remaining blocks, in order.
            first.extend((1..n).map(|_| Box::new([tag; SIZE])));
            let second = std::hint::black_box(Box::new([tag; SIZE]));
            blocks_tx.send(first).unwrap();
            // On each request: trim this heap (its emptied spans go back) and say so.
            while ask_rx.recv().is_ok() {
                specalloc::collect();
                said_tx.send(()).unwrap();
            }
            assert!(aside.iter().all(|b| b[SIZE - 1] == tag));
            second[SIZE - 1]
        }));
        asks.push(ask_tx);
        firsts.push(blocks_rx.recv().unwrap());
    }
    // Both owners trim, then the spans of the class in use are counted.
    let owner_spans = || {
        for a in &asks {
            a.send(()).unwrap();
        }
        for _ in &asks {
            said_rx.recv().unwrap();
        }
        spans(SIZE) - base
    };
    // Each owner's fresh span, full, and its current one, beside any span it adopted.
    let with_both = owner_spans();
    assert!(with_both >= 4, "two full spans and two current ones");
    // The freeing thread waits by spinning, not on a channel: a thread that blocks for the
    // first time allocates (its parking state), and an allocation's refill answers the
    // hand-over that the owners' `collect()` asks of every thread, which would publish the
    // batches under test.
    let stage = std::sync::Arc::new(AtomicUsize::new(0));
    let wait_for = |stage: &AtomicUsize, n: usize| {
        while stage.load(Ordering::Acquire) != n {
            thread::yield_now();
        }
    };
    let direct = direct_frees();
    let freer = thread::spawn({
        let stage = stage.clone();
        move || {
            // A heap of its own first: the frees of a thread that has none yet are not batched.
            let mine = std::hint::black_box(Box::new(1u64));
            drop(direct);
            let b = firsts.pop().unwrap();
            let a = firsts.pop().unwrap();
            assert!(a.iter().all(|x| x[SIZE - 1] == 5) && b.iter().all(|x| x[SIZE - 1] == 6));
            for (x, y) in a.into_iter().zip(b) {
                drop(x);
                drop(y);
            }
            stage.store(1, Ordering::Release);
            wait_for(&stage, 2);
            specalloc::collect();
            stage.store(3, Ordering::Release);
            assert_eq!(*mine, 1);
        }
    });
    wait_for(&stage, 1);
    assert_eq!(
        owner_spans(),
        with_both,
        "the last frees of both spans wait in the freeing thread's batches"
    );
    stage.store(2, Ordering::Release);
    wait_for(&stage, 3);
    assert_eq!(
        owner_spans(),
        with_both - 2,
        "the freeing thread's collect() handed both batches over"
    );
    freer.join().unwrap();
    drop(asks);
    for (o, tag) in owners.into_iter().zip([5u8, 6]) {
        assert_eq!(o.join().unwrap(), tag);
    }
}

/// One test, so that nothing else in this binary allocates the classes while it counts spans.
#[test]
fn batched_frees_reach_the_owner() {
    batches_are_handed_over::<1100>(Handover::Collect); // 56 blocks of 1,152 B to a span
    batches_are_handed_over::<850>(Handover::Exit); // 73 blocks of 896 B
    batches_are_handed_over::<660>(Handover::Refill); // 93 blocks of 704 B
    a_batch_follows_its_span_into_the_pool::<600>(); // 102 blocks of 640 B
    interleaved_batches_wait_together::<560>(); // 113 blocks of 576 B, batches of 7
}
