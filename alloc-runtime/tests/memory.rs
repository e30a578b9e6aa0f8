//! Memory given back: freed pages stay resident for reuse (no new faults on a rebuild) but never
//! beyond the recent peak, are advised with `MADV_FREE` after the purge delay and returned with
//! `MADV_DONTNEED` after the decommit delay (at once with zero delays), the freed huge objects'
//! resident pages stay under their bound, and memory the OS took back (or may have) reads zero when reused. One test function, so no
//! other test of this binary disturbs the process-wide figures.

use std::alloc::Layout;

use specalloc_runtime::stats;

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

/// Resident set size of this process, from /proc/self/statm.
fn rss() -> usize {
    let s = std::fs::read_to_string("/proc/self/statm").expect("read /proc/self/statm");
    let pages: usize = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// Minor page faults of this process so far (`getrusage`).
fn minor_faults() -> i64 {
    // SAFETY: `ru` is a valid out-pointer for getrusage.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut ru), 0);
        ru.ru_minflt
    }
}

/// 64 MiB of 1 KiB blocks, each written with `fill`.
fn build(fill: u8) -> Vec<*mut u8> {
    let layout = Layout::from_size_align(1024, 8).unwrap();
    (0..65536)
        .map(|_| {
            let p = specalloc_runtime::alloc(layout);
            assert!(!p.is_null());
            // SAFETY: a live 1 KiB block.
            unsafe { p.write_bytes(fill, 1024) };
            p
        })
        .collect()
}

fn drop_blocks(blocks: Vec<*mut u8>) {
    let layout = Layout::from_size_align(1024, 8).unwrap();
    for p in blocks {
        // SAFETY: allocated by `build` with `layout`, freed once.
        unsafe { specalloc_runtime::dealloc(p, layout) };
    }
}

/// Ticks the page heap (a medium object's pages taken and given back) every 10 ms until
/// `done`, for at most 2 s; returns whether `done` was reached.
fn tick_until(done: impl Fn(&specalloc_runtime::Stats) -> bool) -> bool {
    let medium = Layout::from_size_align(256 << 10, 8).unwrap();
    for _ in 0..200 {
        if done(&stats()) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        let p = specalloc_runtime::alloc(medium);
        assert!(!p.is_null());
        // SAFETY: allocated above with `medium`, freed once.
        unsafe { specalloc_runtime::dealloc(p, medium) };
    }
    done(&stats())
}

/// Lasting bound of free resident memory: 256 KiB or an eighth of the pages in use (plus a
/// span's pages of slack: the check runs before the last free's pages are counted).
fn lasting(s: &specalloc_runtime::Stats) -> usize {
    (256usize << 10).max(s.pages_in_use / 8) + (256 << 10)
}

