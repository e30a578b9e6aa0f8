//! The cache of freed huge mappings.
//!
//! A freed huge mapping is kept for reuse while the cache stays within the larger of three
//! bounds, checked whenever a large object is freed or a huge one is allocated:
//!
//! - a fraction (a quarter by default) of the bytes in use, for good;
//! - 4 MiB ([`CACHE_FLOOR`]), so a small program that frees and allocates a buffer of a few MiB
//!   in turn reuses its mapping;
//! - what the recent peak of the bytes in use accounts for (the highest of the current and the
//!   previous window of the page policy's decommit delay, `PagePolicy::decommit_delay_ms`), so a
//!   program that drops its large buffers and grows them again reuses their resident pages
//!   instead of faulting fresh ones in; past the window, the mappings go back to the OS.
//!
//! A kept mapping is reused by a huge allocation that fits it with at most as much to spare as it
//! asks for (the smallest such mapping), and a huge object grows in place within its mapping.

use core::sync::atomic::{AtomicUsize, Ordering};

use crate::lock::SpinLock;
use crate::os;
use crate::stats::{HUGE_BYTES, IN_USE_BYTES};

const CACHE_SLOTS: usize = 16;

struct HugeCache {
    /// (mapping start, mapping length), oldest first.
    entries: [(usize, usize); CACHE_SLOTS],
    len: usize,
    /// Highest bytes in use of the current window.
    peak_cur: usize,
    /// Highest bytes in use of the previous window.
    peak_prev: usize,
    /// When the window moves on (monotonic ns; 0 until the first check).
    next_window: u64,
}

static CACHE: SpinLock<HugeCache> = SpinLock::new(HugeCache {
    entries: [(0, 0); CACHE_SLOTS],
    len: 0,
    peak_cur: 0,
    peak_prev: 0,
    next_window: 0,
});

/// Bytes of mappings in the cache.
pub(crate) static CACHE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// The cache's bound at its last check.
pub(crate) static CACHE_LIMIT: AtomicUsize = AtomicUsize::new(0);
/// Highest bytes in use seen by a huge allocation in the current window (the cache's lock is
/// not taken there; [`cache_limit`] folds it in).
static WINDOW_PEAK: AtomicUsize = AtomicUsize::new(0);
/// The cache's bound, in percent of the bytes in use; `usize::MAX` until first read.
static CACHE_PERCENT: AtomicUsize = AtomicUsize::new(usize::MAX);

/// Default bound of the huge-mapping cache, in percent of the bytes in use.
pub const DEFAULT_CACHE_PERCENT: usize = 25;

/// Sets the bound of the cache of freed huge mappings, in percent of the bytes in use (0 turns
/// the cache off). Also settable with the environment variable `SPECALLOC_LARGE_CACHE_PERCENT`.
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

/// The cache keeps at least this many bytes (unless it is turned off), so that a small program
/// that frees and allocates a buffer of a few MiB in turn reuses its mapping instead of mapping
/// and faulting it in each time.
pub const CACHE_FLOOR: usize = 4 << 20;

/// The cache's bound now (see the notes above); moves the recent-peak window on when due.
fn cache_limit(c: &mut HugeCache) -> usize {
    let in_use = IN_USE_BYTES.load(Ordering::Relaxed) + HUGE_BYTES.load(Ordering::Relaxed);
    let percent = cache_percent();
    if percent == 0 {
        CACHE_LIMIT.store(0, Ordering::Relaxed);
        return 0;
    }
    // The peak huge allocations saw since the last check (taken, so that none recorded in
    // between is lost when the window moves on).
    c.peak_cur = c
        .peak_cur
        .max(in_use)
        .max(WINDOW_PEAK.swap(0, Ordering::Relaxed));
    let now = os::monotonic_ns();
    let window = crate::policy::policy()
        .decommit_delay_ms
        .saturating_mul(1_000_000);
    if c.next_window == 0 {
        // The first check arms the window and keeps the peak seen so far.
        c.next_window = now.saturating_add(window);
    }
    // (A window armed under a longer delay than the one now set ends by the new delay.)
    c.next_window = c.next_window.min(now.saturating_add(window));
    if now >= c.next_window {
        c.peak_prev = c.peak_cur;
        c.peak_cur = in_use;
        c.next_window = now.saturating_add(window);
    }
    let recent = c.peak_cur.max(c.peak_prev).saturating_sub(in_use);
    let limit = (in_use / 100 * percent).max(CACHE_FLOOR).max(recent);
    CACHE_LIMIT.store(limit, Ordering::Relaxed);
    limit
}

