//! Where the page heap places a run: pages that still hold memory first, then fresh ones; and
//! a busy thread's spans in a chunk of their own.
//!
//! **Homes.** Spans of two threads that run at once side by side in a chunk cost both of them
//! time: C `larsonspawn`'s pattern on two threads (each replacing random blocks of its own, no
//! block crossing threads) took about 1.4× the CPU time of one thread doing the same work, and
//! a fifth less with each thread's spans in chunks of their own (mimalloc, whose threads own
//! whole segments, pays nothing; `bench/RESULTS.md`). So a heap that reserves runs for its
//! spans has a [`Home`]: the chunk its fresh pages come from first, which it *claims*, and
//! whose fresh pages no other heap takes while another chunk (a new one if need be) has room.
//! A heap that outgrows its home claims the next chunk it takes a run from; an exiting
//! thread's heap lets its home go ([`Home::leave`]). Free pages that still hold memory go
//! first wherever they are, so a home costs no resident memory. Medium objects, the shared
//! heap and heaps that made only a few spans (see `heap/reserve.rs`) have no home and take
//! pages wherever they are.
//!
//! **Spacing.** The run of a 64 KiB span (those of the classes of 8 B to 4 KiB but 3,072 and
//! 3,456 B) taken from fresh pages has a free page before it and after it (one page between two
//! such runs). Side by side, 64 KiB spans start 64 KiB apart: at two of the sixteen places of a
//! 128 KiB period (the sets of a 2 MiB, 16-way L2 cache), and their descriptors in neighbouring
//! header slots. A page apart (72 KiB), they start at all sixteen, and consecutive spans'
//! descriptors fall in different groups of slots (`slot.rs`). C `larson` on two threads took
//! 0.18 s of CPU time spaced against 0.21 side by side; spans 128 KiB apart gained nothing, and
//! spans 72 KiB apart with neighbouring descriptors were slower than side by side on two of the
//! four larson programs (`bench/RESULTS.md`). What in the hardware does it is not known: the VM
//! has no counters. The free page holds no memory, and no span fits it: it joins its
//! neighbours' pages when they go back. Runs on pages that hold memory are taken where they are
//! (they keep the spacing of the spans that held them). The 4-byte class's one-page spans,
//! longer spans and medium objects' runs are not spaced: with longer spans spaced too, C
//! `reallocbuf` peaked 7 % higher, and no program gained. When the OS refuses a new chunk, runs
//! are taken without the spacing.

use core::cell::Cell;
use core::ptr;

use crate::size_class::{PAGE_SIZE, SPAN_MIN_BYTES};

use super::{
    bits, find_run, new_chunk, take_runs, Chunk, PageHeap, PageRun, MAX_ALIGN_PAGES, PAGE_HEAP,
    USABLE_PAGES, WORDS,
};

/// The chunk a heap takes the runs of its new spans from first (see the module docs); a field
/// of the heap, read and written under the page-heap lock.
pub(crate) struct Home {
    chunk: Cell<*mut Chunk>,
}

// SAFETY: read and written only under the page-heap lock.
unsafe impl Sync for Home {}

impl Home {
    /// No home yet.
    pub(crate) const fn new() -> Self {
        Home {
            chunk: Cell::new(ptr::null_mut()),
        }
    }

    /// Whether this home has no chunk (a new heap's).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.chunk.get().is_null()
    }

    /// This home's mark in a chunk's `claim`.
    fn id(&self) -> usize {
        self as *const Home as usize
    }

    /// Lets this home's chunk go (its heap's thread exits): other heaps may make it theirs.
    pub(crate) fn leave(&self) {
        let mut ph = PAGE_HEAP.lock();
        self.unclaim(&mut ph);
    }

    /// [`Home::leave`] with the page heap locked.
    fn unclaim(&self, ph: &mut PageHeap) {
        let c = self.chunk.replace(ptr::null_mut());
        if !c.is_null() {
            // SAFETY: chunks are never unmapped; the caller holds the page-heap lock.
            let cr = unsafe { &*c };
            debug_assert_eq!(cr.claim.get(), self.id());
            cr.claim.set(0);
            ph.claims -= 1;
        }
    }

    /// Makes `c`, where a run of `npages` pages was found, this home's chunk, if no other home
    /// claims it and this home has none or one without room for such a run (it moves on as it
    /// outgrows a chunk; runs it takes elsewhere while its chunk has room leave it where it is),
    /// and fewer than [`max_claims`] chunks are claimed.
    fn settle(&self, ph: &mut PageHeap, c: *mut Chunk, npages: usize) {
        // SAFETY: live chunks; the caller holds the page-heap lock.
        let (cr, home) = unsafe { (&*c, self.chunk.get().as_ref()) };
        if cr.claim.get() != 0 || home.is_some_and(|h| h.free_pages.get() >= npages) {
            return;
        }
        self.unclaim(ph);
        if ph.claims < max_claims() {
            cr.claim.set(self.id());
            self.chunk.set(c);
            ph.claims += 1;
        }
    }
}

