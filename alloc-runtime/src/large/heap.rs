//! The huge heap: the free runs of pages that huge objects are carved from.
//!
//! A huge object is a run of OS pages (its header page, then the object) taken from memory the
//! allocator already holds when it can: freed huge objects become *free runs* (extents), kept
//! sorted by address and merged with their neighbours, and a new huge object takes a window of
//! contiguous free runs (of any length: a run is split, and neighbouring runs are taken
//! together) whose object start is a multiple of the object's alignment. Only when no window
//! fits is a new mapping made, of the object's own size; growing objects extend into the free
//! runs behind them ([`extend`]), shrinking ones give their tail back ([`put`]).
//!
//! Freed runs decay like the page heap's free pages (`chunk/decay.rs`), by age instead of by
//! tick bits (`decay.rs`):
//!
//! - *dirty* (resident, as freed) runs that stayed free for the purge delay are advised with
//!   `MADV_FREE` (*lazy*) while the dirty bytes exceed the lasting bound (4 MiB or an eighth
//!   of the bytes in use);
//! - lazy runs that stayed so for the decommit delay go back with `MADV_DONTNEED` (*clean*:
//!   mapped, not resident, reading zero);
//! - clean runs that stayed so for the decommit delay are unmapped, so address space and the
//!   kernel's commit charge go back too, in the large units the runs have merged into;
//! - the resident free runs (dirty and lazy) never exceed the bound of `decay::cache_limit`: a
//!   fraction (all, by default) of the bytes in use, 4 MiB, or what the recent peak of the
//!   bytes in use accounts for, with room for the fragmentation seen (up to a quarter of the
//!   peak, `chunk::peak_footprint`), whichever is most; past it, the excess goes back at once
//!   (`MADV_DONTNEED`) from the end of the longest run (whole runs while the excess is longer).
//!
//! A window is chosen for the resident memory it covers (most first), so a replaced buffer
//! lands on pages that are already mapped and resident instead of faulting fresh ones in.

use core::sync::atomic::Ordering;

use super::decay::{maintain, CACHE_BYTES, CLEAN_BYTES, LAZY_BYTES};
use crate::chunk::RETURNED_BYTES;
use crate::lock::SpinLock;
use crate::os;

/// The state of a free run's pages.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum State {
    /// Mapped, not resident: read zero.
    Clean,
    /// Advised with `MADV_FREE`: resident until the kernel takes them; read zero or old data.
    Lazy,
    /// Resident, as freed.
    Dirty,
}

impl State {
    /// The state's index in [`HugeHeap::oldest`].
    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// A free run of pages `[start, start + len)`, in its state since `since` (monotonic ns).
#[derive(Clone, Copy)]
pub(super) struct Extent {
    pub(super) start: usize,
    pub(super) len: usize,
    pub(super) state: State,
    pub(super) since: u64,
}

impl Extent {
    const EMPTY: Extent = Extent {
        start: 0,
        len: 0,
        state: State::Clean,
        since: 0,
    };

    pub(super) fn end(&self) -> usize {
        self.start + self.len
    }
}

/// Free runs kept at most; a run freed into a full table goes back to the OS at once.
pub(super) const MAX_EXTENTS: usize = 256;

pub(super) struct HugeHeap {
    /// The free runs, sorted by address, none overlapping; neighbours in the same state merged.
    pub(super) ext: [Extent; MAX_EXTENTS],
    pub(super) n: usize,
    /// Bytes of free runs in each state.
    pub(super) dirty: usize,
    pub(super) lazy: usize,
    pub(super) clean: usize,
    /// Highest bytes in use of the current recent-peak window.
    pub(super) peak_cur: usize,
    /// Highest bytes in use of the previous window.
    pub(super) peak_prev: usize,
    /// Bytes of huge runs placed, in the current window, on pages that were not resident
    /// while the free runs held enough resident bytes for them (too fragmented, or not at the
    /// alignment asked for): the fragmentation the resident bound leaves room for.
    pub(super) misfit_cur: usize,
    /// The same, in the previous window.
    pub(super) misfit_prev: usize,
    /// For each state (indexed by [`State::index`]), at most the `since` of every free run in
    /// that state (`u64::MAX` when none was seen since the last count): the decay's passes
    /// over the runs are skipped until the oldest may be due.
    pub(super) oldest: [u64; 3],
    /// When the window moves on (monotonic ns; 0 until the first check).
    pub(super) next_window: u64,
}

static HEAP: SpinLock<HugeHeap> = SpinLock::new(HugeHeap {
    ext: [Extent::EMPTY; MAX_EXTENTS],
    n: 0,
    dirty: 0,
    lazy: 0,
    clean: 0,
    peak_cur: 0,
    peak_prev: 0,
    misfit_cur: 0,
    misfit_prev: 0,
    oldest: [u64::MAX; 3],
    next_window: 0,
});

/// Whether a thread holds the huge heap's lock now (a racy look, for the heap profiler: see
/// `large::alloc_sampled`).
#[cfg(feature = "profiling")]
pub(super) fn busy() -> bool {
    HEAP.is_held()
}

/// The age a merged run takes: the longer part's (a few pages freed beside a long run that
/// has aged do not make it young again, which would keep it from ever decaying while they
/// come and go).
fn age_of(a: Extent, b: Extent) -> u64 {
    if a.len >= b.len {
        a.since
    } else {
        b.since
    }
}

impl HugeHeap {
    pub(super) fn count(&mut self, state: State, bytes: usize, add: bool) {
        let c = match state {
            State::Clean => &mut self.clean,
            State::Lazy => &mut self.lazy,
            State::Dirty => &mut self.dirty,
        };
        if add {
            *c += bytes;
        } else {
            *c -= bytes;
        }
    }