/// Evicts the oldest mappings until the cache holds at most `limit - room` bytes; returns the
/// evicted mappings' count written into `out`.
fn evict(
    c: &mut HugeCache,
    limit: usize,
    room: usize,
    out: &mut [(usize, usize); CACHE_SLOTS],
) -> usize {
    let mut n = 0;
    let mut bytes = CACHE_BYTES.load(Ordering::Relaxed);
    while c.len > 0 && (bytes + room > limit || (room > 0 && c.len == CACHE_SLOTS)) {
        out[n] = c.entries[0];
        n += 1;
        bytes -= c.entries[0].1;
        c.entries.copy_within(1..c.len, 0);
        c.len -= 1;
    }
    CACHE_BYTES.store(bytes, Ordering::Relaxed);
    n
}

fn unmap_all(list: &[(usize, usize)]) {
    for &(base, len) in list {
        // SAFETY: evicted mappings are whole mappings of ours and hold nothing live.
        unsafe { os::release(base as *mut u8, len) };
    }
}

/// Keeps a freed huge mapping if the bound allows, else unmaps it. Trims the cache to the bound.
pub(super) fn cache_put(base: usize, len: usize) {
    let mut evicted = [(0, 0); CACHE_SLOTS];
    let (n, keep) = {
        let mut c = CACHE.lock();
        let limit = cache_limit(&mut c);
        let keep = len <= limit;
        let n = evict(&mut c, limit, if keep { len } else { 0 }, &mut evicted);
        if keep {
            let i = c.len;
            c.entries[i] = (base, len);
            c.len += 1;
            CACHE_BYTES.fetch_add(len, Ordering::Relaxed);
        }
        (n, keep)
    };
    unmap_all(&evicted[..n]);
    if !keep {
        // SAFETY: the mapping is a whole one of ours and holds nothing live.
        unsafe { os::release(base as *mut u8, len) };
    }
}

/// Trims the cache to its bound (after in-use bytes dropped, or on the background purge's
/// clock: the recent-peak window moves on when due).
pub(crate) fn cache_trim() {
    if CACHE_BYTES.load(Ordering::Relaxed) == 0 {
        return;
    }
    let mut evicted = [(0, 0); CACHE_SLOTS];
    let n = {
        let mut c = CACHE.lock();
        let limit = cache_limit(&mut c);
        evict(&mut c, limit, 0, &mut evicted)
    };
    unmap_all(&evicted[..n]);
}

/// Gives every cached mapping back to the OS (called when the OS refuses a mapping); returns the
/// bytes given back.
///
/// Takes the cache's lock: the caller must hold no lock that is ever taken while the cache's lock
/// is held (the page heap's lock included, since the fork handlers take the cache's first).
pub(crate) fn release_cache() -> usize {
    if CACHE_BYTES.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    let mut evicted = [(0, 0); CACHE_SLOTS];
    let n = evict(&mut CACHE.lock(), 0, 0, &mut evicted);
    unmap_all(&evicted[..n]);
    evicted[..n].iter().map(|&(_, len)| len).sum()
}

/// The index of the smallest cached mapping of `need` to `need + spare` bytes whose start
/// satisfies `base_ok`.
fn cache_fit(
    c: &HugeCache,
    need: usize,
    spare: usize,
    base_ok: impl Fn(usize) -> bool,
) -> Option<usize> {
    (0..c.len)
        .filter(|&i| {
            let (base, len) = c.entries[i];
            len >= need && len - need <= spare && base_ok(base)
        })
        .min_by_key(|&i| c.entries[i].1)
}

/// Takes the smallest cached mapping of `need` to `need + spare` bytes whose start satisfies
/// `base_ok`.
pub(super) fn cache_take_where(
    need: usize,
    spare: usize,
    base_ok: impl Fn(usize) -> bool,
) -> Option<(usize, usize)> {
    if CACHE_BYTES.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let mut c = CACHE.lock();
    let i = cache_fit(&c, need, spare, base_ok)?;
    let e = c.entries[i];
    let len = c.len;
    c.entries.copy_within(i + 1..len, i);
    c.len -= 1;
    CACHE_BYTES.fetch_sub(e.1, Ordering::Relaxed);
    Some(e)
}

/// Takes the smallest cached mapping of `need` to `2 × need` bytes.
pub(super) fn cache_take(need: usize) -> Option<(usize, usize)> {
    cache_take_where(need, need, |_| true)
}

/// Whether the cache holds a mapping [`cache_take`] would hand out for `need` bytes (another
/// thread may take it first).
pub(super) fn cache_has(need: usize) -> bool {
    CACHE_BYTES.load(Ordering::Relaxed) != 0
        && cache_fit(&CACHE.lock(), need, need, |_| true).is_some()
}

/// Notes the bytes in use after a huge allocation, for the recent-peak window (the cache's lock
/// is not taken there; [`cache_limit`] folds it in).
pub(super) fn note_peak(in_use: usize) {
    WINDOW_PEAK.fetch_max(in_use, Ordering::Relaxed);
}

/// Holds or releases the cache lock around `fork` (see `heap::fork_*`).
pub(super) fn fork_lock(take: bool) {
    if take {
        CACHE.raw_lock();
    } else {
        // SAFETY: called by the thread that took it in the fork's prepare handler.
        unsafe { CACHE.raw_unlock() };
    }
}