fn free_pages_return_to_the_os() {
    let saved = specalloc_runtime::page_policy();
    // Short delays, so the test sees every stage within its 2 s ticks.
    specalloc_runtime::set_page_policy(specalloc_runtime::PagePolicy {
        purge_delay_ms: 20,
        decommit_delay_ms: 200,
        ..saved
    });
    let before = stats();
    let rss0 = rss();
    let blocks = build(0xa5);
    let peak = stats();
    assert!(peak.peak_in_use >= 64 << 20, "peak {}", peak.peak_in_use);
    let rss_peak = rss();
    drop_blocks(blocks);
    // At once, the freed pages stay resident for reuse, but never beyond what the peak
    // accounts for: in use + free resident <= the recent peak and at most a quarter of it (for
    // the fragmentation seen), or in use plus the slack (8 MiB or half the pages in use).
    let after = stats();
    let slack = (8usize << 20).max(after.pages_in_use / 2);
    assert!(
        after.pages_in_use + after.free_resident
            <= (peak.peak_in_use + peak.peak_in_use / 4).max(after.pages_in_use + slack),
        "free resident {} with {} in use, peak {}",
        after.free_resident,
        after.pages_in_use,
        peak.peak_in_use
    );
    // After the purge delay they are advised with MADV_FREE (still counted resident) ...
    assert!(
        tick_until(|s| s.free_lazy >= 16 << 20),
        "nothing advised with MADV_FREE: {}",
        stats()
    );
    // ... and after the decommit delay they go back with MADV_DONTNEED, down to the lasting
    // bound, and leave the RSS.
    assert!(
        tick_until(|s| s.free_resident <= lasting(s) && s.free_lazy <= lasting(s)),
        "free resident {} ({} lazy) with {} in use after 2 s",
        stats().free_resident,
        stats().free_lazy,
        stats().pages_in_use
    );
    let gone = stats();
    assert!(gone.returned_to_os > before.returned_to_os + (32 << 20));
    let rss_after = rss();
    assert!(
        rss_after < rss_peak - (32 << 20),
        "RSS {rss0} -> {rss_peak} -> {rss_after}: freed memory was not returned"
    );
    // Memory the OS took back, or was told it may take (MADV_FREE), reads zero through
    // alloc_zeroed, and is usable again.
    for decommit_delay_ms in [0, 60_000] {
        specalloc_runtime::set_page_policy(specalloc_runtime::PagePolicy {
            purge_delay_ms: 0,
            decommit_delay_ms,
            ..saved
        });
        drop_blocks(build(0x5a));
        let layout = Layout::from_size_align(1024, 8).unwrap();
        let zs: Vec<*mut u8> = (0..65536)
            .map(|_| {
                let p = specalloc_runtime::alloc_zeroed(layout);
                // SAFETY: a live 1 KiB block.
                assert!(unsafe { std::slice::from_raw_parts(p, 1024) }
                    .iter()
                    .all(|&b| b == 0));
                p
            })
            .collect();
        if decommit_delay_ms > 0 {
            assert!(stats().returned_to_os >= gone.returned_to_os);
        }
        drop_blocks(zs);
    }
    // With both delays zero, free pages go back at once (the strict-RSS setting).
    specalloc_runtime::set_page_policy(specalloc_runtime::PagePolicy {
        purge_delay_ms: 0,
        decommit_delay_ms: 0,
        ..saved
    });
    let rss_peak = {
        let blocks = build(1);
        let r = rss();
        drop_blocks(blocks);
        r
    };
    let s = stats();
    assert!(s.free_resident <= lasting(&s), "{s}");
    assert!(rss() < rss_peak - (32 << 20), "strict setting kept the RSS");
    // Delays of any length are taken (saturating, never an overflow): nothing is advised.
    specalloc_runtime::set_page_policy(specalloc_runtime::PagePolicy {
        purge_delay_ms: u64::MAX,
        decommit_delay_ms: u64::MAX,
        ..saved
    });
    drop_blocks(build(2));
    let medium = Layout::from_size_align(256 << 10, 8).unwrap();
    for _ in 0..5 {
        std::thread::sleep(std::time::Duration::from_millis(30));
        let p = specalloc_runtime::alloc(medium);
        // SAFETY: allocated above with `medium`, freed once.
        unsafe { specalloc_runtime::dealloc(p, medium) };
    }
    let s = stats();
    assert_eq!(s.free_lazy, 0, "{s}");
    assert!(s.free_resident >= 32 << 20, "{s}");
    specalloc_runtime::set_page_policy(saved);
}

/// A program that builds and drops a large structure and builds it again reuses the resident
/// pages: the second build takes a small fraction of the first one's page faults.
fn rebuild_reuses_resident_pages() {
    specalloc_runtime::collect();
    let f0 = minor_faults();
    drop_blocks(build(3));
    let f1 = minor_faults();
    for round in 0..3 {
        drop_blocks(build(4 + round));
    }
    let f2 = minor_faults();
    let first = f1 - f0;
    assert!(first >= 8192, "the first build faulted only {first} times");
    assert!(
        (f2 - f1) * 10 <= first,
        "three rebuilds faulted {} times, the first build {first}",
        f2 - f1
    );
}