    pub(super) fn publish(&self) {
        CACHE_BYTES.store(self.dirty + self.lazy, Ordering::Relaxed);
        LAZY_BYTES.store(self.lazy, Ordering::Relaxed);
        CLEAN_BYTES.store(self.clean, Ordering::Relaxed);
    }

    /// Index of the first run ending after `addr`.
    pub(super) fn index_after(&self, addr: usize) -> usize {
        self.ext[..self.n].partition_point(|e| e.end() <= addr)
    }

    pub(super) fn remove(&mut self, i: usize) {
        let e = self.ext[i];
        self.count(e.state, e.len, false);
        self.ext.copy_within(i + 1..self.n, i);
        self.n -= 1;
    }

    /// Inserts a free run at its place, merging it with neighbours in the same state; `false`
    /// (nothing changed) when the table is full and no neighbour takes it.
    pub(super) fn insert(&mut self, e: Extent) -> bool {
        let i = self.index_after(e.start);
        debug_assert!(
            i == self.n || self.ext[i].start >= e.end(),
            "free run overlaps"
        );
        let left = i > 0 && self.ext[i - 1].end() == e.start && self.ext[i - 1].state == e.state;
        let right = i < self.n && self.ext[i].start == e.end() && self.ext[i].state == e.state;
        self.count(e.state, e.len, true);
        let oldest = &mut self.oldest[e.state.index()];
        *oldest = (*oldest).min(e.since);
        match (left, right) {
            (true, true) => {
                let r = self.ext[i];
                let l = &mut self.ext[i - 1];
                let since = age_of(*l, e);
                let merged = Extent {
                    len: l.len + e.len,
                    since,
                    ..*l
                };
                l.since = age_of(merged, r);
                l.len += e.len + r.len;
                self.ext.copy_within(i + 1..self.n, i);
                self.n -= 1;
            }
            (true, false) => {
                let l = &mut self.ext[i - 1];
                l.since = age_of(*l, e);
                l.len += e.len;
            }
            (false, true) => {
                let r = &mut self.ext[i];
                r.since = age_of(*r, e);
                r.start = e.start;
                r.len += e.len;
            }
            (false, false) => {
                if self.n == MAX_EXTENTS {
                    self.count(e.state, e.len, false);
                    return false;
                }
                self.ext.copy_within(i..self.n, i + 1);
                self.ext[i] = e;
                self.n += 1;
            }
        }
        true
    }

    /// Takes `[start, start + len)`, which lies in contiguous free runs, out of them; returns
    /// whether all of it was clean (reads zero). Needs room for one more run in the table.
    fn carve(&mut self, start: usize, len: usize) -> bool {
        let end = start + len;
        let mut zero = true;
        let mut i = self.index_after(start);
        while i < self.n && self.ext[i].start < end {
            let e = self.ext[i];
            zero &= e.state == State::Clean;
            self.remove(i);
            if e.start < start {
                let left = Extent {
                    len: start - e.start,
                    ..e
                };
                let ok = self.insert(left);
                debug_assert!(ok);
                i += 1;
            }
            if e.end() > end {
                let right = Extent {
                    start: end,
                    len: e.end() - end,
                    ..e
                };
                let ok = self.insert(right);
                debug_assert!(ok);
                break;
            }
        }
        zero
    }

    /// Resident bytes of the free runs inside `[start, end)`.
    fn resident_in(&self, from: usize, start: usize, end: usize) -> usize {
        self.ext[from..self.n]
            .iter()
            .take_while(|e| e.start < end)
            .filter(|e| e.state != State::Clean && e.end() > start)
            .map(|e| e.end().min(end) - e.start.max(start))
            .sum()
    }

