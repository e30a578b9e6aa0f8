//! A thread's first allocations, while many threads allocate, come from the shared heap: a
//! thread that allocates a few blocks (a thread per connection) has no heap of its own, and
//! threads that each allocate a few blocks of a class pack them into shared spans instead of
//! taking a span, and a page, each. A thread that goes on allocating takes a heap, and in a
//! class a span of its own, as before. Once no thread has used the shared heap for a while, the
//! background trimmer hands its spans on, and they go back to the page heap when their blocks
//! are freed, without the program calling anything. And the shared heap's spans may be handed
//! on while other threads free into them. Exactly a thread's first 16 allocations, or frees,
//! are made without a heap, and a thread that takes its heap in the C library's last round of
//! thread-exit destructors (whose exit hook never runs) does not leave the count of threads
//! with a heap too high for good. (A thread's frees of its first blocks:
//! `shared_first_frees.rs`.)

use std::sync::{mpsc, Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use specalloc_runtime::size_class::{class_of, class_size, span_bytes};
use specalloc_runtime::stats;
use specalloc_runtime::test_hooks::{
    thread_heap, HEAPLESS_FIRST, SHARED_FIRST, SHARED_FROM_THREADS,
};

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
    // A thread that finds the shared heap's lock taken takes a heap instead (it never waits
    // for it): a quarter of them at most, in one of 3 runs (a loaded machine can deschedule
    // the lock's holder while the others arrive).
    let mut seen = Vec::new();
    for _ in 0..3 {
        let without = few_blocks_run();
        seen.push(without);
        if without >= THREADS - THREADS / 4 {
            break;
        }
    }
    assert!(
        seen.iter().any(|&w| w >= THREADS - THREADS / 4),
        "{THREADS} threads with 4 blocks each, without a heap in each run: {seen:?}"
    );
    idle.finish();
}

/// One run of [`threads_that_allocate_a_few_blocks_have_no_heap`]: `THREADS` threads that
/// allocate 4 blocks each, then more; checks that each has a heap of its own after the more,
/// and returns how many had none after the 4.
fn few_blocks_run() -> usize {
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
    let mut then: Vec<usize> = heaps.iter().map(|h| h.1).collect();
    assert!(
        !then.contains(&sentinel),
        "a thread has no heap after {} calls",
        HEAPLESS_FIRST + 5
    );
    then.sort_unstable();
    then.dedup();
    assert_eq!(then.len(), THREADS, "live threads shared a heap");
    without
}

/// The test's thread-exit key, whose destructor makes the thread's calls of its last round.
static DTOR_KEY: std::sync::OnceLock<libc::pthread_key_t> = std::sync::OnceLock::new();

/// Re-arms itself for each of the C library's rounds of thread-exit destructors, and in the
/// last one (`PTHREAD_DESTRUCTOR_ITERATIONS`, 4 in glibc) makes more allocations than a thread
/// makes without a heap, so that the thread takes its heap there.
extern "C" fn allocate_in_last_round(round: *mut libc::c_void) {
    let round = round as usize;
    let key = *DTOR_KEY.get().expect("key made");
    if round < 4 {
        // SAFETY: the key is live; the value is a plain number, never dereferenced.
        unsafe { libc::pthread_setspecific(key, std::ptr::without_provenance(round + 1)) };
        return;
    }
    let late: Vec<Box<u64>> = (0..=u64::from(HEAPLESS_FIRST))
        .map(|i| std::hint::black_box(Box::new(i)))
        .collect();
    assert_eq!(*late[2], 2);
}

/// The heap a new thread reads after allocating one block (the sentinel's address if it has
/// no heap).
fn heap_after_one_block() -> usize {
    std::thread::spawn(|| {
        let b = std::hint::black_box(Box::new(7u64));
        assert_eq!(*b, 7);
        thread_heap().0
    })
    .join()
    .expect("thread")
}

