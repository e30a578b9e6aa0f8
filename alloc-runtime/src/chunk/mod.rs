//! Chunks and the page heap.
//!
//! Memory comes from the OS in chunks of [`CHUNK_SIZE`] bytes aligned to their size, so the chunk
//! of any block is found by masking its address, and its span by one load from the chunk's page
//! map: O(1), no lock. A chunk starts with its header (the page map and one span descriptor per
//! page); the rest is [`PAGE_SIZE`] pages handed out in runs by the page heap, a first-fit
//! allocator over a per-chunk bitmap behind one lock. Spans are a few pages and are recycled by
//! the thread heaps and central pools before they come back here, so this lock is off the hot
//! paths.

use core::cell::Cell;
use core::ptr;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

mod bits;
mod decay;
mod place;
mod slot;

use bits::{all_clear, bit, clear_all, count_set, set_range};

use decay::maintain;
pub(crate) use decay::{peak_footprint, return_free_pages};
pub(crate) use place::{alloc_pages, alloc_runs, alloc_span_pages, Home};

use crate::lock::SpinLock;
use crate::os;
use crate::policy::policy;
use crate::size_class::{PAGE_SHIFT, PAGE_SIZE};
use crate::span::{Span, STATE_FREE};

pub(crate) use crate::size_class::CHUNK_SIZE;
/// Pages per chunk, header included.
pub(crate) const PAGES_PER_CHUNK: usize = CHUNK_SIZE / PAGE_SIZE;
const WORDS: usize = PAGES_PER_CHUNK / 64;

/// Where a chunk header's page map starts (the `generic/asm.rs` free path reads it).
#[cfg(specalloc_asm_fast)]
pub(crate) const PAGE_SPAN_AT: usize = core::mem::offset_of!(Chunk, page_span);

/// A chunk header. Lives at the start of its chunk; all-zero bytes are a valid empty header.
#[repr(C)]
pub(crate) struct Chunk {
    /// For each page, the descriptor of the span covering it (null when free or header).
    page_span: [Cell<*mut Span>; PAGES_PER_CHUNK],
    /// One descriptor per page; a span uses the one of its first page, in slot `slot(first)`
    /// (see `slot.rs`: spans that follow one another have neighbouring descriptors).
    spans: [Span; PAGES_PER_CHUNK],
    /// 1 = page free (protected by the page-heap lock).
    free_bits: [Cell<u64>; WORDS],
    /// 1 = page written since it was mapped (protected by the page-heap lock).
    dirty_bits: [Cell<u64>; WORDS],
    /// 1 = page freed since the page heap's last purge tick (protected by the page-heap lock):
    /// too young to be advised except past the recent-peak bound (see [`maintain`]).
    young_bits: [Cell<u64>; WORDS],
    /// 1 = free page advised with `MADV_FREE` (protected by the page-heap lock); its dirty bit
    /// stays set, since it may still read its old contents.
    lazy_bits: [Cell<u64>; WORDS],
    /// 1 = page advised since the page heap's last decommit tick (protected by the page-heap
    /// lock): too young to be returned with `MADV_DONTNEED` except past the recent-peak bound.
    lazy_young_bits: [Cell<u64>; WORDS],
    /// Free pages in this chunk (protected by the page-heap lock).
    free_pages: Cell<usize>,
    /// Next chunk in the page heap's list (protected by the page-heap lock).
    next: Cell<*mut Chunk>,
    /// The checked mode's side bitmap of live objects (one bit per byte); 0 otherwise.
    side: Cell<usize>,
    /// The [`Home`] of the heap whose new spans this chunk serves first, and no other heap's
    /// while it can be helped (`place.rs`); 0: none (protected by the page-heap lock).
    claim: Cell<usize>,
    /// Bit `k`: a descriptor in the `k`-th OS page of [`Chunk::spans`] was handed out since
    /// that page was last given back (protected by the page-heap lock; see
    /// `decay::return_descriptors`).
    desc_written: Cell<u16>,
    /// Bit `k`: the `k`-th OS page of [`Chunk::spans`] held no run's descriptor when the page
    /// heap last looked, and none was handed out since (protected by the page-heap lock).
    desc_idle: Cell<u16>,
    /// Bit `k`: a run whose descriptor is in the `k`-th OS page of [`Chunk::spans`] went back
    /// since the page heap last looked (protected by the page-heap lock): only such pages and
    /// idle ones can have become unused.
    desc_freed: Cell<u16>,
}

