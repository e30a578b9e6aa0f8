//! The statistics snapshot, [`stats()`]: sums the per-heap counters (kept by each heap's thread
//! with a plain load and store, no atomic read-modify-write on the fast path) and the global
//! ones of [`crate::stats`], the page heap and the large objects. Cheap to keep, merged on read.

use core::fmt;
use core::sync::atomic::Ordering;

use crate::heap;
use crate::size_class::{class_size, NUM_CLASSES};
use crate::span::{TINY_CLASS, TINY_SIZE};
use crate::stats::{
    LARGE_ALLOCS, LARGE_BYTES, LARGE_FREES, ORPHAN_FREES, ORPHAN_REMOTE, PEAK_IN_USE, SPANS,
};

/// Statistics of one size class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct ClassStats {
    /// Bytes per object of the class.
    pub size: usize,
    /// Objects allocated and not yet freed.
    pub live_objects: u64,
    /// Spans of the class in use (owned by threads or in the central pool).
    pub spans: usize,
    /// Allocations so far.
    pub allocs: u64,
    /// Frees so far (local and remote).
    pub frees: u64,
}

/// A snapshot of the allocator's state, from [`stats()`].
///
/// Counters are summed from per-thread values without stopping anyone, so a snapshot taken while
/// other threads allocate is approximate; once they are quiet it is exact.
///
/// ```
/// let s = specalloc_runtime::stats();
/// assert!(s.bytes_mapped >= s.bytes_in_use || s.bytes_in_use == 0);
/// println!("{s}");
/// ```
///
/// With the `serde` feature, `Stats` and [`ClassStats`] implement `serde::Serialize` and
/// `serde::Deserialize` (`classes` as a sequence of 68 entries), e.g. for JSON:
///
/// ```
/// # #[cfg(feature = "serde")]
/// # {
/// let json = serde_json::to_string(&specalloc_runtime::stats()).unwrap();
/// let back: specalloc_runtime::Stats = serde_json::from_str(&json).unwrap();
/// assert_eq!(back.classes.len(), 68);
/// # }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Stats {
    /// Bytes held by live objects: small objects at their class size, large ones at their
    /// page-rounded or mapped size.
    pub bytes_in_use: usize,
    /// Bytes currently mapped from the OS (chunks, large mappings, metadata).
    pub bytes_mapped: usize,
    /// Allocations so far (small and large).
    pub allocs: u64,
    /// Frees so far (small and large).
    pub frees: u64,
    /// Small objects freed by a thread other than the owner of their span.
    pub remote_frees: u64,
    /// Objects allocated and not yet freed (small and large).
    pub live_objects: u64,
    /// Threads with a heap right now. While 8 or more threads have one, a thread that has made
    /// 16 allocations and frees or fewer has none (a shared heap serves it), and is not counted.
    pub threads: usize,
    /// Live large objects (above 32 KiB or over-aligned).
    pub large_objects: u64,
    /// Bytes held by live large objects.
    pub large_bytes: usize,
    /// Spans abandoned by exited threads, waiting in the central pools.
    pub central_spans: usize,
    /// Chunks mapped for the page heap.
    pub chunks: usize,
    /// Free pages in the page heap.
    pub free_pages: usize,
    /// Tiny objects (1 to 4 bytes, each in a 4-byte block of the tiny class) allocated so far.
    pub tiny_allocs: u64,
    /// Tiny objects freed so far.
    pub tiny_frees: u64,
    /// Live tiny objects.
    pub tiny_objects: u64,
    /// Spans of the tiny class.
    pub tiny_spans: usize,
    /// Heaps made so far: at most one per thread alive at once, since an exited thread's heap
    /// is reused.
    pub heaps: usize,
    /// Bytes of pages and mappings in use by the allocator: spans (whole, including their free
    /// blocks), large objects, and the runs threads hold for new spans ([`Stats::reserved`]). Their peak is [`Stats::peak_in_use`].
    pub pages_in_use: usize,
    /// Bytes of runs of pages that threads took from the page heap for their next spans, a
    /// few at a time (at most 256 KiB per thread; given back at thread exit and by
    /// `collect()`). Counted in [`Stats::pages_in_use`], as the page heap counts them; they
    /// hold memory only where they were reused pages.
    pub reserved: usize,
    /// Times a thread took pages from the page heap, behind its one lock: the runs for new
    /// spans (several at a time, see [`Stats::reserved`]) and for medium objects.
    pub page_takes: u64,
    /// Highest `pages_in_use` seen so far.
    pub peak_in_use: usize,
    /// Bytes of free pages still resident, kept for reuse: dirty ones, and those advised with
    /// `MADV_FREE` ([`Stats::free_lazy`]), which the kernel may take at any time. At most
    /// what the recent peak of `pages_in_use` accounts for, plus a fragmentation slack of 8 MiB
    /// or half of `pages_in_use`, and after the page-return delays
    /// (see `PagePolicy`) at most 256 KiB or an eighth of `pages_in_use`, whichever is more.
    pub free_resident: usize,
    /// Of [`Stats::free_resident`], the bytes advised with `MADV_FREE`: they count in the
    /// process's RSS until the kernel takes them (under memory pressure) or they are returned
    /// with `MADV_DONTNEED` after the decommit delay.
    pub free_lazy: usize,
    /// Bytes of freed pages returned to the OS so far (`madvise`).
    pub returned_to_os: u64,
    /// Bytes of freed huge objects' pages kept resident for reuse (the huge heap's free runs
    /// that hold memory: dirty ones and those advised with `MADV_FREE`).
    pub large_cache_bytes: usize,
    /// The bound of [`Stats::large_cache_bytes`] at its last check: a quarter of the bytes in
    /// use by default, 4 MiB, or what the recent peak accounts for, whichever is most.
    pub large_cache_limit: usize,
    /// Of [`Stats::large_cache_bytes`], the bytes advised with `MADV_FREE`.
    pub large_free_lazy: usize,
    /// Bytes of the huge heap's free runs that are mapped but hold no memory (returned with
    /// `MADV_DONTNEED`, or never written): reused without new mappings, unmapped after the
    /// decommit delay.
    pub large_free_clean: usize,
    /// Freed mappings the OS refused to unmap (at `vm.max_map_count`, unmapping can fail):
    /// their pages went back with `MADV_DONTNEED`, their address space stays mapped. 0 in a
    /// healthy process.
    pub failed_unmaps: usize,
    /// Bytes the heap profiler maps for its table of sampled stacks (cargo feature
    /// `profiling`): one mapping of a fixed size made at the first sample, whose pages hold
    /// memory as stacks arrive; 0 before it and without the feature.
    pub profiler_bytes: usize,
    /// Per-class figures, indexed by class (index 0 unused).
    #[cfg_attr(feature = "serde", serde(with = "classes_serde"))]
    pub classes: [ClassStats; NUM_CLASSES],
}

