//! The C entry points (`cabi::malloc`, `cabi::calloc`) against the size-class table, for every
//! request up to 33 KiB: the class each block is counted in, its alignment and usable bytes,
//! `calloc`'s zeroes on a block `malloc` dirtied, and `errno` left as it was. Requests of 1 KiB
//! and less, and of 1 KiB to 32 KiB, take tables of their own on the fast path; above, the
//! general path. One test function: the per-class counters are process-wide.

use specalloc_runtime::cabi::{calloc, default_align, free, malloc, usable_size};
use specalloc_runtime::size_class::{class_size, route, Route};
use specalloc_runtime::stats;

/// The allocations counted in `size`'s class (`None` above the classes).
fn allocs_of(size: usize) -> Option<u64> {
    match route(size, default_align(size)) {
        Route::Small(c) => Some(stats().classes[c].allocs),
        Route::Tiny => panic!("a C request of {size} B is tiny"),
        Route::Large => None,
    }
}

/// This thread's `errno`.
fn errno() -> libc::c_int {
    // SAFETY: `__errno_location` returns this thread's `errno`, valid for reads.
    unsafe { *libc::__errno_location() }
}

/// Sets this thread's `errno`.
fn set_errno(v: libc::c_int) {
    // SAFETY: as in `errno`, valid for writes.
    unsafe { *libc::__errno_location() = v };
}

#[test]
fn c_requests_follow_the_class_table() {
    for size in 1..=(33 << 10) {
        let before = allocs_of(size);
        set_errno(1234);
        let p = malloc(size);
        assert!(!p.is_null(), "malloc({size}): null");
        assert_eq!(errno(), 1234, "malloc({size}) changed errno");
        assert_eq!(p as usize % default_align(size), 0, "malloc({size}): {p:?}");
        // SAFETY: `p` is a live block of `cabi::malloc`.
        let usable = unsafe { usable_size(p) };
        if let Some(before) = before {
            let Route::Small(c) = route(size, default_align(size)) else {
                unreachable!()
            };
            assert_eq!(usable, class_size(c), "malloc({size}): usable bytes");
            assert_eq!(allocs_of(size), Some(before + 1), "malloc({size}): counted");
        } else {
            assert!(usable >= size, "malloc({size}): {usable} usable bytes");
        }
        // Dirty the whole block, free it, and take it (or another) back through `calloc`.
        // SAFETY: the block holds `usable` bytes; freed once.
        unsafe {
            p.write_bytes(0xa5, usable);
            free(p);
        }
        let q = calloc(1, size);
        assert!(!q.is_null(), "calloc({size}): null");
        assert_eq!(errno(), 1234, "calloc({size}) changed errno");
        assert_eq!(q as usize % default_align(size), 0, "calloc({size}): {q:?}");
        // SAFETY: `q` is a live block of at least `size` bytes; freed once.
        unsafe {
            assert!(
                core::slice::from_raw_parts(q, size).iter().all(|&b| b == 0),
                "calloc({size}): not zeroed"
            );
            free(q);
        }
    }
}
