//! Huge objects (over 1 MiB) come from memory the allocator already holds: buffers of varying
//! sizes replaced at random land on resident pages (few page faults, no mapping each), a
//! growing object extends into the free pages behind it, zeroed objects on reused pages are
//! cleared in place where their pages are resident and read zero without being touched where
//! they are not (a zeroed 256 MiB block on a run that held 16 MiB),
//! freed pages decay (`MADV_FREE`, then `MADV_DONTNEED`, then unmapped) on the page policy's
//! clock, free bytes past the resident bound go back from the end of the longest free run, and
//! a program churning within its recent footprint faults few pages in again (the resident bound
//! leaves room for the fragmentation seen, none when there is none). One test function, so no
//! other test of this binary disturbs the process-wide figures.

mod common;

use std::alloc::Layout;

use specalloc_runtime::{stats, PagePolicy};

use common::rss;

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

const MIB: usize = 1 << 20;

/// Minor page faults of this process so far (`getrusage`).
fn minor_faults() -> i64 {
    // SAFETY: `ru` is a valid out-pointer for getrusage.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut ru), 0);
        ru.ru_minflt
    }
}

/// A small deterministic generator (xorshift).
fn next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// 8 live buffers of 5 to 25 MiB, written whole, replaced 200 times at random (the pattern of
/// mimalloc-bench's malloc-large): after the first fill, the replacements reuse the freed
/// buffers' resident pages. Each replacement writes its whole buffer; before, each was a fresh
/// mapping faulted in page by page (one fault per 4 KiB written).
fn replaced_buffers_reuse_resident_pages() {
    let mut x = 7u64;
    let size = |x: &mut u64| 5 * MIB + (next(x) as usize % (20 * MIB));
    let mut bufs: Vec<Vec<u8>> = (0..8).map(|_| vec![1u8; size(&mut x)]).collect();
    let f0 = minor_faults();
    let mapped0 = stats().bytes_mapped;
    let returned0 = stats().returned_to_os;
    let mut written = 0usize;
    for _ in 0..200 {
        let i = next(&mut x) as usize % bufs.len();
        let n = size(&mut x);
        bufs[i] = vec![2u8; n];
        written += n;
    }
    let faults = (minor_faults() - f0) as usize;
    let pages = written / 4096;
    println!(
        "replacements: {faults} faults for {pages} pages written; mapped {} -> {} MiB; returned {} MiB; {}",
        mapped0 / MIB,
        stats().bytes_mapped / MIB,
        (stats().returned_to_os - returned0) >> 20,
        stats()
    );
    // Fresh mappings would fault once per page written; the free runs hold the replaced
    // buffers' pages, so only growth past them faults (a few percent of the pages written).
    assert!(
        faults * 5 <= pages,
        "{faults} faults for {pages} pages written"
    );
    // The mappings stay within the live buffers, the resident free runs' bound and the gaps.
    assert!(stats().bytes_mapped <= mapped0 + 200 * MIB, "{}", stats());
    assert!(bufs.iter().all(|b| b[0] == b[b.len() - 1]));
}

/// A huge object grows into the free pages right behind it: same address, no copy.
fn growth_extends_into_free_pages_behind() {
    let big = Layout::from_size_align(32 * MIB, 8).unwrap();
    let p = specalloc_runtime::alloc(big);
    assert!(!p.is_null());
    // SAFETY: `p` is a live block of `big`, freed once; `q` is live with 2 MiB, written at its
    // ends, then resized, and only the result is used and freed.
    unsafe {
        specalloc_runtime::dealloc(p, big);
        let small = Layout::from_size_align(2 * MIB, 8).unwrap();
        let q = specalloc_runtime::alloc(small);
        assert_eq!(q, p, "the freed run's start was not reused");
        q.write(7);
        q.add(small.size() - 1).write(9);
        let r = specalloc_runtime::realloc(q, small, 20 * MIB);
        assert_eq!(r, q, "did not grow in place into the free run behind it");
        assert_eq!((*r, *r.add(small.size() - 1)), (7, 9));
        specalloc_runtime::dealloc(r, Layout::from_size_align(20 * MIB, 8).unwrap());
    }
}

