//! `collect()` gives memory back to the OS measurably: the calling thread's kept empty spans,
//! the page heap's free resident pages and the cache of freed huge mappings all go, and the
//! process's resident set (`/proc/self/statm`) shrinks by at least what was cached.
//!
//! One test in this file, so no other test thread allocates while it measures.

mod common;

use std::hint::black_box;

use specalloc_runtime::{collect, stats};

use common::rss;

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

const MIB: usize = 1 << 20;

/// Writes every byte of `v`'s capacity so its pages are resident.
fn touch(v: &mut Vec<u8>) {
    v.resize(v.capacity(), 1);
    black_box(&v[..]);
}

#[test]
fn collect_returns_free_memory_to_the_os() {
    // Ballast, live and untouched (mapped, not resident): 40 MiB of huge mapping and 16 MiB of
    // medium page runs raise the bytes in use, so that the huge-mapping cache (a quarter of
    // them) keeps an 8 MiB mapping and the page heap keeps 2 MiB of free pages resident.
    let huge_ballast: Vec<u8> = Vec::with_capacity(40 * MIB);
    let medium_ballast: Vec<Vec<u8>> = (0..32).map(|_| Vec::with_capacity(512 << 10)).collect();

    // A huge object, written, then freed: cached for reuse, still resident.
    let mut huge = Vec::with_capacity(8 * MIB);
    touch(&mut huge);
    drop(huge);
    // Small objects, written, then freed: their empty spans stay with this thread for reuse.
    let small: Vec<Box<[u8; 1024]>> = (0..1536).map(|_| Box::new([1u8; 1024])).collect();
    black_box(&small);
    drop(small);
    // Then medium objects, written, then freed: free pages of the page heap, still resident
    // (after the small ones, which would otherwise reuse these pages).
    let mut medium: Vec<Vec<u8>> = (0..3).map(|_| Vec::with_capacity(512 << 10)).collect();
    medium.iter_mut().for_each(touch);
    drop(medium);

    let before = stats();
    let rss_before = rss();
    assert!(before.large_cache_bytes >= 8 * MIB, "{before}");
    assert!(before.free_resident > 0, "{before}");

    let c = collect();

    let rss_after = rss();
    let after = stats();
    println!("{c:?}");
    println!(
        "RSS {:.1} MiB -> {:.1} MiB (-{:.1} MiB); free resident {} -> {} B; large cache {} -> {} B",
        rss_before as f64 / MIB as f64,
        rss_after as f64 / MIB as f64,
        (rss_before - rss_after) as f64 / MIB as f64,
        before.free_resident,
        after.free_resident,
        before.large_cache_bytes,
        after.large_cache_bytes,
    );
    assert!(c.thread_spans >= MIB, "{c:?}");
    // The page heap's resident free pages, and the pages of the spans just handed back (a few
    // of them may have been clean: fresh pages never written).
    assert!(
        c.free_pages >= before.free_resident + c.thread_spans / 2,
        "{c:?}"
    );
    assert!(c.huge_cache >= 8 * MIB, "{c:?}");
    assert_eq!(c.returned_to_os(), c.free_pages + c.huge_cache);
    assert_eq!(after.free_resident, 0, "{after}");
    assert_eq!(after.large_cache_bytes, 0, "{after}");
    assert_eq!(
        after.returned_to_os,
        before.returned_to_os + c.free_pages as u64
    );
    assert!(after.bytes_mapped <= before.bytes_mapped - c.huge_cache);
    // The resident set shrank by at least the unmapped huge mapping, the thread's spans and
    // the free pages.
    assert!(
        rss_before >= rss_after + 8 * MIB + 2 * MIB,
        "RSS {rss_before} -> {rss_after}, {c:?}"
    );

    // Nothing live was touched, and the allocator keeps working.
    assert_eq!(huge_ballast.capacity(), 40 * MIB);
    assert!(medium_ballast.iter().all(|v| v.capacity() == 512 << 10));
    let again: Vec<Box<[u8; 1024]>> = (0..1536).map(|_| Box::new([2u8; 1024])).collect();
    assert!(again.iter().all(|b| b.iter().all(|&x| x == 2)));
    // A second collect on a trimmed heap finds nothing resident to return.
    drop(again);
    let c2 = collect();
    assert_eq!(c2.huge_cache, 0);
    assert_eq!(stats().free_resident, 0);
}