    /// The best window of `len` bytes in contiguous free runs whose start plus `offset` is a
    /// multiple of `align`: the one covering the most resident bytes, then the one in the
    /// shortest stretch of free runs (to leave long stretches for long objects).
    fn find(&self, len: usize, align: usize, offset: usize) -> Option<usize> {
        let mut best: Option<(usize, usize, usize)> = None; // (start, resident, stretch)
        let mut g = 0;
        while g < self.n {
            // The stretch [g, h): contiguous runs.
            let mut h = g + 1;
            while h < self.n && self.ext[h].start == self.ext[h - 1].end() {
                h += 1;
            }
            let (gs, ge) = (self.ext[g].start, self.ext[h - 1].end());
            if ge - gs >= len {
                for i in g..h {
                    let Some(s) = (self.ext[i].start + offset)
                        .checked_next_multiple_of(align)
                        .map(|a| a - offset)
                    else {
                        break;
                    };
                    if s.checked_add(len).is_none_or(|e| e > ge) {
                        break;
                    }
                    let res = self.resident_in(i, s, s + len);
                    let better =
                        best.is_none_or(|(_, r, st)| res > r || (res == r && ge - gs < st));
                    if better {
                        best = Some((s, res, ge - gs));
                    }
                }
            }
            g = h;
        }
        best.map(|(s, _, _)| s)
    }

    /// When no window fits: maps fresh pages right after or right before a stretch of free
    /// runs (the one holding the most resident bytes first, a few tried), so that a window of
    /// `len` bytes (see [`HugeHeap::find`]) covers the stretch's resident pages and only the
    /// rest is new. Returns the window's start.
    fn grow_stretch(&mut self, len: usize, align: usize, offset: usize) -> Option<usize> {
        if self.n + 1 >= MAX_EXTENTS {
            return None;
        }
        let mut tried = [usize::MAX; 3];
        for t in 0..tried.len() {
            // The stretch with the most resident bytes not tried yet: (first run, end).
            let mut best: Option<(usize, usize, usize)> = None;
            let mut g = 0;
            while g < self.n {
                let mut h = g + 1;
                while h < self.n && self.ext[h].start == self.ext[h - 1].end() {
                    h += 1;
                }
                let res = self.resident_in(g, self.ext[g].start, self.ext[h - 1].end());
                if !tried.contains(&g) && best.is_none_or(|(_, _, r)| res > r) {
                    best = Some((g, h, res));
                }
                g = h;
            }
            let (g, h, _) = best?;
            tried[t] = g;
            let (gs, ge) = (self.ext[g].start, self.ext[h - 1].end());
            // Upward: the window from the stretch's first aligned start, fresh pages past it.
            let up = (gs + offset).checked_next_multiple_of(align)? - offset;
            let up_end = up.checked_add(len)?;
            // Downward: the window ending at the stretch's end (or the last aligned start
            // before that), fresh pages before it.
            let mut tries = [(up, ge, up_end.saturating_sub(ge)), (0, 0, 0)];
            if let Some(down) =
                ((ge.checked_sub(len)? + offset) / align * align).checked_sub(offset)
            {
                tries[1] = (down, down, gs.saturating_sub(down));
            }
            for (start, new_at, new_len) in tries {
                if new_len == 0 {
                    continue;
                }
                if os::map_at(new_at, new_len) {
                    let ok = self.insert(Extent {
                        start: new_at,
                        len: new_len,
                        state: State::Clean,
                        since: os::monotonic_ns(),
                    });
                    if !ok {
                        // SAFETY: just mapped by us; nothing uses it.
                        unsafe { os::release(new_at as *mut u8, new_len) };
                        return None;
                    }
                    return Some(start);
                }
            }
        }
        None
    }

    /// Gives the free run at `i` back: unmapped, or (when the kernel refuses to split a mapping
    /// at `vm.max_map_count`) dropped and kept as clean. Returns the bytes unmapped.
    pub(super) fn unmap_run(&mut self, i: usize) -> usize {
        let e = self.ext[i];
        // SAFETY: a free run is pages of our mappings that nothing uses.
        if unsafe { os::unmap(e.start as *mut u8, e.len) } {
            self.remove(i);
            return e.len;
        }
        self.decommit_run(i);
        0
    }

    /// Drops the pages of the free run at `i` (`MADV_DONTNEED`): it becomes clean. Left as it
    /// is when the kernel refuses.
    pub(super) fn decommit_run(&mut self, i: usize) {
        let e = self.ext[i];
        if e.state == State::Clean {
            return;
        }
        // SAFETY: a free run is pages of our mappings that nothing uses.
        if unsafe { os::decommit(e.start as *mut u8, e.len) } {
            RETURNED_BYTES.fetch_add(e.len as u64, Ordering::Relaxed);
            self.relabel(i, State::Clean);
        }
    }

