//! Free pages of a process that locked its memory (`mlockall(MCL_CURRENT | MCL_FUTURE)`): the
//! kernel refuses to advise locked pages (`madvise` fails with `EINVAL` for `MADV_FREE` and
//! `MADV_DONTNEED`), so the allocator must not ask again on every page-heap operation, and its
//! statistics must show those pages as free and resident, never as returned to the OS. Once the
//! program unlocks its memory, pages go back again, with `MADV_FREE` too.
//!
//! `mlockall` applies to the whole process, so this file holds one test. Where the process may
//! not lock its memory (`EPERM`, or `ENOMEM` under `RLIMIT_MEMLOCK`), the test says so and
//! passes.

use std::hint::black_box;
use std::time::Instant;

use specalloc_runtime::test_hooks::failed_advice;
use specalloc_runtime::{collect, set_page_policy, stats, PagePolicy};

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// Frees and allocates `ops` blocks in turn among 64 slots: runs of pages (40 to 240 KiB) and,
/// with `huge`, huge objects (2 to 5 MiB) too, each written over its first 64 KiB.
fn churn(ops: usize, huge: bool) {
    let mut slots: Vec<Vec<u8>> = (0..64).map(|_| Vec::new()).collect();
    let mut s: u32 = 1;
    for _ in 0..ops {
        s = s.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let k = (s >> 8) as usize % slots.len();
        let len = if !huge || (s >> 16) % 2 == 1 {
            40_000 + (s >> 20) as usize % 200_000
        } else {
            2_000_000 + (s >> 18) as usize % 3_000_000
        };
        let mut v = Vec::with_capacity(len);
        v.resize(len.min(64 << 10), 1u8);
        slots[k] = black_box(v);
    }
}

#[test]
fn locked_pages_are_not_advised_again_and_again() {
    // Free pages are advised as soon as they are freed (`MADV_FREE`), and returned a second
    // later (`MADV_DONTNEED`): every page-heap operation would advise.
    set_page_policy(PagePolicy {
        purge_delay_ms: 0,
        decommit_delay_ms: 1000,
        huge_pages: false,
    });
    // SAFETY: mlockall has no memory-safety preconditions.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } != 0 {
        println!(
            "skipped: mlockall failed ({}); this process may not lock its memory",
            std::io::Error::last_os_error()
        );
        return;
    }
    let before = stats();
    let failed_before = failed_advice();
    let start = Instant::now();
    const OPS: usize = 5000;
    // The page heap first, alone (its sweeps meet the locked pages first), then with the
    // huge heap.
    churn(OPS, false);
    churn(OPS, true);
    let secs = start.elapsed().as_secs() as usize;
    let failed = failed_advice() - failed_before;
    let after = stats();
    println!(
        "{} operations in {secs} s: {failed} refused madvise calls, {} chunks",
        2 * OPS,
        after.chunks
    );
    // Refusals are remembered for a second: at most one or two per chunk (a page heap's
    // sweep leaves a chunk at its first refusal) and a few for the huge heap's passes, per
    // second; not one per operation.
    let bound = (secs + 1) * (2 * after.chunks + 8);
    assert!(
        failed <= bound,
        "{failed} refused madvise calls for {} operations (at most {bound} expected)",
        2 * OPS
    );
    // Nothing could be given back, and nothing says it was.
    assert_eq!(after.returned_to_os, before.returned_to_os);
    assert_eq!(after.free_lazy, 0);
    assert_eq!(after.large_free_lazy, 0);
    assert!(after.free_resident > 0);

    // Unlocked, pages go back again: all at once with `collect()`, and advised with
    // `MADV_FREE` afterwards (the refusals were not taken for a kernel without it).
    // SAFETY: munlockall has no memory-safety preconditions.
    assert_eq!(unsafe { libc::munlockall() }, 0);
    let collected = collect();
    let returned = stats().returned_to_os;
    assert!(
        returned > after.returned_to_os,
        "collect() after munlockall returned nothing: {collected:?}"
    );
    churn(OPS, true);
    let last = stats();
    assert!(
        last.free_lazy > 0,
        "the page heap no longer advises with MADV_FREE after munlockall ({} bytes returned)",
        last.returned_to_os
    );
}
