//! The huge heap's decay: the bound of its resident free runs (and the recent-peak window
//! behind it), and the clock that advises, returns and unmaps free runs by age (see `heap.rs`).

use core::sync::atomic::{AtomicUsize, Ordering};

use super::heap::{Extent, HugeHeap, State, MAX_EXTENTS};
use crate::chunk::RETURNED_BYTES;
use crate::os;
use crate::stats::{HUGE_BYTES, IN_USE_BYTES};

/// Bytes of free runs still resident as far as the allocator knows (dirty and lazy).
pub(crate) static CACHE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// The bound of [`CACHE_BYTES`] at its last check.
pub(crate) static CACHE_LIMIT: AtomicUsize = AtomicUsize::new(0);
/// Bytes of free runs advised with `MADV_FREE` (part of [`CACHE_BYTES`]).
pub(crate) static LAZY_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Bytes of free runs mapped but not resident (they read zero).
pub(crate) static CLEAN_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Highest bytes in use seen by a huge allocation in the current window (the heap's lock is
/// not taken there; [`cache_limit`] folds it in).
static WINDOW_PEAK: AtomicUsize = AtomicUsize::new(0);
/// The bound, in percent of the bytes in use; `usize::MAX` until first read.
static CACHE_PERCENT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Default bound of the huge heap's resident free runs, in percent of the bytes in use.
pub const DEFAULT_CACHE_PERCENT: usize = 100;

/// The resident free runs may always hold this many bytes (unless the bound is 0), so that a
/// small program that frees and allocates a buffer of a few MiB in turn reuses its pages.
pub const CACHE_FLOOR: usize = 4 << 20;

/// Sets the bound of the resident free runs, in percent of the bytes in use (0: freed huge
/// objects go back at once). Also settable with `SPECALLOC_LARGE_CACHE_PERCENT`.
pub(crate) fn set_cache_percent(percent: usize) {
    CACHE_PERCENT.store(percent, Ordering::Relaxed);
}

fn cache_percent() -> usize {
    let p = CACHE_PERCENT.load(Ordering::Relaxed);
    if p != usize::MAX {
        return p;
    }
    let p = os::env_usize(c"SPECALLOC_LARGE_CACHE_PERCENT").unwrap_or(DEFAULT_CACHE_PERCENT);
    CACHE_PERCENT.store(p, Ordering::Relaxed);
    p
}

fn in_use() -> usize {
    IN_USE_BYTES.load(Ordering::Relaxed) + HUGE_BYTES.load(Ordering::Relaxed)
}

/// The bound of the resident free runs now (see the module docs); moves the recent-peak
/// window on when due.
fn cache_limit(h: &mut HugeHeap, now: u64) -> usize {
    let in_use = in_use();
    let percent = cache_percent();
    if percent == 0 {
        CACHE_LIMIT.store(0, Ordering::Relaxed);
        return 0;
    }
    h.peak_cur = h
        .peak_cur
        .max(in_use)
        .max(WINDOW_PEAK.swap(0, Ordering::Relaxed));
    let window = crate::policy::policy()
        .decommit_delay_ms
        .saturating_mul(1_000_000);
    if h.next_window == 0 {
        h.next_window = now.saturating_add(window);
    }
    h.next_window = h.next_window.min(now.saturating_add(window));
    if now >= h.next_window {
        h.peak_prev = h.peak_cur;
        h.peak_cur = in_use;
        h.misfit_prev = h.misfit_cur;
        h.misfit_cur = 0;
        h.next_window = now.saturating_add(window);
    }
    // What the recent peak accounts for, and room for the fragmentation seen in the recent
    // windows (runs placed on pages that were not resident though the free runs held enough
    // resident bytes), up to what the page heap allows for (a quarter of the peak): with none
    // seen, free runs past the peak go back (a program that grows its buffers with `mremap`
    // does not reuse them, and the quarter alone raised the suite's `grow` from 42.9 to
    // 49.3 MB peak RSS).
    let peak = h.peak_cur.max(h.peak_prev);
    let slack = (crate::chunk::peak_footprint(peak) - peak).min(h.misfit_cur + h.misfit_prev);
    let recent = (peak + slack).saturating_sub(in_use);
    let limit = (in_use / 100 * percent).max(CACHE_FLOOR).max(recent);
    CACHE_LIMIT.store(limit, Ordering::Relaxed);
    limit
}

/// Notes the bytes in use after a huge allocation, for the recent-peak window.
pub(super) fn note_peak(in_use: usize) {
    WINDOW_PEAK.fetch_max(in_use, Ordering::Relaxed);
}

impl HugeHeap {
    /// Returns resident free bytes (`MADV_DONTNEED`) until at most `limit` are left: lazy runs
    /// first (the kernel may have taken them already), then dirty ones, the longest first, and
    /// of a run longer than the excess only its tail. The excess comes off one long run's end,
    /// which a new object placed from the run's start reaches last, while the short runs
    /// between live objects stay whole for the next objects of their size (returning the
    /// shortest runs first instead took 1.5 times the page faults in the C `largeblocks`:
    /// 124k against 81k).
    fn trim_to(&mut self, limit: usize) {
        while self.dirty + self.lazy > limit {
            let excess = (self.dirty + self.lazy - limit).next_multiple_of(os::OS_PAGE);
            let pick = |state: State| {
                (0..self.n)
                    .filter(|&i| self.ext[i].state == state)
                    .max_by_key(|&i| self.ext[i].len)
            };
            let Some(i) = pick(State::Lazy).or_else(|| pick(State::Dirty)) else {
                return;
            };
            let e = self.ext[i];
            if e.len <= excess || self.n == MAX_EXTENTS {
                let before = self.dirty + self.lazy;
                self.decommit_run(i);
                if self.dirty + self.lazy == before {
                    return; // refused: left to the next operation
                }
                continue;
            }
            let tail = e.end() - excess;
            // SAFETY: the tail of a free run: pages of our mappings that nothing uses.
            if !unsafe { os::decommit(tail as *mut u8, excess) } {
                return;
            }
            RETURNED_BYTES.fetch_add(excess as u64, Ordering::Relaxed);
            self.remove(i);
            let head = Extent {
                len: e.len - excess,
                ..e
            };
            let clean = Extent {
                start: tail,
                len: excess,
                state: State::Clean,
                since: os::monotonic_ns(),
            };
            let ok = self.insert(head) && self.insert(clean);
            debug_assert!(ok, "a split run has room");
        }
    }
}

/// The decay policy's work after a huge-heap operation (see the module docs).
pub(super) fn maintain(h: &mut HugeHeap) {
    let now = os::monotonic_ns();
    let limit = cache_limit(h, now);
    let p = crate::policy::policy();
    let ms = 1_000_000u64;
    // While the kernel refuses to drop locked pages (`mlock`, `mlockall`), free runs are not
    // advised: they stay resident (dirty), counted so. (A pass goes on past a refused run:
    // the runs below it may not be locked.)
    if !os::pages_locked() {
        h.trim_to(limit);
    }
    // Dirty runs past the lasting bound that stayed free for the purge delay are advised.
    let lasting = CACHE_FLOOR.max(in_use() / 8);
    let purge_age = p.purge_delay_ms.saturating_mul(ms);
    let decommit_age = p.decommit_delay_ms.saturating_mul(ms);
    // (Each pass only when the oldest run in its state may be due.)
    let due =
        |h: &HugeHeap, state: State, age: u64| now.saturating_sub(h.oldest[state.index()]) >= age;
    if h.dirty > lasting && due(h, State::Dirty, purge_age) && !os::pages_locked() {
        h.each(
            |e| e.state == State::Dirty && now.saturating_sub(e.since) >= purge_age,
            |h, i| {
                if p.decommit_delay_ms == 0 {
                    return h.decommit_run(i);
                }
                let e = h.ext[i];
                // SAFETY: a free run is pages of our mappings that nothing uses.
                match unsafe { os::lazy_free(e.start as *mut u8, e.len) } {
                    Ok(()) => h.relabel(i, State::Lazy),
                    // A kernel without MADV_FREE, or locked pages (refused again then):
                    // decommit instead.
                    Err(libc::EINVAL) => h.decommit_run(i),
                    // Another refusal: the run stays dirty.
                    Err(_) => {}
                }
            },
            |h| h.dirty <= lasting / 2,
        );
        h.recount_oldest(State::Dirty);
    }
    // Lazy runs that stayed so for the decommit delay go back; clean ones are unmapped.
    if h.lazy > 0 && due(h, State::Lazy, decommit_age) && !os::pages_locked() {
        h.each(
            |e| e.state == State::Lazy && now.saturating_sub(e.since) >= decommit_age,
            |h, i| h.decommit_run(i),
            |h| h.lazy == 0,
        );
        h.recount_oldest(State::Lazy);
    }
    if h.clean > 0 && due(h, State::Clean, decommit_age) {
        h.each(
            |e| e.state == State::Clean && now.saturating_sub(e.since) >= decommit_age,
            |h, i| {
                h.unmap_run(i);
            },
            |h| h.clean == 0,
        );
        h.recount_oldest(State::Clean);
    }
    h.publish();
}