/// Descriptors per OS page.
const DESC_PER_PAGE: usize = os::OS_PAGE / core::mem::size_of::<Span>();
// The descriptors' OS pages hold descriptors only, each page's of one slot group, and a bit of
// `desc_written` each, so that a page no run's descriptor is in can go back to the OS.
const _: () = assert!(core::mem::offset_of!(Chunk, spans).is_multiple_of(os::OS_PAGE));
const _: () = assert!(slot::GROUP_SLOTS.is_multiple_of(DESC_PER_PAGE));
const _: () = assert!(PAGES_PER_CHUNK / DESC_PER_PAGE <= 16);

/// Pages taken by the chunk header.
pub(crate) const HEADER_PAGES: usize = core::mem::size_of::<Chunk>().div_ceil(PAGE_SIZE);
/// Pages per chunk available for spans.
pub(crate) const USABLE_PAGES: usize = PAGES_PER_CHUNK - HEADER_PAGES;

const _: () = assert!(HEADER_PAGES < PAGES_PER_CHUNK / 8);

/// The span holding `p`.
///
/// # Safety
/// `p` must point into a span handed out by the page heap (a block this allocator returned).
#[inline(always)]
pub(crate) unsafe fn span_of(p: *const u8) -> *mut Span {
    let addr = p as usize;
    let chunk = (addr & !(CHUNK_SIZE - 1)) as *const Chunk;
    let page = (addr & (CHUNK_SIZE - 1)) >> PAGE_SHIFT;
    // SAFETY: `p` is inside a live span, so its chunk header is mapped and the page-map entry
    // was written (under the page-heap lock) before the block was handed out.
    unsafe { crate::raw::get(crate::raw::at(&crate::raw::as_ref(chunk).page_span, page)) }
}

struct PageHeap {
    chunks: *mut Chunk,
    /// The chunk the last search for fresh pages found room in (null: none yet), where the next
    /// one starts (see [`alloc_runs`]).
    rover: *mut Chunk,
    /// Pages handed out (spans and medium objects).
    in_use: usize,
    /// Free pages that hold memory and were not advised: written since mapped or last returned.
    dirty_free: usize,
    /// Free pages advised with `MADV_FREE`: the kernel may take them at any time; until it
    /// does they count in the process's RSS and cost no fault when reused.
    lazy_free: usize,
    /// When the next purge tick is due (monotonic ns; 0 until first armed): free pages that
    /// stayed dirty for a whole purge period are advised with `MADV_FREE` then.
    next_purge: u64,
    /// When the next decommit tick is due (monotonic ns; 0 until first armed): pages that
    /// stayed lazy for a whole decommit period go back with `MADV_DONTNEED` then, and the
    /// window of the recent peak moves on.
    next_decommit: u64,
    /// When the headers' unused descriptor pages are next looked at (monotonic ns; 0 until
    /// first armed; see `decay::return_descriptors`).
    next_descriptors: u64,
    /// Highest `in_use` of the current decommit window.
    peak_cur: usize,
    /// Highest `in_use` of the previous decommit window.
    peak_prev: usize,
    /// Pages handed out, in the current decommit window, that did not hold memory while the
    /// free pages held as many that did (too fragmented for the runs asked for): the
    /// fragmentation the recent-peak bound leaves room for.
    misfit_cur: usize,
    /// The same, in the previous decommit window.
    misfit_prev: usize,
    /// Times pages were taken (one lock and one search each), published as [`PAGE_TAKES`].
    takes: u64,
    /// Chunks a heap claims as its home (`place.rs`).
    claims: usize,
}