fn huge_cache_stays_under_its_cap() {
    // 40 MB of small data in use, so the bound (the bytes in use) holds a few freed objects.
    let keep: Vec<Vec<u8>> = (0..20_000).map(|i| vec![i as u8; 2000]).collect();
    let sizes = [
        3usize << 20,
        2 << 20,
        5 << 20,
        2 << 20,
        8 << 20,
        3 << 20,
        1 << 21,
    ];
    for round in 0..20 {
        let blocks: Vec<(Layout, *mut u8)> = sizes
            .iter()
            .map(|&s| {
                let l = Layout::from_size_align(s + round * 4096, 8).unwrap();
                let p = specalloc_runtime::alloc(l);
                assert!(!p.is_null());
                // SAFETY: a live block of `s` bytes.
                unsafe {
                    p.write(1);
                    p.add(l.size() - 1).write(2);
                }
                (l, p)
            })
            .collect();
        for (l, p) in blocks {
            // SAFETY: allocated above with `l`.
            unsafe { specalloc_runtime::dealloc(p, l) };
            let s = stats();
            assert!(
                s.large_cache_bytes <= s.large_cache_limit,
                "cache {} over its limit {}",
                s.large_cache_bytes,
                s.large_cache_limit
            );
        }
    }
    let s = stats();
    // The bytes in use (the default bound), the floor of 4 MiB, or what the recent peak of the
    // bytes in use accounts for, with at most a quarter of it for the fragmentation seen.
    assert!(
        s.large_cache_limit
            <= (s.pages_in_use + 4096)
                .max(4 << 20)
                .max((s.peak_in_use + s.peak_in_use / 4).saturating_sub(s.pages_in_use)),
        "{s}"
    );
    // Once the recent-peak window (the decommit delay) has passed twice with no new peak, the
    // bound is what is in use, or 4 MiB.
    let saved = specalloc_runtime::page_policy();
    specalloc_runtime::set_page_policy(specalloc_runtime::PagePolicy {
        decommit_delay_ms: 30,
        ..saved
    });
    let l = Layout::from_size_align(2 << 20, 8).unwrap();
    for _ in 0..4 {
        std::thread::sleep(std::time::Duration::from_millis(40));
        let p = specalloc_runtime::alloc(l);
        // SAFETY: allocated with `l`.
        unsafe { specalloc_runtime::dealloc(p, l) };
    }
    let s = stats();
    assert!(
        s.large_cache_limit <= (s.pages_in_use + 4096).max(4 << 20),
        "{s}"
    );
    assert!(s.large_cache_bytes <= s.large_cache_limit, "{s}");
    specalloc_runtime::set_page_policy(saved);
    // A freed mapping is reused: the same size again maps nothing new.
    let l = Layout::from_size_align(3 << 20, 8).unwrap();
    let p = specalloc_runtime::alloc(l);
    // SAFETY: allocated with `l`.
    unsafe { specalloc_runtime::dealloc(p, l) };
    assert!(
        stats().large_cache_bytes >= 3 << 20,
        "freed mapping not cached"
    );
    let mapped = stats().bytes_mapped;
    let q = specalloc_runtime::alloc_zeroed(l);
    assert_eq!(stats().bytes_mapped, mapped, "cached mapping not reused");
    // SAFETY: a live zeroed block of 3 MiB.
    assert!(unsafe { std::slice::from_raw_parts(q, l.size()) }
        .iter()
        .all(|&b| b == 0));
    // SAFETY: allocated with `l`.
    unsafe { specalloc_runtime::dealloc(q, l) };
    // With the cache turned off, nothing is kept.
    specalloc_runtime::set_large_cache_percent(0);
    let p = specalloc_runtime::alloc(l);
    // SAFETY: allocated with `l`.
    unsafe { specalloc_runtime::dealloc(p, l) };
    assert_eq!(stats().large_cache_bytes, 0);
    specalloc_runtime::set_large_cache_percent(100);
    drop(keep);
}