/// A 256 MiB zeroed object on reused pages (written, freed) reads zero, and getting it touches
/// no page: the peak RSS does not grow by its size.
fn zeroed_on_reused_pages_is_not_touched() {
    let l = Layout::from_size_align(256 * MIB, 8).unwrap();
    let p = specalloc_runtime::alloc(l);
    assert!(!p.is_null());
    // SAFETY: a live block of 256 MiB, written in part, then freed.
    unsafe {
        p.write_bytes(5, 16 * MIB);
        specalloc_runtime::dealloc(p, l);
    }
    let rss0 = rss();
    let q = specalloc_runtime::alloc_zeroed(l);
    assert!(!q.is_null());
    let grown = rss().saturating_sub(rss0);
    // SAFETY: a live zeroed block of 256 MiB, read at every 64th page, then freed.
    unsafe {
        assert!((0..l.size()).step_by(64 * 4096).all(|i| *q.add(i) == 0));
        assert_eq!(*q.add(l.size() - 1), 0);
        specalloc_runtime::dealloc(q, l);
    }
    assert!(
        grown < 8 * MIB,
        "RSS grew by {grown} B for a zeroed 256 MiB"
    );
}

/// A zeroed block of a few MiB on reused resident pages is cleared with stores: using it
/// faults few pages in (dropping its pages to zero them faulted every page in again).
fn small_zeroed_on_resident_pages_is_cleared_in_place() {
    let l = Layout::from_size_align(6 * MIB, 8).unwrap();
    let p = specalloc_runtime::alloc(l);
    assert!(!p.is_null());
    // SAFETY: a live block of 6 MiB, written whole, then freed.
    unsafe {
        p.write_bytes(5, l.size());
        specalloc_runtime::dealloc(p, l);
    }
    let f0 = minor_faults();
    let q = specalloc_runtime::alloc_zeroed(l);
    assert!(!q.is_null());
    // SAFETY: a live zeroed block of 6 MiB, read and written whole, then freed.
    unsafe {
        assert!(std::slice::from_raw_parts(q, l.size())
            .iter()
            .all(|&b| b == 0));
        q.write_bytes(6, l.size());
        specalloc_runtime::dealloc(q, l);
    }
    let faults = minor_faults() - f0;
    assert!(
        faults < 256,
        "{faults} faults using a zeroed 6 MiB block on reused pages"
    );
}

/// Zeroed blocks above 8 MiB on reused resident pages are cleared in place too: a loop of them,
/// each read in part and written whole, faults few pages in (dropping their pages to zero them
/// faulted every page in again, one fault per 4 KiB used).
fn large_zeroed_on_resident_pages_are_cleared_in_place() {
    let big = Layout::from_size_align(24 * MIB, 8).unwrap();
    let p = specalloc_runtime::alloc(big);
    assert!(!p.is_null());
    // SAFETY: a live block of 24 MiB, written whole, then freed.
    unsafe {
        p.write_bytes(5, big.size());
        specalloc_runtime::dealloc(p, big);
    }
    let mut x = 11u64;
    let mut pages = 0;
    let f0 = minor_faults();
    for round in 0..20u8 {
        let n = 9 * MIB + next(&mut x) as usize % (15 * MIB);
        let l = Layout::from_size_align(n, 8).unwrap();
        let q = specalloc_runtime::alloc_zeroed(l);
        assert!(!q.is_null());
        // SAFETY: a live zeroed block of `n` bytes, read at every 4,093rd byte and at its end,
        // written whole, then freed.
        unsafe {
            assert!((0..n).step_by(4093).all(|i| *q.add(i) == 0));
            assert_eq!(*q.add(n - 1), 0);
            q.write_bytes(round | 1, n);
            specalloc_runtime::dealloc(q, l);
        }
        pages += n / 4096;
    }
    let faults = (minor_faults() - f0) as usize;
    println!("zeroed 9-24 MiB blocks: {faults} faults for {pages} pages used");
    assert!(
        faults * 50 < pages,
        "{faults} faults for {pages} pages of zeroed 9-24 MiB blocks on reused pages"
    );
}