/// Takes a snapshot of the allocator's statistics.
///
/// ```
/// let before = specalloc_runtime::stats();
/// let p = specalloc_runtime::alloc(core::alloc::Layout::new::<[u64; 3]>());
/// let after = specalloc_runtime::stats();
/// assert_eq!(after.classes[3].allocs, before.classes[3].allocs + 1);
/// // SAFETY: allocated above with this layout, freed once.
/// unsafe { specalloc_runtime::dealloc(p, core::alloc::Layout::new::<[u64; 3]>()) };
/// ```
pub fn stats() -> Stats {
    let mut classes = [ClassStats::default(); NUM_CLASSES];
    let mut remote = ORPHAN_REMOTE.load(Ordering::Relaxed);
    let (mut tiny_allocs, mut tiny_frees) =
        (0u64, ORPHAN_FREES[TINY_CLASS].load(Ordering::Relaxed));
    let mut threads = 0;
    let mut reserved_pages = 0;
    let mut h = heap::all_heaps();
    while !h.is_null() {
        // SAFETY: registry heaps are never freed; their counters are atomics.
        let hr = unsafe { &*h };
        if hr.active.load(Ordering::Relaxed) {
            threads += 1;
        }
        remote += hr.remote_frees.load(Ordering::Relaxed);
        reserved_pages += hr.reserve_pages.load(Ordering::Relaxed);
        tiny_allocs += hr.alloc_count(TINY_CLASS);
        tiny_frees += hr.frees[TINY_CLASS].load(Ordering::Relaxed);
        for (c, cs) in classes.iter_mut().enumerate().skip(1) {
            cs.allocs += hr.alloc_count(c);
            cs.frees += hr.frees[c].load(Ordering::Relaxed);
        }
        // SAFETY: `h` came from the registry.
        h = unsafe { heap::next_heap(h) };
    }
    let reserved = reserved_pages * crate::size_class::PAGE_SIZE;
    let mut s = Stats {
        bytes_in_use: 0,
        bytes_mapped: crate::os::MAPPED.load(Ordering::Relaxed),
        allocs: 0,
        frees: 0,
        remote_frees: remote,
        live_objects: 0,
        threads,
        large_objects: 0,
        large_bytes: LARGE_BYTES.load(Ordering::Relaxed),
        central_spans: heap::central_lens().iter().sum(),
        chunks: 0,
        free_pages: 0,
        pages_in_use: crate::stats::IN_USE_BYTES.load(Ordering::Relaxed)
            + crate::stats::HUGE_BYTES.load(Ordering::Relaxed),
        reserved,
        page_takes: crate::chunk::PAGE_TAKES.load(Ordering::Relaxed),
        peak_in_use: PEAK_IN_USE.load(Ordering::Relaxed),
        free_resident: crate::chunk::DIRTY_FREE_BYTES.load(Ordering::Relaxed),
        free_lazy: crate::chunk::LAZY_FREE_BYTES.load(Ordering::Relaxed),
        returned_to_os: crate::chunk::RETURNED_BYTES.load(Ordering::Relaxed),
        large_cache_bytes: crate::large::CACHE_BYTES.load(Ordering::Relaxed),
        large_cache_limit: crate::large::CACHE_LIMIT.load(Ordering::Relaxed),
        large_free_lazy: crate::large::LAZY_BYTES.load(Ordering::Relaxed),
        large_free_clean: crate::large::CLEAN_BYTES.load(Ordering::Relaxed),
        failed_unmaps: crate::os::FAILED_UNMAPS.load(Ordering::Relaxed),
        #[cfg(feature = "profiling")]
        profiler_bytes: crate::prof::table_bytes(),
        #[cfg(not(feature = "profiling"))]
        profiler_bytes: 0,
        tiny_allocs,
        tiny_frees,
        tiny_objects: tiny_allocs.saturating_sub(tiny_frees),
        tiny_spans: SPANS[TINY_CLASS].load(Ordering::Relaxed),
        heaps: heap::heaps_made(),
        classes,
    };
    for (c, cs) in s.classes.iter_mut().enumerate().skip(1) {
        cs.size = class_size(c);
        cs.frees += ORPHAN_FREES[c].load(Ordering::Relaxed);
        cs.live_objects = cs.allocs.saturating_sub(cs.frees);
        cs.spans = SPANS[c].load(Ordering::Relaxed);
        s.allocs += cs.allocs;
        s.frees += cs.frees;
        s.live_objects += cs.live_objects;
        s.bytes_in_use += cs.live_objects as usize * cs.size;
    }
    s.allocs += s.tiny_allocs;
    s.frees += s.tiny_frees;
    s.live_objects += s.tiny_objects;
    s.bytes_in_use += s.tiny_objects as usize * TINY_SIZE;
    let (la, lf) = (
        LARGE_ALLOCS.load(Ordering::Relaxed),
        LARGE_FREES.load(Ordering::Relaxed),
    );
    s.large_objects = la.saturating_sub(lf);
    s.allocs += la;
    s.frees += lf;
    s.live_objects += s.large_objects;
    s.bytes_in_use += s.large_bytes;
    let (chunks, free_pages) = crate::chunk::page_heap_totals();
    s.chunks = chunks;
    s.free_pages = free_pages;
    s
}

