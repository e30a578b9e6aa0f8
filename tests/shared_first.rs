//! A thread's first allocations, while many threads allocate, come from the shared heap: a
//! thread that allocates a few blocks (a thread per connection) has no heap of its own, and
//! threads that each allocate a few blocks of a class pack them into shared spans instead of
//! taking a span, and a page, each. A thread that goes on allocating takes a heap, and in a
//! class a span of its own, as before. Once no thread has used the shared heap for a while, the
//! background trimmer hands its spans on, and they go back to the page heap when their blocks
//! are freed, without the program calling anything. And the shared heap's spans may be handed
//! on while other threads free into them. (A thread's frees of its first blocks:
//! `shared_first_frees.rs`.)

use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use specalloc_runtime::size_class::{class_of, class_size, span_bytes};
use specalloc_runtime::stats;
use specalloc_runtime::test_hooks::{thread_heap, HEAPLESS_FIRST, SHARED_FIRST};

mod common;
use common::Idle;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// Held by each test: they count threads and spans of the whole process.
static SERIAL: Mutex<()> = Mutex::new(());

/// A size no other code of this test allocates (a class of its own).
const SIZE: usize = 2900;
/// Threads that allocate in the class at once.
const THREADS: usize = 32;

/// Spans of `SIZE`'s class now (owned by any heap, or pooled).
fn spans() -> usize {
    let c = class_of(SIZE, 1);
    stats()
        .classes
        .iter()
        .find(|cs| cs.size == class_size(c))
        .map_or(0, |cs| cs.spans)
}

/// Makes the calling thread take a heap of its own: more allocations than a thread makes
/// without one.
fn take_a_heap() {
    let warm: Vec<Box<u64>> = (0..=u64::from(HEAPLESS_FIRST)).map(Box::new).collect();
    assert_eq!(*warm[1], 1);
}

#[test]
fn a_threads_first_blocks_of_a_class_share_spans_and_go_back() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if std::env::var_os("SPECALLOC_BACKGROUND_PURGE_MS").is_some() {
        eprintln!("skipped: SPECALLOC_BACKGROUND_PURGE_MS is set (the default is tested)");
        return;
    }
    // Enough threads that allocate, besides this one, alive throughout.
    let idle = Idle::start();
    let before = spans();
    let first = SHARED_FIRST as usize;
    assert!(first >= 1, "no allocation comes from the shared heap");
    // Phase 1: each thread allocates its first blocks of the class and waits; phase 2: one
    // more each; then they free everything and exit.
    let allocated = Arc::new(Barrier::new(THREADS + 1));
    let go_on = Arc::new(Barrier::new(THREADS + 1));
    let more = Arc::new(Barrier::new(THREADS + 1));
    let done = Arc::new(Barrier::new(THREADS + 1));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (allocated, go_on, more, done) =
                (allocated.clone(), go_on.clone(), more.clone(), done.clone());
            std::thread::spawn(move || {
                take_a_heap();
                let mut blocks: Vec<Vec<u8>> = Vec::with_capacity(first + 1);
                for _ in 0..first {
                    blocks.push(vec![t as u8; SIZE]);
                }
                allocated.wait();
                go_on.wait();
                blocks.push(vec![t as u8; SIZE]);
                more.wait();
                done.wait();
                assert!(blocks.iter().all(|b| b[SIZE - 1] == t as u8));
            })
        })
        .collect();
    allocated.wait();
    let shared = spans() - before;
    // The blocks of all the threads, packed: a few spans, where a span each would be THREADS. A
    // thread that finds the shared heap's lock taken takes a span of its own instead (it never
    // waits for it): a quarter of them at most here.
    let c = class_of(SIZE, 1);
    let packed = (THREADS * first * class_size(c)).div_ceil(span_bytes(c)) + 1 + THREADS / 4;
    assert!(
        shared <= packed,
        "{THREADS} threads with {first} blocks each of {SIZE} B hold {shared} spans (at most \
         {packed} if their first blocks shared spans)"
    );
    go_on.wait();
    more.wait();
    let own = spans() - before;
    assert!(
        own >= THREADS,
        "after one more block each, {THREADS} threads hold {own} spans: a thread that goes on \
         allocating in a class takes a span of its own"
    );
    done.wait();
    for w in workers {
        w.join().expect("worker");
    }
    // Every block of the class is freed: the shared heap's spans and the exited threads' go
    // back without a call (the trimmer's pass, then its sweep of the central pools).
    let start = Instant::now();
    let mut left = spans();
    while left > before && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
        left = spans();
    }
    assert!(
        left <= before,
        "{left} spans of the class left after every block was freed ({before} before)"
    );
    idle.finish();
}