/// Whether a search for `home` may take pages of `c`: it is unclaimed, or `home`'s own. A run
/// with no home (a medium object, a heap's first spans) may take any chunk's.
fn open_to(c: &Chunk, home: Option<&Home>) -> bool {
    home.is_none_or(|h| c.claim.get() == 0 || c.claim.get() == h.id())
}

/// Takes `npages` contiguous pages, starting at a multiple of `align` pages (a power of two up
/// to [`MAX_ALIGN_PAGES`], with `npages` at most that too when `align > 1`). When the OS refuses
/// a new chunk, calls `release` once (it gives memory back elsewhere, the cache of freed huge
/// mappings, and says how much) and tries again. Returns `None` when the OS refuses more memory.
pub(crate) fn alloc_pages(npages: usize, align: usize, release: fn() -> usize) -> Option<PageRun> {
    alloc_runs(npages, align, release, &mut [], None, false).map(|(run, _)| run)
}

/// As [`alloc_pages`] (alignment 1) for a span's run (spaced, see [`alloc_runs`]).
pub(crate) fn alloc_span_pages(npages: usize, release: fn() -> usize) -> Option<PageRun> {
    alloc_runs(npages, 1, release, &mut [], None, true).map(|(run, _)| run)
}

/// As [`alloc_pages`], and then, under the same lock, up to `more.len()` further runs of
/// `npages` pages, the ones right behind it, into `more`: as long as they are free and taking
/// them keeps the placement's preference for pages that hold memory (their pages all do, or the
/// free pages that do are fewer than a run). Returns the first run and how many went to `more`.
/// A thread takes its spans' pages this way a few at a time (`heap/reserve.rs`): one lock and
/// one search instead of one each. With a `home`, its chunk is searched first, and the chunk
/// the run comes from becomes its home if no other heap claims it. `span`: the runs are for
/// spans, and those of 64 KiB spans are spaced: from fresh pages, with a free page before and
/// after the run (see the module docs), and a free page after each run in `more`.
pub(crate) fn alloc_runs(
    npages: usize,
    align: usize,
    release: fn() -> usize,
    more: &mut [PageRun],
    home: Option<&Home>,
    span: bool,
) -> Option<(PageRun, usize)> {
    debug_assert!((1..=USABLE_PAGES).contains(&npages));
    debug_assert!(align.is_power_of_two() && align <= MAX_ALIGN_PAGES);
    debug_assert!(align == 1 || npages <= MAX_ALIGN_PAGES);
    let mut gap = (span && npages * PAGE_SIZE == SPAN_MIN_BYTES) as usize;
    let mut ph = PAGE_HEAP.lock();
    // Pages that hold memory, and the home's fresh pages: out of line, so that the path to a
    // new chunk below keeps a small frame in a build without optimisation.
    if let Some((chunk, first)) = before_fresh(&ph, npages, align, home, gap) {
        return Some(settle_and_take(ph, chunk, first, npages, more, home, gap));
    }
    // Fresh pages: next fit, from the chunk the last search found room in round the list and
    // back to it (every chunk is looked at before a new one is mapped). From the head each
    // time, a search walked every full chunk (a cache and TLB miss each) whenever the free
    // room sat in an old one: 16,000 live threads spent a quarter of their time there. Chunks
    // other heaps claim are passed, unless the OS refuses a new one.
    let mut released = false;
    let mut claimed_too = false;
    let (chunk, first) = 'search: loop {
        let start = if ph.rover.is_null() {
            ph.chunks
        } else {
            ph.rover
        };
        let mut c = start;
        while !c.is_null() {
            // SAFETY: every chunk on the list is a live header, protected by the lock.
            let cr = unsafe { &*c };
            if claimed_too || open_to(cr, home) {
                if let Some(first) = find_fresh(cr, npages, align, gap) {
                    break 'search (c, first);
                }
            }
            c = cr.next.get();
            if c.is_null() && start != ph.chunks {
                c = ph.chunks;
            }
            if c == start {
                break;
            }
        }
        let Some(nc) = new_chunk() else {
            if !claimed_too && home.is_some() {
                // Room in chunks other heaps claim, before the OS is asked again.
                claimed_too = true;
                continue;
            }
            if gap > 0 {
                // And room without the free page after the run.
                gap = 0;
                continue;
            }
            // The OS refused a chunk: give back the freed huge mappings kept for reuse
            // (outside our lock, see `large::release_cache`) and look once more.
            drop(ph);
            if released || release() == 0 {
                return None;
            }
            released = true;
            ph = PAGE_HEAP.lock();
            continue;
        };
        // SAFETY: `nc` is a fresh header; the list is protected by the lock we hold.
        unsafe { (*nc).next.set(ph.chunks) };
        ph.chunks = nc;
        // SAFETY: as above.
        let first = find_fresh(unsafe { &*nc }, npages, align, gap).expect("fresh chunk has room");
        break (nc, first);
    };
    ph.rover = chunk;
    Some(settle_and_take(ph, chunk, first, npages, more, home, gap))
}