/// A run of pages is taken from free pages that still hold memory before pages the OS took
/// back, even at a higher address (first fit alone would take the lower one).
fn resident_free_pages_first() {
    let medium = Layout::from_size_align(256 << 10, 4096).unwrap();
    let x: Vec<*mut u8> = (0..3).map(|_| specalloc_runtime::alloc(medium)).collect();
    assert!(x.iter().all(|p| !p.is_null()));
    let (low, high) = if x[0] < x[2] {
        (x[0], x[2])
    } else {
        (x[2], x[0])
    };
    // SAFETY: allocated above with `medium`, freed once.
    unsafe { specalloc_runtime::dealloc(low, medium) };
    // The lower run goes back to the OS; the higher one is freed after and holds memory.
    specalloc_runtime::collect();
    // SAFETY: as above.
    unsafe {
        high.write_bytes(7, medium.size());
        specalloc_runtime::dealloc(high, medium);
    }
    let y = specalloc_runtime::alloc(medium);
    assert_eq!(
        y, high,
        "took the run the OS took back ({low:?}) over a resident one"
    );
    // SAFETY: allocated above with `medium`; `x[1]` too.
    unsafe {
        specalloc_runtime::dealloc(y, medium);
        specalloc_runtime::dealloc(x[1], medium);
    }
}

/// A run that no stretch of resident free pages fits whole is placed over as many of them as
/// it can: writing it faults in only the pages it adds.
fn runs_too_long_for_resident_pages_cover_them() {
    const PAGE: usize = 8192;
    let quarter = Layout::from_size_align(32 * PAGE, 8).unwrap();
    let long = Layout::from_size_align(48 * PAGE, 8).unwrap();
    // Every free page goes back to the OS, so the only ones holding memory below are `b`'s.
    specalloc_runtime::collect();
    let mut kept = Vec::with_capacity(64);
    let (a, b) = loop {
        let a = specalloc_runtime::alloc(quarter);
        let b = specalloc_runtime::alloc(quarter);
        assert!(!a.is_null() && !b.is_null());
        if b as usize == a as usize + quarter.size() {
            break (a, b);
        }
        assert!(kept.len() < 60, "no two neighbouring runs");
        kept.push(a);
        kept.push(b);
    };
    // SAFETY: allocated above with `quarter`, freed once; `b` is written in full first.
    unsafe {
        specalloc_runtime::dealloc(a, quarter);
        specalloc_runtime::collect();
        b.write_bytes(3, quarter.size());
        specalloc_runtime::dealloc(b, quarter);
    }
    // `a`'s pages read zero, `b`'s hold memory: no 48 resident pages in a row anywhere.
    let f0 = minor_faults();
    let y = specalloc_runtime::alloc(long);
    assert!(!y.is_null());
    // SAFETY: a live block of `long.size()` bytes.
    unsafe { y.write_bytes(5, long.size()) };
    let faults = minor_faults() - f0;
    let (y0, y1) = (y as usize, y as usize + long.size());
    assert!(
        y0 <= b as usize && y1 >= b as usize + quarter.size(),
        "run {y:?} does not cover the resident run {b:?}"
    );
    // 16 new pages of 8 KiB are 32 OS pages; 48 new ones would be 96.
    assert!(faults <= 48, "{faults} faults writing a run 2/3 resident");
    // SAFETY: allocated above; `kept` with `quarter`.
    unsafe {
        specalloc_runtime::dealloc(y, long);
        for p in kept {
            specalloc_runtime::dealloc(p, quarter);
        }
    }
}

#[test]
fn memory_goes_back() {
    resident_free_pages_first();
    runs_too_long_for_resident_pages_cover_them();
    rebuild_reuses_resident_pages();
    free_pages_return_to_the_os();
    huge_cache_stays_under_its_cap();
}
