//! The page heap's page-return work (the policy is described in `policy.rs`): the recent-peak
//! bound and the purge and decommit ticks after each page-heap operation, and the sweeps that
//! advise runs of free pages (`MADV_FREE`, `MADV_DONTNEED`) and keep the page bits and counters
//! in step. Everything here runs under the page-heap lock.

use core::sync::atomic::{AtomicBool, Ordering};

use super::{
    clear_all, count_set, retain_limit, set_range, slot, Chunk, PageHeap, DESC_PER_PAGE,
    HEADER_PAGES, MS, PAGES_PER_CHUNK, PAGE_HEAP, RETURNED_BYTES,
};
use crate::os;
use crate::policy::policy;
use crate::size_class::PAGE_SIZE;

/// Free pages kept resident however young, beyond what the recent peak accounts for: 8 MiB or
/// half the pages in use, whichever is more. Free pages too fragmented for the runs asked for
/// (so that new pages were taken beside them) are left to the clock up to this much; a bound of
/// an eighth instead (the lasting bound) returned them at once and faulted them in again soon
/// after, doubling the page faults of the suite's `syn` program (4,000 against 1,640).
fn pressure_slack(in_use: usize) -> usize {
    ((8 << 20) / PAGE_SIZE).max(in_use / 2)
}

/// The most resident footprint (in use and free) that a recent peak of `peak` in use accounts
/// for: the peak and a quarter of it, for the free runs that fragmentation leaves between the
/// runs in use while the program churns below its peak; the quarter only as far as the
/// fragmentation seen in the recent windows calls for it (the misplaced pages counted by the
/// heaps). Holding the footprint at the peak alone returned, at once, pages that the next runs
/// faulted in again: the C `largeblocks` (blocks of 64 KiB to 4 MiB replaced at random) took 8
/// times mimalloc's page faults that way.
pub(crate) fn peak_footprint(peak: usize) -> usize {
    peak + peak / 4
}

/// The page-return policy's work after a page-heap operation (see the module's policy notes):
/// the recent-peak bound at once, then the purge and decommit ticks when they are due.
pub(super) fn maintain(ph: &mut PageHeap) {
    let lasting = retain_limit(ph.in_use);
    let p = policy();
    // The recent-peak bound: free memory that neither the program's recent peak (with room for
    // the fragmentation seen in the recent windows, up to a quarter of the peak) nor the slack
    // accounts for goes back at once, lazy pages first (the kernel may have taken some of them
    // already).
    let peak = ph.recent_peak();
    let slack = (peak_footprint(peak) - peak).min(ph.misfit_cur + ph.misfit_prev);
    let bound = pressure_slack(ph.in_use).max(peak + slack - ph.in_use);
    if ph.dirty_free + ph.lazy_free > bound {
        // Down to three quarters of the bound, so that a heap at its peak does not sweep (from
        // the first chunk) for a few pages on every operation.
        let target = bound - bound / 4;
        if ph.lazy_free > 0 {
            sweep(
                ph,
                Step::Decommit,
                |c, w| c.free_bits[w].get() & c.lazy_bits[w].get(),
                |ph| ph.lazy_free == 0 || ph.dirty_free + ph.lazy_free <= target,
            );
        }
        sweep(
            ph,
            Step::Decommit,
            |c, w| c.free_bits[w].get() & c.dirty_bits[w].get() & !c.lazy_bits[w].get(),
            |ph| ph.dirty_free + ph.lazy_free <= target,
        );
    }
    let now = os::monotonic_ns();
    // (Saturating: a delay of years is a delay that never comes.)
    let purge_at = now.saturating_add(p.purge_delay_ms.saturating_mul(MS));
    let decommit_at = now.saturating_add(p.decommit_delay_ms.saturating_mul(MS));
    // (Ticks armed under longer delays than the ones now set come due by the new delays.)
    ph.next_purge = ph.next_purge.min(purge_at);
    ph.next_decommit = ph.next_decommit.min(decommit_at);
    // Dirty pages past the lasting bound that stayed free for a whole purge period are
    // advised (`MADV_FREE`, or `MADV_DONTNEED` straight away with no decommit delay).
    if ph.dirty_free > lasting {
        let step = if p.decommit_delay_ms == 0 {
            Step::Decommit
        } else {
            Step::Purge
        };
        if p.purge_delay_ms == 0 {
            sweep(
                ph,
                step,
                |c, w| c.free_bits[w].get() & c.dirty_bits[w].get() & !c.lazy_bits[w].get(),
                |ph| ph.dirty_free <= lasting / 2,
            );
        } else if ph.next_purge == 0 {
            ph.next_purge = purge_at;
        } else if now >= ph.next_purge {
            // Pages free since before the last tick go; then every free page ages.
            sweep(
                ph,
                step,
                |c, w| {
                    c.free_bits[w].get()
                        & c.dirty_bits[w].get()
                        & !c.lazy_bits[w].get()
                        & !c.young_bits[w].get()
                },
                |ph| ph.dirty_free <= lasting / 2,
            );
            for_each_chunk(ph, |c| clear_all(&c.young_bits));
            ph.next_purge = purge_at;
        }
    }
    // Every decommit period: pages lazy since before the last one go back, and the window of
    // the recent peak moves on.
    if ph.next_decommit == 0 {
        ph.next_decommit = decommit_at;
    } else if now >= ph.next_decommit {
        if ph.lazy_free > 0 {
            sweep(
                ph,
                Step::Decommit,
                |c, w| c.free_bits[w].get() & c.lazy_bits[w].get() & !c.lazy_young_bits[w].get(),
                |ph| ph.lazy_free == 0,
            );
            // (Only lazy pages' young bits mean anything: with none left, stale ones are masked
            // by the lazy bits, and the clearing, over every chunk, is skipped.)
            for_each_chunk(ph, |c| clear_all(&c.lazy_young_bits));
        }
        ph.peak_prev = ph.peak_cur;
        ph.peak_cur = ph.in_use;
        ph.misfit_prev = ph.misfit_cur;
        ph.misfit_cur = 0;
        ph.next_decommit = decommit_at;
    }
    // Once a second: the headers' descriptor pages that stayed unused since the last time.
    if now >= ph.next_descriptors {
        if ph.next_descriptors != 0 {
            return_descriptors(ph, false);
        }
        ph.next_descriptors = now.saturating_add(DESCRIPTORS_PERIOD_NS);
    }
}