impl PageHeap {
    /// The highest `in_use` of the current and the previous decommit window.
    fn recent_peak(&self) -> usize {
        self.peak_cur.max(self.peak_prev).max(self.in_use)
    }

    /// Publishes the counters to the statistics.
    fn publish(&self) {
        IN_USE_BYTES.store(self.in_use * PAGE_SIZE, Ordering::Relaxed);
        DIRTY_FREE_BYTES.store(
            (self.dirty_free + self.lazy_free) * PAGE_SIZE,
            Ordering::Relaxed,
        );
        LAZY_FREE_BYTES.store(self.lazy_free * PAGE_SIZE, Ordering::Relaxed);
        PAGE_TAKES.store(self.takes, Ordering::Relaxed);
    }
}

// SAFETY: the raw chunk list is only touched under the page-heap lock.
unsafe impl Send for PageHeap {}

static PAGE_HEAP: SpinLock<PageHeap> = SpinLock::new(PageHeap {
    chunks: ptr::null_mut(),
    rover: ptr::null_mut(),
    in_use: 0,
    dirty_free: 0,
    lazy_free: 0,
    next_purge: 0,
    next_decommit: 0,
    next_descriptors: 0,
    peak_cur: 0,
    peak_prev: 0,
    misfit_cur: 0,
    misfit_prev: 0,
    takes: 0,
    claims: 0,
});

use crate::stats::IN_USE_BYTES;
/// Bytes of free pages still holding memory as far as the allocator knows: dirty ones and
/// those advised with `MADV_FREE` that the kernel has not taken (or has: it does not say).
pub(crate) static DIRTY_FREE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Of [`DIRTY_FREE_BYTES`], the bytes advised with `MADV_FREE`.
pub(crate) static LAZY_FREE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Bytes of free pages returned to the OS (`MADV_DONTNEED`) so far.
pub(crate) static RETURNED_BYTES: AtomicU64 = AtomicU64::new(0);
/// Times a thread took pages from the page heap: spans' runs (a few at a time) and medium
/// objects' runs.
pub(crate) static PAGE_TAKES: AtomicU64 = AtomicU64::new(0);

// The page-return policy: see `policy.rs` for what it does and why, `decay.rs` for how.

/// Free pages kept resident whatever the heap's size: 256 KiB.
const RETAIN_MIN_PAGES: usize = (256 << 10) / PAGE_SIZE;

/// Free pages kept resident for good: 256 KiB or an eighth of the pages in use, whichever is
/// more. Past that, pages that stayed free for a purge period are advised, down to half the
/// bound (so the cost of scanning is spread over many frees).
fn retain_limit(in_use: usize) -> usize {
    RETAIN_MIN_PAGES.max(in_use / 8)
}

/// Chunks mapped while the heap is smaller than this are never backed with huge pages.
const NO_HUGE_PAGES_BELOW: usize = 64 << 20;

const MS: u64 = 1_000_000;

/// First run of `n` free pages in `c` (that still hold memory, when `dirty_only`) starting at a
/// multiple of `align` pages (see [`bits::find_run`]).
fn find_run(c: &Chunk, n: usize, dirty_only: bool, align: usize) -> Option<usize> {
    let usable = |w: usize| {
        let free = c.free_bits[w].get();
        if dirty_only {
            free & c.dirty_bits[w].get()
        } else {
            free
        }
    };
    bits::find_run(usable, n, align)
}