#[test]
fn a_heap_taken_in_the_last_round_of_thread_exit_counts_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let key = *DTOR_KEY.get_or_init(|| {
        let mut k: libc::pthread_key_t = 0;
        // SAFETY: `k` is a valid place for the key; the destructor is an `extern "C"` fn.
        let r = unsafe { libc::pthread_key_create(&mut k, Some(allocate_in_last_round)) };
        assert_eq!(r, 0, "pthread_key_create");
        k
    });
    let idle = Idle::start();
    // With many threads alive, a thread that allocates a block has no heap: the sentinel's
    // address (most of three, since one that finds the shared heap's lock taken takes a heap).
    let seen: Vec<usize> = (0..3).map(|_| heap_after_one_block()).collect();
    let sentinel = *seen
        .iter()
        .max_by_key(|&&a| seen.iter().filter(|&&b| b == a).count())
        .expect("threads");
    // One after another: each thread runs on the descriptor its predecessor left (glibc's
    // stack cache), and takes over the heap that its predecessor took in its last round of
    // thread-exit destructors, whose exit hook never ran.
    for _ in 0..3 * SHARED_FROM_THREADS {
        std::thread::spawn(move || {
            // SAFETY: the key is live; the value is a plain number, never dereferenced.
            unsafe { libc::pthread_setspecific(key, std::ptr::without_provenance(1)) };
        })
        .join()
        .expect("thread");
    }
    idle.finish();
    // Few threads have a heap now: a new thread takes one at its first allocation. Had each
    // takeover counted the heap again, the count would still say many.
    assert_ne!(
        heap_after_one_block(),
        sentinel,
        "a thread alone has no heap: threads whose heap was taken over are counted still"
    );
}

/// Calls a raw thread (no standard-library start-up, so every allocator call is the test's)
/// makes; after each one it records the heap it reads.
const CALLS: usize = HEAPLESS_FIRST as usize + 4;

/// What a raw thread records: its heap after each of its calls.
struct Calls {
    /// Blocks to free, one per call (null: allocate instead).
    frees: [*mut u64; CALLS],
    heaps: [usize; CALLS],
}

/// A raw thread's body: `CALLS` allocations, or frees of the blocks it is given, each followed
/// by a read of its heap (no other allocator call in between).
extern "C" fn make_calls(arg: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: the spawner passes a `Calls` it keeps alive until the join.
    let calls = unsafe { &mut *arg.cast::<Calls>() };
    let mut made = [std::ptr::null_mut::<u64>(); CALLS];
    for (i, slot) in made.iter_mut().enumerate() {
        let f = calls.frees[i];
        if f.is_null() {
            *slot = Box::into_raw(Box::new(i as u64));
        } else {
            // SAFETY: a block `Box::into_raw` made on another thread, freed once.
            drop(unsafe { Box::from_raw(f) });
        }
        calls.heaps[i] = thread_heap().0;
    }
    for b in made.into_iter().filter(|b| !b.is_null()) {
        // SAFETY: made above, freed once.
        drop(unsafe { Box::from_raw(b) });
    }
    std::ptr::null_mut()
}

/// Runs [`make_calls`] on a thread of its own (`pthread_create`).
fn raw_thread(calls: &mut Calls) {
    let mut t: libc::pthread_t = 0;
    // SAFETY: `calls` outlives the thread, which is joined before we return.
    let r = unsafe {
        libc::pthread_create(
            &mut t,
            std::ptr::null(),
            make_calls,
            (calls as *mut Calls).cast(),
        )
    };
    assert_eq!(r, 0, "pthread_create");
    // SAFETY: a thread made above, joined once.
    assert_eq!(unsafe { libc::pthread_join(t, std::ptr::null_mut()) }, 0);
}

#[test]
fn exactly_the_first_calls_are_made_without_a_heap() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let idle = Idle::start();
    let first = HEAPLESS_FIRST as usize;
    for frees in [false, true] {
        let what = if frees { "frees" } else { "allocations" };
        // A thread that finds the shared heap's lock taken takes its heap at once; the
        // background trimmer takes that lock when it hands the shared heap on (after the tests
        // before this one), so a run may see the thread's heap from an earlier call. A run that
        // does is made again: the exact pattern must show in one of them.
        let mut runs = Vec::new();
        let clean = (0..10).find_map(|_| {
            let mut calls = Calls {
                frees: [std::ptr::null_mut(); CALLS],
                heaps: [0; CALLS],
            };
            if frees {
                // Blocks of this thread's heap, for the other thread's first calls to free.
                for (i, f) in calls.frees.iter_mut().enumerate() {
                    *f = Box::into_raw(Box::new(i as u64));
                }
            }
            raw_thread(&mut calls);
            let h = calls.heaps;
            runs.push(h);
            // The sentinel's address up to the 16th call, then the thread's own heap.
            let changes = h.windows(2).filter(|w| w[0] != w[1]).count();
            (changes == 1 && h[first] != h[first - 1]).then_some(h)
        });
        let h = clean.unwrap_or_else(|| {
            panic!(
                "{what}: in no run of 10 was the thread's heap the same up to its {}th call and \
                 another from its {}th on: {runs:x?}",
                first,
                first + 1
            )
        });
        assert!(h[..first].iter().all(|&a| a == h[0]), "{what}: {h:x?}");
        assert!(h[first..].iter().all(|&a| a == h[first]), "{what}: {h:x?}");
    }
    idle.finish();
}
