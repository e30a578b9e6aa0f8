//! Issue 21, item 5: a thread whose *first* allocation happens in the last round of pthread-key
//! destructors. glibc runs the rounds in key order at most `PTHREAD_DESTRUCTOR_ITERATIONS` (4)
//! times, so the value specalloc sets on its own key (created before, so a lower index) during
//! round 4 is never destroyed, and that heap was never given back: 100 such threads made 100
//! heaps. Here a raw pthread (no Rust runtime in it) sets a key of its own and allocates
//! nothing; the key's destructor re-arms itself for four rounds and allocates first in round 4.
//! The heaps made, the heaps in use and the bytes mapped must stay bounded: a heap left behind
//! that way is taken over by the next thread on the same thread descriptor, so the heaps made
//! are bounded by the descriptors alive at once (one, for threads one after another; eight,
//! for batches of eight whose stacks stay in glibc's stack cache).

use std::sync::atomic::{AtomicUsize, Ordering};

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

static KEY: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Allocations made in round 4 (checked, so that the test shows the rounds it claims).
static LAST_ROUND_ALLOCS: AtomicUsize = AtomicUsize::new(0);

/// Re-arms the key for rounds 1 to 3 without allocating; allocates in round 4.
unsafe extern "C" fn rearm(arg: *mut libc::c_void) {
    let round = arg as usize;
    if round < 4 {
        // SAFETY: the key is valid; a non-null value asks for another round.
        unsafe {
            libc::pthread_setspecific(
                KEY.load(Ordering::Relaxed) as libc::pthread_key_t,
                (round + 1) as *mut libc::c_void,
            )
        };
        return;
    }
    // The thread's first allocations, in the last round.
    let v: Vec<u64> = (0..100).collect();
    let b = Box::new([7u8; 3000]);
    assert_eq!(v.iter().sum::<u64>() + u64::from(b[2999]), 4957);
    LAST_ROUND_ALLOCS.fetch_add(1, Ordering::Relaxed);
}

/// The thread: sets the key (round 1 next) and allocates nothing.
extern "C" fn start(_: *mut libc::c_void) -> *mut libc::c_void {
    // SAFETY: the key is valid.
    unsafe {
        libc::pthread_setspecific(
            KEY.load(Ordering::Relaxed) as libc::pthread_key_t,
            std::ptr::without_provenance_mut::<libc::c_void>(1),
        )
    };
    std::ptr::null_mut()
}

/// Starts `n` raw pthreads at once and joins them; with `stack`, on stacks of that size (small
/// enough for glibc to cache all of them, so that the next batch reuses their descriptors).
fn run_batch(n: usize, stack: Option<usize>) {
    // SAFETY: an attribute object is initialised before use and destroyed after.
    let mut attr: libc::pthread_attr_t = unsafe { std::mem::zeroed() };
    // SAFETY: `attr` is a valid attribute object.
    unsafe {
        assert_eq!(libc::pthread_attr_init(&mut attr), 0);
        if let Some(size) = stack {
            assert_eq!(libc::pthread_attr_setstacksize(&mut attr, size), 0);
        }
    }
    let mut ts = vec![0 as libc::pthread_t; n];
    for t in ts.iter_mut() {
        // SAFETY: `t` and `attr` are valid; `start` has the thread signature.
        let r = unsafe { libc::pthread_create(t, &attr, start, std::ptr::null_mut()) };
        assert_eq!(r, 0);
    }
    // SAFETY: initialised above, no longer used.
    unsafe { libc::pthread_attr_destroy(&mut attr) };
    for t in ts {
        // SAFETY: a thread created above, joined once.
        assert_eq!(unsafe { libc::pthread_join(t, std::ptr::null_mut()) }, 0);
    }
}

#[test]
fn first_allocation_in_the_last_destructor_round_does_not_leak() {
    // specalloc's key exists first (a lower index: its destructor runs before ours each round).
    std::thread::spawn(|| drop(Box::new(1u64))).join().unwrap();
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is a valid out-pointer and `rearm` has the destructor signature.
    assert_eq!(
        unsafe { libc::pthread_key_create(&mut key, Some(rearm)) },
        0
    );
    KEY.store(key as usize, Ordering::Relaxed);
    // One thread first, so that the baseline includes whatever one such thread keeps, and a
    // batch of eight, so that it includes the shared heap (made the first time eight threads
    // have a heap, for their first blocks of each class), which is made once.
    run_batch(1, None);
    run_batch(8, Some(256 << 10));
    let base = specalloc::stats();

    // The repro: 100 threads, one after the other.
    for _ in 0..100 {
        run_batch(1, None);
    }
    let mid = specalloc::stats();
    report("100 threads one after another", &base, &mid);
    assert_bounded(&base, &mid, 1);

    // Then batches of eight such threads at once.
    for _ in 0..25 {
        run_batch(8, Some(256 << 10));
    }
    let end = specalloc::stats();
    report("25 batches of 8 threads", &mid, &end);
    assert_bounded(&mid, &end, 8);
    assert_eq!(
        LAST_ROUND_ALLOCS.load(Ordering::Relaxed),
        1 + 8 + 100 + 25 * 8
    );
}

fn report(what: &str, a: &specalloc::Stats, b: &specalloc::Stats) {
    println!(
        "{what}, allocating first in round 4: heaps made {} -> {}, heaps in use {} -> {}, mapped {} -> {} bytes",
        a.heaps, b.heaps, a.threads, b.threads, a.bytes_mapped, b.bytes_mapped
    );
}

/// At most `extra` more heaps made and in use, each holding at most 256 KiB of pages (its spans,
/// and any runs it reserved for its next ones), and at most 1 MiB more mapped per extra heap
/// (the heaps alive at once may need a new chunk; a heap left behind by each of 100 threads
/// would hold 100 times their pages).
fn assert_bounded(a: &specalloc::Stats, b: &specalloc::Stats, extra: usize) {
    assert!(
        b.heaps <= a.heaps + extra,
        "{} heaps made (from {}) for threads that allocated only in the last round",
        b.heaps,
        a.heaps
    );
    assert!(
        b.threads <= a.threads + extra,
        "{} heaps in use (from {})",
        b.threads,
        a.threads
    );
    assert!(
        b.pages_in_use <= a.pages_in_use + extra * (256 << 10),
        "pages in use grew from {} to {}",
        a.pages_in_use,
        b.pages_in_use
    );
    assert!(
        b.bytes_mapped <= a.bytes_mapped + extra * (1 << 20),
        "mapped bytes grew from {} to {}",
        a.bytes_mapped,
        b.bytes_mapped
    );
}
