//! A thread's reserve of page runs for its new spans.
//!
//! A refill that finds no span to reuse takes a new one from the page heap, behind its one lock
//! and a search of its chunks' bitmaps. It takes a few at a time instead: the run the page
//! heap's placement picks, and up to [`RUNS_PER_TAKE`]` - 1` free runs of the same length right
//! behind it, a free page apart (`chunk::alloc_runs`; spans are spaced, see `chunk/place.rs`),
//! under the same lock, after the same search. The others wait
//! here, on this heap, for the next new span of any class whose spans are that long; the next
//! refill that needs one takes it without the lock.
//!
//! A heap starts reserving after its first [`RESERVE_AFTER`] new spans (and again after it gave
//! its reserve back), so that a short-lived thread takes only the pages it uses. The reserve
//! holds at most [`RESERVE_MAX_PAGES`] pages (256 KiB). Its runs are pages in use as
//! far as the page heap is concerned: runs on fresh pages take no memory until a span is made
//! on them, and runs on pages that held memory are taken only when the policy would take such
//! pages anyway. They go back to the page heap when the thread exits (`abandon::abandon`)
//! and when it calls `collect()` (`slow::trim_thread`). A thread that vanishes in a `fork`
//! keeps its reserve in the child, as it keeps its spans (`docs/fork.md`).
//!
//! A reserved run's descriptor is the page heap's (its `start` and `npages` set, its state
//! still free); while reserved, its `next` links the reserve and its `bump_zero` says whether
//! its pages read zero.

use core::ptr;
use core::sync::atomic::Ordering;

use super::Heap;
use crate::chunk::{self, PageRun};
use crate::span::Span;

/// Runs taken from the page heap at a time, the one asked for included.
pub(super) const RUNS_PER_TAKE: usize = 4;

/// The most pages a thread's reserve holds (32 pages of 8 KiB: 256 KiB).
pub(super) const RESERVE_MAX_PAGES: usize = 32;

/// New spans a heap takes one at a time before it reserves: a thread that makes a few spans
/// and exits (a short-lived worker) takes only what it uses; one whose heap keeps growing takes
/// the rest a few at a time.
pub(super) const RESERVE_AFTER: u32 = 4;

/// A run of `npages` pages for a new span of `h`: for its first [`RESERVE_AFTER`] new spans
/// one from the page heap; then one from its reserve, else one from the page heap, with up to
/// [`RUNS_PER_TAKE`]` - 1` more of the same length kept in the reserve (as many as
/// [`RESERVE_MAX_PAGES`] leaves room for). `None` when the OS refuses memory.
///
/// `h` must be this thread's heap, or the shared heap with its lock held.
pub(super) fn take(h: &Heap, npages: usize) -> Option<PageRun> {
    let made = h.new_spans.get();
    if made < RESERVE_AFTER {
        h.new_spans.set(made + 1);
        return chunk::alloc_span_pages(npages, crate::large::release_cache);
    }
    let mut prev: *mut Span = ptr::null_mut();
    let mut cur = h.reserve.get();
    while !cur.is_null() {
        // SAFETY: a reserved run's descriptor: ours until it leaves the reserve.
        let s = unsafe { &*cur };
        let next = s.next.get();
        if s.npages.get() as usize == npages {
            if prev.is_null() {
                h.reserve.set(next);
            } else {
                // SAFETY: as above, for the run before it.
                unsafe { (*prev).next.set(next) };
            }
            s.next.set(ptr::null_mut());
            set_pages(h, pages(h) - npages);
            return Some(PageRun {
                span: cur,
                zero: s.bump_zero.get(),
            });
        }
        prev = cur;
        cur = next;
    }
    let room = (RESERVE_MAX_PAGES.saturating_sub(pages(h)) / npages).min(RUNS_PER_TAKE - 1);
    let mut more = [PageRun {
        span: ptr::null_mut(),
        zero: false,
    }; RUNS_PER_TAKE - 1];
    let Some((run, n)) = chunk::alloc_runs(
        npages,
        1,
        crate::large::release_cache,
        &mut more[..room],
        home(h),
        true,
    ) else {
        // Out of memory: the runs held here for other lengths go back, and the page heap is
        // asked once more.
        if pages(h) == 0 {
            return None;
        }
        release(h);
        return chunk::alloc_pages(npages, 1, crate::large::release_cache);
    };
    for r in &more[..n] {
        // SAFETY: a run the page heap just gave us, on no list.
        let s = unsafe { &*r.span };
        s.bump_zero.set(r.zero);
        s.next.set(h.reserve.get());
        h.reserve.set(r.span);
        set_pages(h, pages(h) + npages);
    }
    Some(run)
}

/// Where `h`'s runs come from first: its home chunk (`chunk/place.rs`), for a thread's own heap;
/// none for the shared heap, whose spans serve many threads.
fn home(h: &Heap) -> Option<&chunk::Home> {
    (h as *const Heap as usize != super::SHARED_HEAP.load(Ordering::Relaxed)).then_some(&h.home)
}

/// Gives `h`'s reserve back to the page heap; returns its bytes.
///
/// `h` must be this thread's heap, the shared heap with its lock held, or a heap no
/// thread uses any more.
pub(super) fn release(h: &Heap) -> usize {
    let bytes = pages(h) * crate::size_class::PAGE_SIZE;
    // The page heap may advise pages back to the OS here (at thread exit), which leaves `errno`
    // as it was.
    let _errno = crate::os::KeepErrno::new();
    let mut cur = h.reserve.replace(ptr::null_mut());
    set_pages(h, 0);
    h.new_spans.set(0);
    while !cur.is_null() {
        // SAFETY: a reserved run's descriptor, just taken off the reserve.
        let next = unsafe { (*cur).next.replace(ptr::null_mut()) };
        // SAFETY: a run from the page heap, holding no block (no span was made on it), on no
        // list, never written while reserved; nothing uses it after this.
        unsafe { chunk::free_unused_pages(cur, (*cur).bump_zero.get()) };
        cur = next;
    }
    bytes
}

/// Pages in `h`'s reserve (only its owner writes the count).
fn pages(h: &Heap) -> usize {
    h.reserve_pages.load(Ordering::Relaxed)
}

/// Sets the count of pages in `h`'s reserve: a plain store, read by `stats()` from any thread.
fn set_pages(h: &Heap, n: usize) {
    h.reserve_pages.store(n, Ordering::Relaxed);
}