/// A byte count, printed in B, KiB, MiB or GiB with one decimal.
struct Bytes(u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 3] = ["KiB", "MiB", "GiB"];
        if self.0 < 1024 {
            return write!(f, "{} B", self.0);
        }
        let mut v = self.0 as f64 / 1024.0;
        let mut unit = 0;
        while v >= 1024.0 && unit + 1 < UNITS.len() {
            v /= 1024.0;
            unit += 1;
        }
        write!(f, "{v:.1} {}", UNITS[unit])
    }
}

/// A count, printed with thousands separators (`1,234,567`).
struct Count(u64);

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.0.to_string();
        let mut out = String::with_capacity(digits.len() + digits.len() / 3);
        for (i, d) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(d);
        }
        f.pad(&out)
    }
}

fn b(n: usize) -> Bytes {
    Bytes(n as u64)
}

fn n(n: impl Into<u64>) -> Count {
    Count(n.into())
}

/// Human-readable: sizes in B, KiB, MiB or GiB with one decimal, counts with thousands
/// separators, then one line per size class that was used.
///
/// ```
/// let s = specalloc_runtime::stats().to_string();
/// assert!(s.starts_with("in use "));
/// assert!(s.contains("mapped"));
/// ```
impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "in use {}, mapped {}; live objects {}, allocs {}, frees {} ({} remote); threads {}",
            b(self.bytes_in_use),
            b(self.bytes_mapped),
            n(self.live_objects),
            n(self.allocs),
            n(self.frees),
            n(self.remote_frees),
            n(self.threads as u64)
        )?;
        writeln!(
            f,
            "large: {} objects, {}; chunks {}, free pages {}, central spans {}; page takes {}, reserved for new spans {}",
            n(self.large_objects),
            b(self.large_bytes),
            n(self.chunks as u64),
            n(self.free_pages as u64),
            n(self.central_spans as u64),
            n(self.page_takes),
            b(self.reserved)
        )?;
        writeln!(
            f,
            "pages in use {} (peak {}), free resident {} ({} MADV_FREE), returned to OS {}, large free resident {} (limit {}, {} MADV_FREE), large free mapped clean {}",
            b(self.pages_in_use),
            b(self.peak_in_use),
            b(self.free_resident),
            b(self.free_lazy),
            Bytes(self.returned_to_os),
            b(self.large_cache_bytes),
            b(self.large_cache_limit),
            b(self.large_free_lazy),
            b(self.large_free_clean)
        )?;
        if self.profiler_bytes > 0 {
            writeln!(f, "heap profiler's table: {}", b(self.profiler_bytes))?;
        }
        if self.failed_unmaps > 0 {
            writeln!(
                f,
                "mappings the OS refused to unmap: {} (at vm.max_map_count; memory returned)",
                n(self.failed_unmaps as u64)
            )?;
        }
        writeln!(
            f,
            "tiny: {} objects ({} spans), allocs {}, frees {}; heaps made {}",
            n(self.tiny_objects),
            n(self.tiny_spans as u64),
            n(self.tiny_allocs),
            n(self.tiny_frees),
            n(self.heaps as u64)
        )?;
        writeln!(
            f,
            "{:>5} {:>6} {:>13} {:>7} {:>15} {:>15}",
            "class", "size", "live", "spans", "allocs", "frees"
        )?;
        for (c, cs) in self.classes.iter().enumerate().skip(1) {
            if cs.allocs == 0 && cs.spans == 0 {
                continue;
            }
            writeln!(
                f,
                "{:>5} {:>6} {:>13} {:>7} {:>15} {:>15}",
                c,
                cs.size,
                n(cs.live_objects),
                n(cs.spans as u64),
                n(cs.allocs),
                n(cs.frees)
            )?;
        }
        Ok(())
    }
}

