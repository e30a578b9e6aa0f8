//! A Rust binary with specalloc's `override` feature (tests/override.rs): C code linked into it
//! (built with `cc`) allocates from specalloc, from Rust-spawned and C-spawned threads, and so
//! do the C library's own allocations. Every check reads specalloc's counters.

use std::ffi::{c_char, c_int, c_void, CStr};

specalloc::install!();

extern "C" {
    fn c_alloc(n: usize) -> *mut c_void;
    fn c_free(p: *mut c_void);
    fn c_usable(p: *mut c_void) -> usize;
    fn c_strdup(s: *const c_char) -> *mut c_char;
    fn c_format(n: c_int) -> *mut c_char;
    fn c_memstream(lines: c_int) -> *mut c_char;
    fn c_thread_churn(threads: c_int, ops: c_int) -> c_int;
}

fn main() {
    // C's malloc is specalloc's: each block is counted, and all of it usable.
    let before = specalloc::stats();
    // SAFETY: C's malloc through the fixture's wrapper; each block is freed once, below.
    let blocks: Vec<*mut c_void> = (0..1000).map(|i| unsafe { c_alloc(10 + i * 7) }).collect();
    let mid = specalloc::stats();
    assert!(
        mid.allocs >= before.allocs + 1000,
        "C's malloc did not reach specalloc"
    );
    assert!(mid.live_objects >= before.live_objects + 1000);
    for (i, &p) in blocks.iter().enumerate() {
        assert!(!p.is_null() && p as usize % 16 == 0);
        // SAFETY: a live block from c_alloc.
        assert!(unsafe { c_usable(p) } >= 10 + i * 7);
        // SAFETY: freed once.
        unsafe { c_free(p) };
    }
    drop(blocks);
    let after = specalloc::stats();
    assert_eq!(
        after.live_objects, before.live_objects,
        "C's free did not reach specalloc"
    );
    println!("ok C malloc/free on the main thread");

    // The C library's own allocations (strdup, asprintf, a memory stream growing by realloc),
    // freed by the C code's free: both sides are specalloc.
    let before = specalloc::stats();
    // SAFETY: NUL-terminated input; the results are C strings freed once with free.
    unsafe {
        let s = c_strdup(c"duplicated by libc".as_ptr());
        assert_eq!(CStr::from_ptr(s).to_str().unwrap(), "duplicated by libc");
        let f = c_format(42);
        assert_eq!(CStr::from_ptr(f).to_str().unwrap(), "value 42 and more");
        let m = c_memstream(2000);
        assert!(CStr::from_ptr(m).to_bytes().ends_with(b"line 1999\n"));
        assert!(specalloc::stats().live_objects >= before.live_objects + 3);
        c_free(s.cast());
        c_free(f.cast());
        c_free(m.cast());
    }
    assert!(specalloc::stats().allocs >= before.allocs + 3);
    assert_eq!(specalloc::stats().live_objects, before.live_objects);
    println!("ok the C library's own allocations");

    // Rust-spawned threads allocating in C, each freeing blocks the next one made.
    let before = specalloc::stats();
    let handoff: Vec<usize> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..4)
            .map(|t| {
                s.spawn(move || {
                    let mut kept = Vec::new();
                    for i in 0..20_000usize {
                        // SAFETY: allocated here; freed once, here or by the main thread.
                        let p = unsafe { c_alloc(1 + (i * 31 + t) % 2000) };
                        if i % 10 == 0 {
                            kept.push(p as usize);
                        } else {
                            // SAFETY: allocated just above and not kept: freed once.
                            unsafe { c_free(p) };
                        }
                    }
                    kept
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    for p in handoff {
        // SAFETY: blocks the threads kept, freed once, on another thread than their own.
        unsafe { c_free(p as *mut c_void) };
    }
    let after = specalloc::stats();
    assert!(after.allocs >= before.allocs + 80_000);
    assert!(after.remote_frees >= before.remote_frees + 8_000);
    // What stays live is glibc's: the TLS vectors of the thread stacks it caches.
    assert!(after.live_objects <= before.live_objects + 16);
    println!("ok C malloc/free on Rust-spawned threads");

    // Threads started by C itself (pthread_create), with cross-thread frees.
    let before = specalloc::stats();
    // SAFETY: c_thread_churn has no preconditions.
    assert_eq!(unsafe { c_thread_churn(4, 20_000) }, 0);
    let after = specalloc::stats();
    assert!(after.allocs >= before.allocs + 80_000);
    assert!(after.remote_frees > before.remote_frees);
    assert!(after.live_objects <= before.live_objects + 16);
    println!("ok C malloc/free on C-spawned threads");
}