fn new_chunk() -> Option<*mut Chunk> {
    let small_heap = os::MAPPED.load(Ordering::Relaxed) < NO_HUGE_PAGES_BELOW;
    let huge = policy().huge_pages;
    let base = os::map_aligned(CHUNK_SIZE, CHUNK_SIZE)?.as_ptr() as *mut Chunk;
    if base as usize + CHUNK_SIZE > crate::remote::HEAD_MASK {
        // A remote list's head and count share a word, which holds addresses below 2^48 (the
        // kernel maps below 2^47 unless given a hint above it, which we never give): a chunk
        // above that is refused as memory the OS did not give.
        // SAFETY: the chunk is a whole mapping just made by us, and nothing uses it.
        unsafe { os::release(base.cast(), CHUNK_SIZE) };
        return None;
    }
    #[cfg(feature = "checked")]
    let Some(side) = crate::side::new_side() else {
        // SAFETY: the chunk is a whole mapping just made by us, and nothing uses it.
        unsafe { os::release(base.cast(), CHUNK_SIZE) };
        return None;
    };
    #[cfg(feature = "checked")]
    {
        // SAFETY: fresh header memory of ours.
        unsafe { (*base).side.set(side) };
        crate::side::register_chunk(base as usize);
    }
    if small_heap {
        // SAFETY: the chunk was just mapped by us.
        unsafe { os::no_huge_pages(base.cast(), CHUNK_SIZE) };
    } else if huge {
        // SAFETY: as above; chunks are aligned to their size, a multiple of 2 MiB.
        unsafe { os::huge_pages(base.cast(), CHUNK_SIZE) };
    }
    // SAFETY: fresh zeroed memory large enough for the header; all-zero is a valid header.
    let c = unsafe { &*base };
    set_range(&c.free_bits, HEADER_PAGES, USABLE_PAGES, true);
    c.free_pages.set(USABLE_PAGES);
    Some(base)
}

/// A run of pages from the page heap, described by the span descriptor of its first page.
#[derive(Clone, Copy)]
pub(crate) struct PageRun {
    /// The descriptor; its `start` and `npages` are set, its other fields are stale.
    pub(crate) span: *mut Span,
    /// The pages had never been written, or were returned with `MADV_DONTNEED` (they read
    /// zero). Pages advised with `MADV_FREE` do not count: they read zero or their old data.
    pub(crate) zero: bool,
}

/// The largest alignment, in pages, [`alloc_pages`] serves: a quarter of a chunk, so that a
/// fresh chunk always has an aligned run of up to that many pages past its header.
pub(crate) const MAX_ALIGN_PAGES: usize = PAGES_PER_CHUNK / 4;

const _: () = assert!(HEADER_PAGES <= MAX_ALIGN_PAGES);

/// Whether a thread holds the page heap's lock now (a racy look, see
/// [`SpinLock::is_held`](crate::lock::SpinLock::is_held)).
#[cfg(feature = "profiling")]
pub(crate) fn page_heap_busy() -> bool {
    PAGE_HEAP.is_held()
}

/// Marks the `n` free pages at page `first` of `cr` in use (dirty, not lazy) and updates the
/// page heap's counters; returns how many of them held memory (0: they read zero).
fn claim(ph: &mut PageHeap, cr: &Chunk, first: usize, n: usize) -> usize {
    set_range(&cr.free_bits, first, n, false);
    cr.free_pages.set(cr.free_pages.get() - n);
    let dirty = count_set(&cr.dirty_bits, first, n);
    let lazy = count_set(&cr.lazy_bits, first, n);
    set_range(&cr.dirty_bits, first, n, true);
    if lazy > 0 {
        set_range(&cr.lazy_bits, first, n, false);
    }
    ph.dirty_free -= dirty - lazy;
    ph.lazy_free -= lazy;
    ph.in_use += n;
    ph.peak_cur = ph.peak_cur.max(ph.in_use);
    dirty
}

/// Hands out the free run of `npages` pages at page `first` of `chunk`, and the free runs of
/// as many pages right behind it into `more` (see [`alloc_runs`]), `gap` free pages (0 or 1)
/// after each; then runs the page-return policy and lets the lock go. Returns the first run and
/// how many went to `more`.
fn take_runs(
    mut ph: crate::lock::SpinGuard<'_, PageHeap>,
    chunk: *mut Chunk,
    first: usize,
    npages: usize,
    more: &mut [PageRun],
    gap: usize,
) -> (PageRun, usize) {
    ph.takes += 1;
    let run = take_one(&mut ph, chunk, first, npages);
    let n = take_more(&mut ph, chunk, first + npages + gap, npages, gap, more);
    // Taking clean pages while free ones hold memory (they were too fragmented for this run)
    // may push the resident total past the recent peak.
    if ph.dirty_free + ph.lazy_free > 0 {
        maintain(&mut ph);
    }
    ph.publish();
    drop(ph);
    crate::stats::note_in_use();
    (run, n)
}