#[cfg(feature = "serde")]
mod classes_serde {
    //! `classes` as a sequence: serde derives arrays only up to 32 elements.

    use super::{ClassStats, NUM_CLASSES};
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(
        classes: &[ClassStats; NUM_CLASSES],
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(classes.iter())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<[ClassStats; NUM_CLASSES], D::Error> {
        let v = Vec::<ClassStats>::deserialize(d)?;
        let len = v.len();
        v.try_into()
            .map_err(|_| D::Error::invalid_length(len, &"one entry per size class (68)"))
    }
}

#[cfg(test)]
mod tests {
    use super::{Bytes, Count};

    #[test]
    fn bytes_and_counts_print_human_readable() {
        let cases = [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (1536, "1.5 KiB"),
            (21_233_664, "20.2 MiB"),
            (3 << 30, "3.0 GiB"),
            (5 << 40, "5120.0 GiB"),
        ];
        for (v, want) in cases {
            assert_eq!(Bytes(v).to_string(), want);
        }
        let counts = [
            (0, "0"),
            (999, "999"),
            (1000, "1,000"),
            (123_456, "123,456"),
            (1_234_567, "1,234,567"),
        ];
        for (v, want) in counts {
            assert_eq!(Count(v).to_string(), want);
        }
        assert_eq!(format!("{:>7}", Count(1000)), "  1,000");
    }
}
