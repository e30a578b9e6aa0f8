//! A thread that allocates after specalloc tore its heap down (in a pthread-key destructor of
//! the last round) is served by the shared fallback heap. That heap takes its spans' pages one
//! run at a time: it keeps no reserve of runs for later spans, which nothing would give back.

use std::sync::atomic::{AtomicUsize, Ordering};

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

static KEY: AtomicUsize = AtomicUsize::new(usize::MAX);
/// Blocks allocated by the destructor, over all its rounds.
static BLOCKS: AtomicUsize = AtomicUsize::new(0);

/// A destructor that, in each round, allocates 2 MiB of 1 KiB blocks (many new spans) and frees
/// them, and asks for another round, up to more rounds than glibc runs.
unsafe extern "C" fn rearm(arg: *mut libc::c_void) {
    let round = arg as usize;
    let blocks: Vec<Box<[u8; 1024]>> = (0..2048).map(|i| Box::new([i as u8; 1024])).collect();
    assert!(blocks.iter().enumerate().all(|(i, b)| b[1023] == i as u8));
    BLOCKS.fetch_add(blocks.len(), Ordering::Relaxed);
    drop(blocks);
    if round < 8 {
        // SAFETY: the key is valid; a non-null value asks for another round.
        unsafe {
            libc::pthread_setspecific(
                KEY.load(Ordering::Relaxed) as libc::pthread_key_t,
                (round + 1) as *mut libc::c_void,
            )
        };
    }
}

#[test]
fn fallback_heap_keeps_no_reserve() {
    // specalloc's key first, so that its destructor runs before ours in each round.
    std::thread::spawn(|| drop(Box::new(1u64))).join().unwrap();
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is a valid out-pointer and `rearm` has the destructor signature.
    assert_eq!(
        unsafe { libc::pthread_key_create(&mut key, Some(rearm)) },
        0
    );
    KEY.store(key as usize, Ordering::Relaxed);
    // The runs other live threads hold (the harness's): this thread gives its own back.
    specalloc::collect();
    let base = specalloc::stats().reserved;
    for _ in 0..4 {
        std::thread::spawn(move || {
            drop(Box::new(2u64));
            // SAFETY: the key is valid; 1 (the dangling address) is the first round.
            unsafe { libc::pthread_setspecific(key, std::ptr::dangling_mut::<libc::c_void>()) };
        })
        .join()
        .unwrap();
    }
    // glibc runs the destructors up to four rounds; specalloc's heap is gone in the last.
    let blocks = BLOCKS.load(Ordering::Relaxed);
    assert!(
        blocks >= 4 * 3 * 2048,
        "the destructor did not re-arm: {blocks} blocks"
    );
    // The threads have exited and given their reserves back.
    specalloc::collect();
    let s = specalloc::stats();
    assert_eq!(
        s.reserved, base,
        "runs held in reserve after the threads' destructors allocated: {s}"
    );
}