/// The runs into `more` of [`take_runs`], the first at page `next`; how many it took. (A
/// function of its own: its frame is off the stack when the page-return policy runs.)
fn take_more(
    ph: &mut PageHeap,
    chunk: *mut Chunk,
    mut next: usize,
    npages: usize,
    gap: usize,
    more: &mut [PageRun],
) -> usize {
    // SAFETY: `chunk` is a live header and the caller holds the page-heap lock.
    let cr = unsafe { &*chunk };
    let mut n = 0;
    while n < more.len()
        && next + npages + gap <= PAGES_PER_CHUNK
        && count_set(&cr.free_bits, next, npages + gap) == npages + gap
    {
        // Pages that hold no memory while free ones that do are left: the placement would
        // have taken those.
        let held = count_set(&cr.dirty_bits, next, npages);
        if held < npages && ph.dirty_free + ph.lazy_free >= npages {
            break;
        }
        more[n] = take_one(ph, chunk, next, npages);
        n += 1;
        next += npages + gap;
    }
    n
}

/// Takes the free run of `npages` pages at page `first` of `chunk` off the free pages, and sets
/// up its descriptor's run.
fn take_one(ph: &mut PageHeap, chunk: *mut Chunk, first: usize, npages: usize) -> PageRun {
    // SAFETY: `chunk` is a live header and the caller holds the page-heap lock.
    let cr = unsafe { &*chunk };
    let resident = ph.dirty_free + ph.lazy_free;
    let held = claim(ph, cr, first, npages);
    if resident >= npages {
        ph.misfit_cur += npages - held;
    }
    let zero = held == 0;
    let slot = slot::slot(first);
    let page = 1 << (slot / DESC_PER_PAGE);
    cr.desc_written.set(cr.desc_written.get() | page);
    cr.desc_idle.set(cr.desc_idle.get() & !page);
    let span = &cr.spans[slot] as *const Span as *mut Span;
    for p in first..first + npages {
        cr.page_span[p].set(span);
    }
    // SAFETY: the descriptor belongs to pages we now own.
    let s = unsafe { &*span };
    debug_assert_eq!(s.state.load(Ordering::Relaxed), STATE_FREE);
    s.start.set((chunk as usize + first * PAGE_SIZE) as *mut u8);
    s.npages.set(npages as u32);
    PageRun { span, zero }
}

/// Extends the run of a live medium object's span by the `more` pages right after it, when
/// they are free: the object grows in place (no copy, and its pages stay where they are).
/// `false`, with nothing changed, when they are not all free (or past the chunk's end).
///
/// # Safety
/// `span` is a live run from [`alloc_pages`] holding one large object (state `STATE_LARGE`),
/// which the caller owns.
pub(crate) unsafe fn extend_pages(span: *mut Span, more: usize) -> bool {
    // SAFETY: guaranteed by the caller.
    let s = unsafe { &*span };
    let start = s.start.get() as usize;
    let chunk = (start & !(CHUNK_SIZE - 1)) as *mut Chunk;
    let end = ((start - chunk as usize) >> PAGE_SHIFT) + s.npages.get() as usize;
    if more == 0 || end + more > PAGES_PER_CHUNK {
        return more == 0;
    }
    let mut ph = PAGE_HEAP.lock();
    // SAFETY: the chunk header is live; the lock protects its bitmaps.
    let cr = unsafe { &*chunk };
    if (end..end + more).any(|i| !bit(&cr.free_bits, i)) {
        return false;
    }
    claim(&mut ph, cr, end, more);
    for p in end..end + more {
        cr.page_span[p].set(span);
    }
    s.npages.set(s.npages.get() + more as u32);
    ph.publish();
    drop(ph);
    crate::stats::note_in_use();
    true
}