/// A zeroed block on a run whose last object used only a tenth of it writes no page of the
/// rest, which no object touched: those pages stay out of memory, as a fresh mapping's do
/// (clearing the whole block with stores made all of it resident).
fn partly_used_zeroed_stays_partly_resident() {
    // Not a whole number of pages nor of words: the last page is cleared in part.
    let l = Layout::from_size_align(6 * MIB - 1, 8).unwrap();
    // The free runs go back to the OS: the run the next block takes is not resident.
    specalloc_runtime::collect();
    let p = specalloc_runtime::alloc(l);
    assert!(!p.is_null());
    // SAFETY: a live block of 6 MiB - 1, its first tenth written and a byte at the end of two
    // of its other pages (which the clearing must find), then freed.
    unsafe {
        p.write_bytes(5, l.size() / 10);
        p.add(l.size() / 2 + 4095).write(7);
        p.add(l.size() - 1).write(7);
        specalloc_runtime::dealloc(p, l);
    }
    let rss0 = rss();
    let q = specalloc_runtime::alloc_zeroed(l);
    assert_eq!(
        q, p,
        "the zeroed block should take the run just freed, the only resident one"
    );
    let grown = rss().saturating_sub(rss0);
    // SAFETY: a live zeroed block of 6 MiB - 1, read whole, its first tenth written, then
    // freed. (Pages the OS took back, or swapped out, are dropped rather than read: with no
    // swap here the test cannot tell the two apart, only that the block reads zero.)
    unsafe {
        assert!(std::slice::from_raw_parts(q, l.size())
            .iter()
            .all(|&b| b == 0));
        q.write_bytes(6, l.size() / 10);
        specalloc_runtime::dealloc(q, l);
    }
    assert!(
        grown < MIB,
        "RSS grew by {grown} B for a zeroed 6 MiB block whose run was a tenth resident"
    );
}

/// The C API's huge blocks come from the same free runs and stay at multiples of the chunk
/// size (what `free` tells them by); a freed one's pages are reused by the next; a huge block
/// resized within its room stays where it is.
fn c_huge_blocks_reuse_free_runs() {
    use specalloc_runtime::cabi;
    let chunk = 4 * MIB;
    let a = cabi::malloc(9 * MIB);
    assert!(!a.is_null() && (a as usize).is_multiple_of(chunk));
    // SAFETY: `a` is live with 9 MiB; each block below is used within its size and freed once.
    unsafe {
        a.write_bytes(3, 9 * MIB);
        cabi::free(a);
        let mapped = stats().bytes_mapped;
        let b = cabi::malloc(6 * MIB);
        assert!(!b.is_null() && (b as usize).is_multiple_of(chunk));
        assert_eq!(
            stats().bytes_mapped,
            mapped,
            "mapped anew instead of reusing"
        );
        let c = cabi::calloc(1, 3 * MIB);
        assert!(!c.is_null() && (c as usize).is_multiple_of(chunk));
        assert!(std::slice::from_raw_parts(c, 3 * MIB)
            .iter()
            .all(|&v| v == 0));
        assert!(cabi::usable_size(b) >= 6 * MIB);
        b.write_bytes(4, 6 * MIB);
        let b2 = cabi::realloc(b, 7 * MIB);
        assert!(!b2.is_null() && (b2 as usize).is_multiple_of(chunk));
        assert_eq!(*b2.add(6 * MIB - 1), 4);
        let b3 = cabi::realloc(b2, 512 << 10);
        assert_eq!(*b3.add(100), 4);
        cabi::free(b3);
        cabi::free(c);
        // A buffer grown past 1 MiB gets room to spare; asked again for a size below 1 MiB
        // that its room still holds, it stays (it used to go back to a page run, and out
        // again at the next growth, copying each time).
        let m = cabi::malloc(1000 << 10);
        m.write_bytes(6, 1000 << 10);
        let h = cabi::realloc(m, (1 << 20) + 4096);
        assert!((h as usize).is_multiple_of(chunk));
        let h2 = cabi::realloc(h, (1 << 20) - 4096);
        assert_eq!(
            h2, h,
            "moved out of a huge block whose room holds the new size"
        );
        assert_eq!(*h2.add((1000 << 10) - 1), 6);
        cabi::free(h2);
    }
}

/// Freed runs decay on the clock: advised with `MADV_FREE` after the purge delay, returned
/// after the decommit delay, unmapped after another; never above the resident bound.
fn free_runs_decay_on_the_clock() {
    let saved = specalloc_runtime::page_policy();
    specalloc_runtime::set_page_policy(PagePolicy {
        purge_delay_ms: 20,
        decommit_delay_ms: 40,
        ..saved
    });
    specalloc_runtime::collect();
    let mapped0 = stats().bytes_mapped;
    let l = Layout::from_size_align(48 * MIB, 8).unwrap();
    let p = specalloc_runtime::alloc(l);
    // SAFETY: a live block of 48 MiB, written, then freed.
    unsafe {
        p.write_bytes(1, l.size());
        specalloc_runtime::dealloc(p, l);
    }
    let s = stats();
    assert!(s.large_cache_bytes <= s.large_cache_limit, "{s}");
    // The clock runs on huge-heap operations: a small huge object allocated and freed.
    let tick = || {
        let t = Layout::from_size_align(2 * MIB, 8).unwrap();
        let q = specalloc_runtime::alloc(t);
        // SAFETY: allocated with `t`.
        unsafe { specalloc_runtime::dealloc(q, t) };
    };
    let mut advised = false;
    for _ in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(10));
        tick();
        advised |= stats().large_free_lazy > 0;
    }
    let s = stats();
    println!("after the delays: {s}");
    assert!(advised, "never advised with MADV_FREE");
    // What stays resident for good: 4 MiB or an eighth of the bytes in use.
    assert!(
        s.large_cache_bytes <= (4 * MIB).max(s.pages_in_use / 8) + 2 * MIB,
        "{s}"
    );
    assert!(
        s.bytes_mapped <= mapped0 + 8 * MIB,
        "free runs not unmapped: {s}"
    );
    specalloc_runtime::set_page_policy(saved);
}