/// How often the page heap looks for unused descriptor pages ([`return_descriptors`]).
const DESCRIPTORS_PERIOD_NS: u64 = 1_000 * MS;

/// Gives back the chunk headers' OS pages of descriptors (`slot.rs`) that hold no run's
/// descriptor: those that also held none when this last ran, with none handed out since (all of
/// them, `at_once`, for `collect()`), so that a page whose slots come and go is not faulted in
/// again and again. A chunk whose spans went back keeps no header pages for their descriptors.
/// Only pages a run's descriptor left since the last look, and idle ones, are looked at.
///
/// A released run's descriptor is written by nobody until the page heap hands its slot out
/// again, under its lock, and read only by its last owner's slow paths that wake after the
/// trimmer released the span (`heap/slow.rs`: they compare its `owner` with their heap, and 0
/// matches none). So its bytes may read zero, a free descriptor's state; the next run that takes
/// a slot of the page faults it in again.
fn return_descriptors(ph: &PageHeap, at_once: bool) {
    if os::pages_locked() {
        return;
    }
    for_each_chunk(ph, |cr| {
        let mut look = cr.desc_written.get() & (cr.desc_freed.get() | cr.desc_idle.get());
        let mut idle = 0;
        while look != 0 {
            let k = look.trailing_zeros() as usize;
            look &= look - 1;
            let from = k * DESC_PER_PAGE;
            let in_use = slot::slot_pages(from, DESC_PER_PAGE)
                .any(|p| core::ptr::eq(cr.page_span[p].get(), &cr.spans[slot::slot(p)]));
            if in_use {
                continue;
            }
            if !at_once && cr.desc_idle.get() & 1 << k == 0 {
                idle |= 1 << k;
                continue;
            }
            let page = &cr.spans[from..from + DESC_PER_PAGE];
            // SAFETY: a whole OS page of a live chunk's header (asserted in `mod.rs`) holding
            // only descriptors of no run, which nothing writes until the page heap hands one out
            // again under the lock our caller holds (see above for the reads).
            if unsafe { os::decommit(page.as_ptr() as *mut u8, os::OS_PAGE) } {
                cr.desc_written.set(cr.desc_written.get() & !(1 << k));
            } else {
                idle |= 1 << k;
            }
        }
        cr.desc_idle.set(idle);
        cr.desc_freed.set(0);
    });
}

fn for_each_chunk(ph: &PageHeap, mut f: impl FnMut(&Chunk)) {
    let mut c = ph.chunks;
    while !c.is_null() {
        // SAFETY: chunks on the list are live; the caller holds the lock.
        let cr = unsafe { &*c };
        f(cr);
        c = cr.next.get();
    }
}

/// What [`sweep`] does to a run of free pages.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Dirty → lazy: `madvise(MADV_FREE)` (`MADV_DONTNEED` where the kernel lacks it).
    Purge,
    /// Dirty or lazy → clean: `madvise(MADV_DONTNEED)`; the pages read zero afterwards.
    Decommit,
}