    /// Puts the free run at `i` in `state` (its pages already are), and merges it.
    pub(super) fn relabel(&mut self, i: usize, state: State) {
        let e = self.ext[i];
        self.remove(i);
        let ok = self.insert(Extent {
            state,
            since: os::monotonic_ns(),
            ..e
        });
        debug_assert!(ok, "a run taken out has room to go back");
    }

    /// Counts again, for `state`, the oldest `since` of its runs ([`HugeHeap::oldest`]).
    pub(super) fn recount_oldest(&mut self, state: State) {
        self.oldest[state.index()] = self.ext[..self.n]
            .iter()
            .filter(|e| e.state == state)
            .map(|e| e.since)
            .min()
            .unwrap_or(u64::MAX);
    }

    /// Applies `step` to the runs `pick` selects, highest address first, until `done`.
    pub(super) fn each(
        &mut self,
        pick: impl Fn(&Extent) -> bool,
        mut step: impl FnMut(&mut HugeHeap, usize),
        done: impl Fn(&HugeHeap) -> bool,
    ) {
        let mut i = self.n;
        while i > 0 && !done(self) {
            i -= 1;
            if i < self.n && pick(&self.ext[i]) {
                step(self, i);
            }
        }
    }
}

/// Takes a window of `len` bytes from the free runs whose address plus `offset` is a multiple
/// of `align`; returns its start and whether it reads zero.
pub(super) fn take(len: usize, align: usize, offset: usize) -> Option<(usize, bool)> {
    let _errno = os::KeepErrno::new();
    let mut h = HEAP.lock();
    if h.n == 0 {
        return None;
    }
    if h.n == MAX_EXTENTS {
        // Room for the split below: the lowest run goes back to the OS.
        if h.unmap_run(0) == 0 {
            return None;
        }
    }
    let resident = h.dirty + h.lazy;
    let start = match h.find(len, align, offset) {
        Some(start) => start,
        None => match h.grow_stretch(len, align, offset) {
            Some(start) => start,
            None => {
                // A fresh mapping follows, though the free runs held as many resident bytes.
                if resident >= len {
                    h.misfit_cur += len;
                }
                return None;
            }
        },
    };
    if resident >= len {
        let covered = h.resident_in(h.index_after(start), start, start + len);
        h.misfit_cur += len - covered;
    }
    let zero = h.carve(start, len);
    maintain(&mut h);
    Some((start, zero))
}

/// Extends a huge object's run `[.., end)` by `more` bytes from the free runs right behind it;
/// `false` (nothing changed) when they are not free.
pub(super) fn extend(end: usize, more: usize) -> bool {
    let _errno = os::KeepErrno::new();
    let mut h = HEAP.lock();
    let i = h.index_after(end);
    let mut reach = end;
    let mut j = i;
    while j < h.n && h.ext[j].start == reach && reach - end < more {
        reach = h.ext[j].end();
        j += 1;
    }
    if reach - end < more {
        return false;
    }
    // (The runs taken start at `end`: carving them leaves at most one run behind, in the
    // place of one taken, so the table needs no room.)
    h.carve(end, more);
    maintain(&mut h);
    true
}

/// Frees the run `[start, start + len)` (a huge object's, or the tail of one), written pages.
pub(super) fn put(start: usize, len: usize) {
    let _errno = os::KeepErrno::new();
    let mut h = HEAP.lock();
    let e = Extent {
        start,
        len,
        state: State::Dirty,
        since: os::monotonic_ns(),
    };
    if !h.insert(e) {
        drop(h);
        // SAFETY: the run is ours and nothing uses it; the table has no room to keep it.
        unsafe { os::release(start as *mut u8, len) };
        return;
    }
    maintain(&mut h);
}

/// Runs the decay policy's clock (the background purge, `collect`'s neighbours).
pub(crate) fn cache_trim() {
    let mut h = HEAP.lock();
    if h.n > 0 {
        maintain(&mut h);
    }
}

/// Unmaps every free run (called when the OS refuses a mapping, and by `collect()`); returns
/// the bytes unmapped.
///
/// Takes the huge heap's lock: the caller must hold no lock that is ever taken while it is held
/// (the page heap's lock included, since the fork handlers take this one first).
pub(crate) fn release_cache() -> usize {
    let _errno = os::KeepErrno::new();
    let mut h = HEAP.lock();
    let mut bytes = 0;
    h.each(|_| true, |h, i| bytes += h.unmap_run(i), |_| false);
    h.publish();
    bytes
}

/// Holds or releases the huge heap's lock around `fork` (see `heap::fork_*`).
pub(super) fn fork_lock(take: bool) {
    if take {
        HEAP.raw_lock();
    } else {
        // SAFETY: called by the thread that took it in the fork's prepare handler.
        unsafe { HEAP.raw_unlock() };
    }
}
