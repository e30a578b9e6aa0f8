//! A thread's first allocations of a class, while many threads have a heap, come from the
//! shared heap: threads that each allocate a few blocks of a class (a thread per connection)
//! pack them into shared spans instead of taking a span, and a page, each. A thread that goes on
//! allocating in the class takes a span of its own, as before. Once no thread has used the
//! shared heap for a while, the background trimmer hands its spans on, and they go back to the
//! page heap when their blocks are freed, without the program calling anything. A thread's
//! frees of its first blocks are pushed at once: they write none of its outboxes. And the
//! shared heap's spans may be handed on while other threads free into them.

use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use specalloc_runtime::size_class::{class_of, class_size, span_bytes};
use specalloc_runtime::stats;
use specalloc_runtime::test_hooks::{thread_heap, DIRECT_FREES, SHARED_FIRST, SHARED_FROM_THREADS};

mod common;
use common::written_pages;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

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

/// `SHARED_FROM_THREADS` threads with a heap, alive until [`Idle::finish`].
struct Idle {
    hold: Arc<Barrier>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Idle {
    fn start() -> Idle {
        let hold = Arc::new(Barrier::new(SHARED_FROM_THREADS + 1));
        let threads = (0..SHARED_FROM_THREADS)
            .map(|i| {
                let hold = hold.clone();
                std::thread::spawn(move || {
                    let b = Box::new([i as u8; 40]);
                    hold.wait();
                    assert_eq!(b[39], i as u8);
                })
            })
            .collect();
        Idle { hold, threads }
    }

    fn finish(self) {
        self.hold.wait();
        for t in self.threads {
            t.join().expect("idle thread");
        }
    }
}

#[test]
fn a_threads_first_blocks_of_a_class_share_spans_and_go_back() {
    if std::env::var_os("SPECALLOC_BACKGROUND_PURGE_MS").is_some() {
        eprintln!("skipped: SPECALLOC_BACKGROUND_PURGE_MS is set (the default is tested)");
        return;
    }
    // Enough threads with a heap, besides this one, alive throughout.
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

#[test]
fn freeing_its_first_blocks_writes_no_outbox() {
    let idle = Idle::start();
    // Sizes of as many classes (none of them the other test's).
    let sizes = [24, 56, 120, 248, 504, 1016, 2040, 4088];
    let first = SHARED_FIRST as usize;
    assert!(
        sizes.len() * first > DIRECT_FREES as usize,
        "the frees must outnumber a heap's direct frees to tell"
    );
    let (heap, size, pages) = std::thread::spawn(move || {
        let mut blocks: Vec<Vec<u8>> = Vec::with_capacity(64);
        for &n in &sizes {
            for _ in 0..first {
                blocks.push(vec![5u8; n]);
            }
        }
        assert!(blocks.iter().all(|b| b[b.len() - 1] == 5));
        drop(blocks);
        let (heap, size) = thread_heap();
        (heap, size, written_pages(heap, size))
    })
    .join()
    .expect("measuring thread");
    assert!(pages[0], "the thread did not write its heap's first page");
    let written: Vec<usize> = (1..pages.len()).filter(|&i| pages[i]).collect();
    assert!(
        written.is_empty(),
        "freeing {} first blocks, the thread wrote pages {written:?} of its heap at {heap:#x} \
         ({size} bytes), beyond the first",
        sizes.len() * first
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