/// Applies `step` to the runs of pages that `select` picks (given a chunk and a word index, a
/// word of page bits: a subset of the free pages that hold memory, all of them dirty for
/// [`Step::Purge`]), chunk by chunk, until `done`. Nothing while the kernel refuses to drop
/// locked pages ([`os::pages_locked`]): they stay resident, counted as free resident pages;
/// within a sweep, a chunk whose pages were refused so is left at the first refusal.
fn sweep(
    ph: &mut PageHeap,
    step: Step,
    select: impl Fn(&Chunk, usize) -> u64,
    done: impl Fn(&PageHeap) -> bool,
) {
    if os::pages_locked() {
        return;
    }
    let mut c = ph.chunks;
    while !c.is_null() && !done(ph) {
        // SAFETY: chunks on the list are live; the caller holds the lock.
        let cr = unsafe { &*c };
        let mut i = HEADER_PAGES;
        while i < PAGES_PER_CHUNK && !done(ph) {
            let w = select(cr, i / 64) >> (i % 64);
            if w == 0 {
                i = (i / 64 + 1) * 64;
                continue;
            }
            i += w.trailing_zeros() as usize;
            // The run: the selected pages from `i` on, across word boundaries.
            let start = i;
            loop {
                let ones = (!(select(cr, i / 64) >> (i % 64))).trailing_zeros() as usize;
                let ones = ones.min(64 - i % 64);
                i += ones;
                if ones == 0 || !i.is_multiple_of(64) || i == PAGES_PER_CHUNK {
                    break;
                }
            }
            if !advise_run(ph, c, start, i - start, step) {
                break; // locked pages: the rest of the chunk likely is too
            }
        }
        c = cr.next.get();
    }
}

/// Whether `MADV_FREE` was refused once (a kernel without it): purges decommit instead.
static NO_LAZY_FREE: AtomicBool = AtomicBool::new(false);

/// Advises the `n` free pages at page `start` of `chunk` (see [`sweep`]) and updates the bits
/// and counters. `false` when the kernel refused because the pages are locked in memory
/// (`mlock`, `mlockall`): they stay dirty (resident), and are not counted as advised or
/// returned.
fn advise_run(ph: &mut PageHeap, chunk: *mut Chunk, start: usize, n: usize, step: Step) -> bool {
    // SAFETY: a live chunk; the caller holds the lock.
    let cr = unsafe { &*chunk };
    let addr = (chunk as usize + start * PAGE_SIZE) as *mut u8;
    let len = n * PAGE_SIZE;
    let mut no_lazy_free = false;
    if step == Step::Purge && !NO_LAZY_FREE.load(Ordering::Relaxed) {
        // SAFETY: the run is free pages of a live chunk; nothing holds them.
        match unsafe { os::lazy_free(addr, len) } {
            Ok(()) => {
                set_range(&cr.lazy_bits, start, n, true);
                set_range(&cr.lazy_young_bits, start, n, true);
                ph.dirty_free -= n;
                ph.lazy_free += n;
                return true;
            }
            // A kernel without MADV_FREE (before 4.5), or locked pages: decommit, which tells
            // them apart (it is refused on locked pages too).
            Err(libc::EINVAL) => no_lazy_free = true,
            // Another refusal: the pages stay dirty.
            Err(_) => return true,
        }
    }
    let lazy = count_set(&cr.lazy_bits, start, n);
    // SAFETY: as above.
    if !unsafe { os::decommit(addr, len) } {
        return !os::pages_locked();
    }
    if no_lazy_free {
        // MADV_DONTNEED taken where MADV_FREE was not: a kernel without it, from now on.
        NO_LAZY_FREE.store(true, Ordering::Relaxed);
    }
    set_range(&cr.dirty_bits, start, n, false);
    set_range(&cr.lazy_bits, start, n, false);
    ph.lazy_free -= lazy;
    ph.dirty_free -= n - lazy;
    RETURNED_BYTES.fetch_add(len as u64, Ordering::Relaxed);
    true
}

/// Returns every free page that still holds memory to the OS (`madvise(MADV_DONTNEED)`), for
/// `collect()`; [`RETURNED_BYTES`] counts them.
pub(crate) fn return_free_pages() {
    let mut ph = PAGE_HEAP.lock();
    // (Asked for now: locked pages refused earlier are tried again, once.)
    os::retry_locked();
    sweep(
        &mut ph,
        Step::Decommit,
        |c, w| c.free_bits[w].get() & c.dirty_bits[w].get(),
        |ph| ph.dirty_free + ph.lazy_free == 0,
    );
    return_descriptors(&ph, true);
    ph.publish();
}