/// Rounds of [`first_blocks_freed_while_the_shared_heap_is_handed_on`].
const ROUNDS: usize = 6;

/// Rounds of 16 new threads that each take their first blocks of 6 classes (the shared heap's)
/// and hand them to 2 other threads, which free them slowly, one every 1.5 ms (a round's frees
/// take about 0.3 s, several of the trimmer's passes, which are at most 100 ms apart):
/// meanwhile nobody allocates from the shared heap, so a pass hands its spans on while the
/// frees into them go on (once a round, counted while this test was written). Every block must
/// hold what its thread wrote until it is freed.
#[test]
fn first_blocks_freed_while_the_shared_heap_is_handed_on() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let idle = Idle::start();
    let sizes = [40, 72, 136, 264, 520, 1032];
    let first = SHARED_FIRST as usize;
    for round in 0..ROUNDS {
        let (tx, rx) = mpsc::channel::<(u8, Vec<Vec<u8>>)>();
        let rx = Arc::new(Mutex::new(rx));
        let freers: Vec<_> = (0..2)
            .map(|_| {
                let rx = rx.clone();
                std::thread::spawn(move || {
                    let mut freed = 0;
                    loop {
                        let next = rx.lock().expect("channel").recv();
                        let Ok((tag, blocks)) = next else {
                            return freed;
                        };
                        for b in blocks {
                            assert!(
                                b.iter().all(|&x| x == tag),
                                "a block changed before its free"
                            );
                            drop(b);
                            freed += 1;
                            std::thread::sleep(Duration::from_micros(1500));
                        }
                    }
                })
            })
            .collect();
        let makers: Vec<_> = (0..16)
            .map(|t| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let tag = (round * 16 + t) as u8;
                    let mut blocks = Vec::with_capacity(sizes.len() * first);
                    for &n in &sizes {
                        for _ in 0..first {
                            blocks.push(vec![tag; n]);
                        }
                    }
                    tx.send((tag, blocks)).expect("freers");
                })
            })
            .collect();
        drop(tx);
        for m in makers {
            m.join().expect("allocating thread");
        }
        let freed: usize = freers
            .into_iter()
            .map(|f| f.join().expect("freeing thread"))
            .sum();
        assert_eq!(freed, 16 * sizes.len() * first);
    }
    idle.finish();
}

/// Threads that allocate a few blocks, while many threads have a heap, have none: the shared
/// heap serves them. Once a thread has made more than `HEAPLESS_FIRST` allocations and frees,
/// it has a heap of its own. (A thread without a heap reads the sentinel's address as its
/// heap's; live threads with a heap never share one.)
#[test]
fn threads_that_allocate_a_few_blocks_have_no_heap() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let idle = Idle::start();
    let allocated = Arc::new(Barrier::new(THREADS));
    let more = Arc::new(Barrier::new(THREADS));
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (allocated, more) = (allocated.clone(), more.clone());
            std::thread::spawn(move || {
                let few: Vec<Box<[u8; 200]>> = (0..4)
                    .map(|_| std::hint::black_box(Box::new([t as u8; 200])))
                    .collect();
                let first = thread_heap().0;
                // Every worker has made its first blocks before any makes more.
                allocated.wait();
                let many: Vec<Box<[u8; 72]>> = (0..HEAPLESS_FIRST)
                    .map(|_| std::hint::black_box(Box::new([t as u8; 72])))
                    .collect();
                let then = thread_heap().0;
                // Every worker read its heap while all of them are alive.
                more.wait();
                assert!(few.iter().all(|b| b[199] == t as u8));
                assert!(many.iter().all(|b| b[71] == t as u8));
                (first, then)
            })
        })
        .collect();
    let heaps: Vec<(usize, usize)> = workers
        .into_iter()
        .map(|w| w.join().expect("worker"))
        .collect();
    let first: Vec<usize> = heaps.iter().map(|h| h.0).collect();
    let sentinel = *first
        .iter()
        .max_by_key(|&&a| first.iter().filter(|&&b| b == a).count())
        .expect("workers");
    let without = first.iter().filter(|&&a| a == sentinel).count();
    // A thread that finds the shared heap's lock taken takes a heap instead (it never waits
    // for it): a quarter of them at most here.
    assert!(
        without >= THREADS - THREADS / 4,
        "{THREADS} threads with 4 blocks each: {without} without a heap"
    );
    let mut then: Vec<usize> = heaps.iter().map(|h| h.1).collect();
    assert!(
        !then.contains(&sentinel),
        "a thread has no heap after {} calls",
        HEAPLESS_FIRST + 5
    );
    then.sort_unstable();
    then.dedup();
    assert_eq!(then.len(), THREADS, "live threads shared a heap");
    idle.finish();
}
