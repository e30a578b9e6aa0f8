//! Memory given back: free pages return to the OS past a bound (at once under pressure, else
//! once they stayed free for a tick), the huge-mapping cache stays under its cap, and memory the
//! OS took back reads zero when reused. One test function, so no
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

fn free_pages_return_to_the_os() {
    let before = stats();
    let rss0 = rss();
    // 64 MiB of 1 KiB blocks, each written.
    let layout = Layout::from_size_align(1024, 8).unwrap();
    let blocks: Vec<*mut u8> = (0..65536)
        .map(|i| {
            let p = specalloc_runtime::alloc(layout);
            assert!(!p.is_null());
            // SAFETY: a live 1 KiB block.
            unsafe { p.write_bytes(i as u8 | 1, 1024) };
            p
        })
        .collect();
    let peak = stats();
    assert!(peak.peak_in_use >= 64 << 20, "peak {}", peak.peak_in_use);
    let rss_peak = rss();
    for p in blocks {
        // SAFETY: allocated above with `layout`, freed once.
        unsafe { specalloc_runtime::dealloc(p, layout) };
    }
    let after = stats();
    assert!(after.returned_to_os > before.returned_to_os + (32 << 20));
    // At once, what stays resident of the freed pages is bounded by the pressure bound: 8 MiB or
    // half of what is in use.
    assert!(
        after.free_resident <= (8 << 20usize).max(after.pages_in_use / 2),
        "free resident {} with {} in use",
        after.free_resident,
        after.pages_in_use
    );
    let rss_after = rss();
    assert!(
        rss_after < rss_peak - (32 << 20),
        "RSS {rss0} -> {rss_peak} -> {rss_after}: freed memory was not returned"
    );
    // Pages that stay free for a tick (5 ms) go too, down to the lasting bound (256 KiB or an
    // eighth of what is in use), when a later free of pages finds them old.
    let medium = Layout::from_size_align(256 << 10, 8).unwrap();
    let mut settled = None;
    for tick in 0..40 {
        std::thread::sleep(std::time::Duration::from_millis(25));
        let p = specalloc_runtime::alloc(medium);
        assert!(!p.is_null());
        // SAFETY: allocated above with `medium`, freed once.
        unsafe { specalloc_runtime::dealloc(p, medium) };
        let s = stats();
        if s.free_resident <= (256 << 10).max(s.pages_in_use / 8) {
            settled = Some(tick);
            break;
        }
    }
    assert!(
        settled.is_some(),
        "free resident {} with {} in use after 1 s",
        stats().free_resident,
        stats().pages_in_use
    );
    // Memory the OS took back reads zero through alloc_zeroed, and is usable again.
    let zs: Vec<*mut u8> = (0..4096)
        .map(|_| {
            let p = specalloc_runtime::alloc_zeroed(layout);
            // SAFETY: a live 1 KiB block.
            assert!(unsafe { std::slice::from_raw_parts(p, 1024) }
                .iter()
                .all(|&b| b == 0));
            p
        })
        .collect();
    for p in zs {
        // SAFETY: allocated above with `layout`.
        unsafe { specalloc_runtime::dealloc(p, layout) };
    }
}

fn huge_cache_stays_under_its_cap() {
    // 40 MB of small data in use, so the cap (a quarter) holds a few mappings.
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
    // A quarter of what is in use, or the cache's floor of 4 MiB.
    assert!(s.large_cache_limit <= (s.pages_in_use / 4 + 4096).max(4 << 20));
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
    specalloc_runtime::set_large_cache_percent(25);
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

#[test]
fn memory_goes_back() {
    resident_free_pages_first();
    free_pages_return_to_the_os();
    huge_cache_stays_under_its_cap();
}