/// Resident 4 KiB pages of `[p, p + len)` (`mincore`; `p` page-aligned); pages not mapped
/// (unmapped free runs) are not resident.
fn resident_pages(p: *const u8, len: usize) -> usize {
    (0..len.div_ceil(4096))
        .filter(|i| {
            let mut v = 0u8;
            // SAFETY: one page, one byte of answer; an unmapped page is an error, not a fault.
            let rc = unsafe { libc::mincore(p.add(i * 4096) as *mut libc::c_void, 4096, &mut v) };
            rc == 0 && v & 1 == 1
        })
        .count()
}

/// Free bytes past the resident bound go back from the end of the longest free run: a short
/// run beside it stays resident, whole, for the next object of its size.
fn excess_goes_from_the_longest_runs_end() {
    let saved = specalloc_runtime::page_policy();
    // No purge on the clock; the recent-peak window moves every 30 ms.
    specalloc_runtime::set_page_policy(PagePolicy {
        purge_delay_ms: u64::MAX,
        decommit_delay_ms: 30,
        ..saved
    });
    specalloc_runtime::collect();
    let (short, long) = (
        Layout::from_size_align(3 * MIB, 8).unwrap(),
        Layout::from_size_align(9 * MIB, 8).unwrap(),
    );
    let a = specalloc_runtime::alloc(short);
    assert!(!a.is_null());
    // A page of nobody's right below `a`'s run (its header page, then the object), where the
    // kernel would place the next mapping, so that `b`'s run does not touch `a`'s and the two
    // stay separate free runs (the check below skips when they touch all the same).
    // SAFETY: MAP_FIXED_NOREPLACE maps nothing over an existing mapping; checked below.
    let spacer = unsafe {
        libc::mmap(
            (a as usize - 2 * 4096) as *mut libc::c_void,
            4096,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    let b = specalloc_runtime::alloc(long);
    assert!(!b.is_null());
    // SAFETY: live blocks of their layouts' sizes, written whole, then freed.
    unsafe {
        a.write_bytes(1, short.size());
        b.write_bytes(2, long.size());
        specalloc_runtime::dealloc(a, short);
        specalloc_runtime::dealloc(b, long);
    }
    // Two windows with no new peak: the bound falls to the bytes in use, or 4 MiB; the
    // excess goes back on the next page-heap operations.
    let medium = Layout::from_size_align(256 << 10, 8).unwrap();
    for _ in 0..4 {
        std::thread::sleep(std::time::Duration::from_millis(35));
        let m = specalloc_runtime::alloc(medium);
        // SAFETY: allocated with `medium`.
        unsafe { specalloc_runtime::dealloc(m, medium) };
    }
    let s = stats();
    println!("after the windows: {s}");
    assert!(s.large_cache_bytes <= s.large_cache_limit, "{s}");
    assert!(s.large_cache_limit < 8 * MIB, "{s}");
    // (A run is its header page, then the object.)
    let (a_run, b_run) = (a as usize - 4096, b as usize - 4096);
    let apart = a_run + 4096 + short.size() != b_run && b_run + 4096 + long.size() != a_run;
    if apart {
        let (ra, rb) = (
            resident_pages(a, short.size()),
            resident_pages(b, long.size()),
        );
        assert_eq!(ra, short.size() / 4096, "the short run was returned: {s}");
        assert!(
            rb < long.size() / 4096 / 2,
            "{rb} pages of the long run resident"
        );
        assert!(
            rb > 0 || s.large_cache_limit < 4 * MIB + short.size(),
            "{s}"
        );
    } else {
        println!("the two runs are neighbours: the layout check skipped");
    }
    if spacer != libc::MAP_FAILED {
        // SAFETY: the page mapped above.
        unsafe { libc::munmap(spacer, 4096) };
    }
    specalloc_runtime::set_page_policy(saved);
}

/// The C `largeblocks` pattern: 32 live blocks of 64 KiB to 4 MiB (medium and huge), one
/// replaced at random at a time, the first quarter of each written. Churning within its recent
/// footprint, the program reuses resident pages: once warm, under 1 % of the pages written
/// fault (returning free pages past the recent peak at once, 3 % faulted, 8 times mimalloc's
/// faults in the benchmark).
fn churn_within_the_recent_footprint_reuses_pages() {
    use specalloc_runtime::cabi;
    const SLOTS: usize = 32;
    let mut slot = [(std::ptr::null_mut::<u8>(), 0usize); SLOTS];
    let mut x = 17u64;
    let mut replace = |x: &mut u64| -> usize {
        let r = next(x);
        let k = (r >> 40) as usize % SLOTS;
        let base = (64usize << 10) << (r % 6);
        let n = base + (r >> 8) as usize % base;
        let (old, _) = slot[k];
        // SAFETY: `old` is null or a live block of ours, freed once; the new block is written
        // within its `n` bytes.
        unsafe {
            cabi::free(old);
            let b = cabi::malloc(n);
            assert!(!b.is_null());
            for p in (0..n / 4).step_by(4096) {
                b.add(p).write(1);
            }
            slot[k] = (b, n);
        }
        n / 4 / 4096
    };
    for _ in 0..5_000 {
        replace(&mut x);
    }
    let f0 = minor_faults();
    let written: usize = (0..20_000).map(|_| replace(&mut x)).sum();
    let faults = (minor_faults() - f0) as usize;
    println!("churn: {faults} faults for {written} pages written");
    assert!(
        faults * 100 < written,
        "{faults} faults for {written} pages written: {}",
        stats()
    );
    for (b, _) in slot {
        // SAFETY: live blocks of ours (or null), freed once.
        unsafe { cabi::free(b) };
    }
}

/// With no fragmentation seen (every huge run placed on resident free pages, or where the free
/// runs held too few), the resident free runs are bounded by the recent peak alone: the
/// quarter of it kept for fragmentation is not granted.
fn no_fragmentation_no_slack() {
    let saved = specalloc_runtime::page_policy();
    specalloc_runtime::set_page_policy(PagePolicy {
        purge_delay_ms: u64::MAX,
        decommit_delay_ms: 30,
        ..saved
    });
    // The free runs go, and two windows pass: no peak or fragmentation from before is left.
    specalloc_runtime::collect();
    let tick = |size: usize| {
        let l = Layout::from_size_align(size, 8).unwrap();
        let p = specalloc_runtime::alloc(l);
        assert!(!p.is_null());
        // SAFETY: a live block of `size` bytes, written whole, freed once.
        unsafe {
            p.write_bytes(1, size);
            specalloc_runtime::dealloc(p, l);
        }
    };
    for _ in 0..3 {
        std::thread::sleep(std::time::Duration::from_millis(35));
        tick(2 * MIB);
    }
    let in_use0 = stats().pages_in_use;
    // A fresh 12 MiB object (no free runs to take: nothing misplaced), then 6 MiB ones on its
    // resident pages.
    tick(12 * MIB);
    for _ in 0..5 {
        tick(6 * MIB);
    }
    let s = stats();
    println!("no fragmentation: {s}");
    // The window's peak: what was in use, the 12 MiB object and its header page.
    let peak = in_use0.max(s.pages_in_use) + 12 * MIB + 4096;
    assert!(
        s.large_cache_limit <= (peak - s.pages_in_use).max(s.pages_in_use).max(4 * MIB) + 64 * 1024,
        "bound past the peak with no fragmentation: {s}"
    );
    assert!(
        s.large_cache_bytes >= 12 * MIB,
        "the object's pages not kept: {s}"
    );
    specalloc_runtime::set_page_policy(saved);
}

#[test]
fn huge_objects_reuse_memory_the_allocator_holds() {
    growth_extends_into_free_pages_behind();
    c_huge_blocks_reuse_free_runs();
    replaced_buffers_reuse_resident_pages();
    zeroed_on_reused_pages_is_not_touched();
    small_zeroed_on_resident_pages_is_cleared_in_place();
    large_zeroed_on_resident_pages_are_cleared_in_place();
    partly_used_zeroed_stays_partly_resident();
    free_runs_decay_on_the_clock();
    excess_goes_from_the_longest_runs_end();
    churn_within_the_recent_footprint_reuses_pages();
    no_fragmentation_no_slack();
}