/// Returns a span's pages to the page heap.
///
/// # Safety
/// The span must have come from [`alloc_pages`] or [`alloc_runs`], hold no live block, and be on
/// no list; nothing may use it afterwards.
pub(crate) unsafe fn free_pages(span: *mut Span) {
    // SAFETY: guaranteed by the caller.
    unsafe { give_back(span, false) };
}

/// Returns a run the page heap handed out and nothing used (a thread's reserved run), as
/// [`free_pages`] does; `zero` (the run's pages held no memory when it was taken) gives them
/// back as pages that hold none, so that they are neither advised nor cleared for nothing.
///
/// # Safety
/// As [`free_pages`]; with `zero`, nothing wrote to the run since it was taken.
pub(crate) unsafe fn free_unused_pages(span: *mut Span, zero: bool) {
    // SAFETY: guaranteed by the caller.
    unsafe { give_back(span, zero) };
}

/// [`free_pages`] and [`free_unused_pages`]: `clean` gives the pages back as holding no memory.
///
/// # Safety
/// As [`free_unused_pages`].
unsafe fn give_back(span: *mut Span, clean: bool) {
    // SAFETY: guaranteed by the caller.
    let s = unsafe { &*span };
    let start = s.start.get() as usize;
    let chunk = (start & !(CHUNK_SIZE - 1)) as *const Chunk;
    let first = (start - chunk as usize) >> PAGE_SHIFT;
    let n = s.npages.get() as usize;
    s.state
        .store(STATE_FREE, core::sync::atomic::Ordering::Relaxed);
    let mut ph = PAGE_HEAP.lock();
    // SAFETY: the chunk header is live; the lock protects its bitmaps.
    let cr = unsafe { &*chunk };
    debug_assert!(all_clear(&cr.free_bits, first, n), "double free of pages");
    cr.desc_freed
        .set(cr.desc_freed.get() | 1 << (slot::slot(first) / DESC_PER_PAGE));
    for p in first..first + n {
        cr.page_span[p].set(ptr::null_mut());
    }
    set_range(&cr.free_bits, first, n, true);
    cr.free_pages.set(cr.free_pages.get() + n);
    if clean {
        // Handed out as pages that held no memory, and never written since.
        set_range(&cr.dirty_bits, first, n, false);
    } else {
        set_range(&cr.young_bits, first, n, true);
        // Every page of a span was marked dirty (and not lazy) when it was handed out.
        ph.dirty_free += n;
    }
    ph.in_use -= n;
    maintain(&mut ph);
    ph.publish();
}

/// Runs the page-return policy's clock as a page-heap operation would (the background purge,
/// see `purge.rs`): due ticks advise or return free pages, and the recent-peak window moves on.
pub(crate) fn run_clock() {
    let mut ph = PAGE_HEAP.lock();
    maintain(&mut ph);
    ph.publish();
}

/// Page-heap totals: (chunks, free pages).
pub(crate) fn page_heap_totals() -> (usize, usize) {
    let ph = PAGE_HEAP.lock();
    let mut c = ph.chunks;
    let (mut chunks, mut free) = (0, 0);
    while !c.is_null() {
        // SAFETY: chunks on the list are live; we hold the lock.
        let cr = unsafe { &*c };
        chunks += 1;
        free += cr.free_pages.get();
        c = cr.next.get();
    }
    (chunks, free)
}

/// Holds or releases the page-heap lock around `fork` (see `heap::fork_*`).
pub(crate) fn fork_lock(take: bool) {
    if take {
        PAGE_HEAP.raw_lock();
    } else {
        // SAFETY: called by the thread that took it in the fork's prepare handler.
        unsafe { PAGE_HEAP.raw_unlock() };
    }
}

/// The checked mode's side bitmap of the chunk holding `p`.
///
/// # Safety-free contract
/// `p` must be in a registered chunk (the caller checked).
#[cfg(feature = "checked")]
pub(crate) fn side_of(p: usize) -> usize {
    let chunk = (p & !(CHUNK_SIZE - 1)) as *const Chunk;
    // SAFETY: the caller checked that `p` is in one of our chunks, whose header is mapped; the
    // field was written before the chunk was registered.
    unsafe { (*chunk).side.get() }
}