/// The runs [`alloc_runs`] takes before fresh pages outside the home: the home's pages that
/// hold memory; free pages that hold memory elsewhere (taking them costs no page fault and no
/// new resident memory, see the policy in `chunk/mod.rs`), in chunks other heaps claim last;
/// the run that covers the most of them; the home's fresh pages. The chunk and first page of
/// the run found, if any.
#[inline(never)]
fn before_fresh(
    ph: &PageHeap,
    npages: usize,
    align: usize,
    home: Option<&Home>,
    gap: usize,
) -> Option<(*mut Chunk, usize)> {
    let home_chunk = home.map_or(ptr::null_mut(), |h| h.chunk.get());
    let resident = ph.dirty_free + ph.lazy_free >= npages;
    let fits = |c: *mut Chunk, held: bool| {
        // SAFETY: chunks are never unmapped; the caller's lock protects their bitmaps.
        let cr = unsafe { &*c };
        (cr.free_pages.get() >= npages)
            .then(|| find_run(cr, npages, held, align))
            .flatten()
    };
    if resident && !home_chunk.is_null() {
        if let Some(first) = fits(home_chunk, true) {
            return Some((home_chunk, first));
        }
    }
    if resident {
        for any in [false, true] {
            let mut c = ph.chunks;
            while !c.is_null() {
                // SAFETY: every chunk on the list is a live header, protected by the lock.
                let cr = unsafe { &*c };
                if any || open_to(cr, home) {
                    if let Some(first) = fits(c, true) {
                        return Some((c, first));
                    }
                }
                c = cr.next.get();
            }
            if home.is_none() {
                break;
            }
        }
    }
    // None fits whole: the run that covers the most of them, so that the run faults in, and
    // adds to the resident total, as few new pages as it can.
    if align == 1 && ph.dirty_free + ph.lazy_free > 0 {
        if let Some((chunk, first)) = most_resident_run(ph, npages) {
            return Some((chunk, first));
        }
    }
    if !home_chunk.is_null() {
        // SAFETY: as above.
        if let Some(first) = find_fresh(unsafe { &*home_chunk }, npages, align, gap) {
            return Some((home_chunk, first));
        }
    }
    None
}

/// The first page of a run of `npages` free pages in `c` starting at a multiple of `align`
/// pages, with `gap` free pages (0 or 1) before it and after it: spaced runs (see the module
/// docs) share the free page between them.
fn find_fresh(c: &Chunk, npages: usize, align: usize, gap: usize) -> Option<usize> {
    debug_assert!(gap == 0 || align == 1);
    if c.free_pages.get() < npages + 2 * gap {
        return None;
    }
    let first = bits::find_run(|w| c.free_bits[w].get(), npages + 2 * gap, align)?;
    Some(first + gap)
}

/// Homes at most: twice the CPUs the process may run on, 4 at least. Only threads that run at
/// once gain from chunks of their own, and each claimed chunk keeps fresh pages of other heaps
/// out, and maps a chunk where a thread could have used another's room.
fn max_claims() -> usize {
    static MAX: core::sync::atomic::AtomicUsize = core::sync::atomic::AtomicUsize::new(0);
    let m = MAX.load(core::sync::atomic::Ordering::Relaxed);
    if m != 0 {
        return m;
    }
    let m = 2 * crate::os::cpus().max(2);
    MAX.store(m, core::sync::atomic::Ordering::Relaxed);
    m
}

/// [`take_runs`], after making `chunk` `home`'s if no other heap claims it.
fn settle_and_take(
    mut ph: crate::lock::SpinGuard<'_, PageHeap>,
    chunk: *mut Chunk,
    first: usize,
    npages: usize,
    more: &mut [PageRun],
    home: Option<&Home>,
    gap: usize,
) -> (PageRun, usize) {
    if let Some(h) = home {
        h.settle(&mut ph, chunk, npages);
    }
    take_runs(ph, chunk, first, npages, more, gap)
}

/// Chunks searched at most for [`most_resident_run`] (those with free pages that hold memory).
const RESIDENT_SEARCH_CHUNKS: usize = 8;

/// The run of `npages` free pages covering the most free pages that hold memory (dirty or
/// lazy), among the first [`RESIDENT_SEARCH_CHUNKS`] chunks holding such pages: (chunk, first
/// page). `None` when no run of that length covers any.
fn most_resident_run(ph: &PageHeap, npages: usize) -> Option<(*mut Chunk, usize)> {
    let mut best: Option<(*mut Chunk, usize, usize)> = None;
    let mut searched = 0;
    let mut c = ph.chunks;
    while !c.is_null() && searched < RESIDENT_SEARCH_CHUNKS {
        // SAFETY: every chunk on the list is a live header, protected by the caller's lock.
        let cr = unsafe { &*c };
        let held = |w: usize| cr.free_bits[w].get() & cr.dirty_bits[w].get();
        if cr.free_pages.get() >= npages && (0..WORDS).any(|w| held(w) != 0) {
            searched += 1;
            let found = bits::most_held_run(|w| cr.free_bits[w].get(), held, npages);
            if let Some((first, n)) = found {
                if best.is_none_or(|(_, _, b)| n > b) {
                    best = Some((c, first, n));
                }
            }
        }
        c = cr.next.get();
    }
    best.map(|(c, first, _)| (c, first))
}
