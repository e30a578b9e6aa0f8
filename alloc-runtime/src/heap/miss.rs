//! The misses of the fast paths, out of line: an allocation finds no block in its current span
//! (the thread may have no heap yet, or be exiting), a free finds a span the thread does not own
//! outright (parked full, another thread's, or pooled). They decide where the operation goes:
//! the heap's life (`lifecycle.rs`: making a heap, the shared heap after exit) or the slow
//! paths (`slow.rs`), and count frees into other threads' spans in this thread's own counters.

use core::ptr;
use core::sync::atomic::Ordering;

use super::outbox::{free_batched, free_now, free_other};
use super::slow::{alloc_from, free_to_parked};
use super::tls::current_heap;
use super::{central, empty_heap, inc, key, lifecycle, Heap};
use crate::remote;
use crate::span::{empty_span, span_blocks, Span, OWNER_FULL, TINY_CLASS};
use crate::stats;

/// The generic path's miss: refills `class` on this thread's heap (making the heap on first
/// use) and allocates from it, or takes the block from the shared heap: one of the thread's
/// first allocations, before it has a heap (`lifecycle::alloc_heapless`), or of its first
/// blocks of the class ([`shared_first`]); `size` bytes are cleared when `zeroed`. Null only
/// when the OS refuses memory.
#[cold]
#[inline(never)]
pub(crate) fn alloc_slow(class: usize, size: usize, zeroed: bool) -> *mut u8 {
    let mut heap = current_heap();
    if heap == empty_heap() {
        if lifecycle::exited() {
            // A destructor running after this thread's heap was torn down.
            return lifecycle::alloc_shared(class, size, zeroed);
        }
        if let Some(p) = lifecycle::alloc_heapless(class, size, zeroed) {
            return p;
        }
        heap = match lifecycle::init_heap() {
            Ok(h) => h,
            Err(lifecycle::NoHeap::Shared) => {
                return lifecycle::alloc_shared(class, size, zeroed);
            }
            Err(lifecycle::NoHeap::OutOfMemory) => return ptr::null_mut(),
        };
    }
    // SAFETY: a live heap from the pool; this thread is its only user.
    let h = unsafe { &*heap };
    if shared_first(h, class) {
        if let Some(p) = lifecycle::try_alloc_shared(class, size, zeroed) {
            return p;
        }
    }
    alloc_from(h, class, size, zeroed)
}

/// Allocations of a class a thread takes from the shared heap before a span of its own.
pub const SHARED_FIRST: u8 = 4;

/// Whether this allocation of `class` comes from the shared heap rather than a span of `h`'s
/// (if its lock is free, see `lifecycle::try_alloc_shared`): one of the first [`SHARED_FIRST`]
/// of the class by `h`'s thread, which has no span of it, while `key::SHARED_FROM_THREADS`
/// threads or more have a heap. Each span a thread takes touches
/// a page of its own; a thread that allocates a few blocks in a class (the four of a thread per
/// connection) would hold a page per class, where the shared heap packs every thread's first
/// blocks together. Below that many threads the shared heap's own page per class would cost
/// more than it saves.
#[inline]
fn shared_first(h: &Heap, class: usize) -> bool {
    let cc = &h.classes[class];
    // First what ends most refills' look: a current span, run out.
    if cc.current.get() != empty_span() {
        return false;
    }
    let n = h.shared_allocs[class].get();
    if n >= SHARED_FIRST || !cc.partial.is_empty() || !key::many_threads() {
        return false;
    }
    h.shared_allocs[class].set(n + 1);
    true
}

/// Frees `p` into a span whose owner word is not exactly `heap`: a span `heap` parked as full,
/// a span of another heap (a remote free), or a span in a central pool.
///
/// A free into a span another thread owns goes into this thread's outbox for the span (no
/// atomic; one CAS per batch, see `outbox::free_batched`; a heap's first few are pushed at
/// once, see `outbox::DIRECT_FREES`); into a pooled span, or from a thread without a heap, it
/// is pushed at once.
///
/// # Safety
/// `p` is a live block of `span`.
///
/// `extern "C"` (it cannot unwind), so that the C `free` calls it in tail position, with its
/// arguments where the free's entry has them (see `slow::span_emptied`).
#[inline(never)]
pub(super) unsafe extern "C" fn free_slow(p: *mut u8, heap: *mut Heap, span: &Span) {
    let owner = span.owner_word();
    // The sentinel heap owns no span, so this never matches for a thread without a heap.
    if owner == heap as usize | OWNER_FULL {
        // A local free, as the fast path's, without the trim lock: the trimmer gives back only
        // spans with no live block, and `p` is live until this push; `wake_parked`, which moves
        // the span between lists, takes the lock.
        // SAFETY: `heap` is this thread's live heap and owns the span; forwarded.
        return unsafe { free_to_parked(&*heap, span, p) };
    }
    // Read before the push: once the block is published, the owner may collect it, empty the
    // span and release it, and the descriptor may be set up again for another class.
    let class = span.class.get() as usize;
    if heap == empty_heap() {
        // SAFETY: forwarded.
        return unsafe { free_heapless(span, class, p, owner == 0) };
    }
    // SAFETY: a heap other than the sentinel is this thread's live heap.
    let h = unsafe { &*heap };
    if owner == 0 {
        // SAFETY: forwarded.
        return unsafe { free_pooled(h, span, class, p) };
    }
    {
        // The outboxes are what the trimmer publishes of an idle heap.
        let _inside = h.enter();
        // Batched: a span another thread owns.
        // SAFETY: `p` is a live block of `span`, freed once.
        unsafe { free_batched(h, span, class, p) };
    }
    count_remote(heap, class);
}

/// [`free_slow`] into a span in a central pool (owned by nobody): its owner-less span's sweeps
/// should find its blocks back as soon as they are freed, so the free is pushed at once.
///
/// # Safety
/// `h` is this thread's live heap; `p` is a live block of `span`, whose class is `class`.
#[inline(never)]
unsafe fn free_pooled(h: &Heap, span: &Span, class: usize, p: *mut u8) {
    #[cfg(feature = "profiling")]
    if span.state.load(Ordering::Relaxed) == crate::span::STATE_LARGE {
        // SAFETY: forwarded.
        return unsafe { free_sampled(span, p) };
    }
    {
        let _inside = h.enter();
        // SAFETY: forwarded.
        unsafe { free_now(h, span, class, p) };
    }
    count_remote(h as *const Heap as *mut Heap, class);
    // The span was pooled (read before the push; it may be adopted since, which costs nothing
    // but an early sweep).
    note_pooled_free(h, class);
}

/// The small free of a block the heap profiler sampled: a page run of its own (owned by
/// nobody, so the free comes here), freed as the medium object it is.
///
/// # Safety
/// `p` is the live object of the medium run `span`.
#[cfg(feature = "profiling")]
#[cold]
#[inline(never)]
unsafe fn free_sampled(span: &Span, p: *mut u8) {
    // SAFETY: a medium object (its run's descriptor says so), freed once.
    unsafe { crate::large::free_large(p, span.large_size.get(), crate::size_class::PAGE_SIZE) };
}

/// [`free_slow`] for a thread without a heap (the sentinel's): the block is pushed at once.
///
/// # Safety
/// `p` is a live block of `span`, whose class is `class`; `pooled` says the span had no owner
/// when the caller read its owner word.
#[cold]
#[inline(never)]
unsafe fn free_heapless(span: &Span, class: usize, p: *mut u8, pooled: bool) {
    #[cfg(feature = "profiling")]
    if pooled && span.state.load(Ordering::Relaxed) == crate::span::STATE_LARGE {
        // SAFETY: forwarded.
        return unsafe { free_sampled(span, p) };
    }
    // SAFETY: `p` is a live block of `span`, freed once; the span stays allocated until it is
    // collected (it holds a live block until then), whether an owner or a pool's sweep collects
    // it.
    let pushed = unsafe { remote::try_push(&span.remote, p as usize, class != TINY_CLASS) };
    if !pushed {
        // SAFETY: forwarded.
        unsafe { free_other(span, p) };
    }
    let counted = count_remote(empty_heap(), class);
    if pooled && !counted.is_null() {
        // SAFETY: `counted` is this thread's live heap.
        note_pooled_free(unsafe { &*counted }, class);
    }
}

/// Counts a free into a pooled span of `class`; once a span's worth of them came from this
/// thread, sweeps a few of the class's pooled spans (without waiting for the pool's lock), so
/// that spans exited threads left behind go back to the page heap as their blocks are freed.
#[inline]
fn note_pooled_free(h: &Heap, class: usize) {
    // SAFETY: a span's class is below `SPAN_CLASSES`.
    let n = unsafe { h.pooled_frees.get_unchecked(class) };
    if n.get() as usize + 1 < span_blocks(class) {
        n.set(n.get() + 1);
    } else {
        n.set(0);
        central::sweep_after_frees(class);
    }
}

/// Counts a free into a span `heap` does not own (`heap` may be the sentinel), in this
/// thread's own counters: no line that other freeing threads write. Returns the heap counted
/// in (null: the shared counters).
#[inline(always)]
fn count_remote(heap: *mut Heap, class: usize) -> *mut Heap {
    let heap = if heap != empty_heap() {
        heap
    } else {
        counting_heap()
    };
    if !heap.is_null() {
        // SAFETY: `heap` is this thread's live heap.
        let h = unsafe { &*heap };
        inc(&h.remote_frees);
        // SAFETY: a span's class is below `SPAN_CLASSES`.
        inc(unsafe { h.frees.get_unchecked(class) });
    } else {
        stats::ORPHAN_FREES[class].fetch_add(1, Ordering::Relaxed);
        stats::ORPHAN_REMOTE.fetch_add(1, Ordering::Relaxed);
    }
    heap
}

/// A heap for a thread that frees before it ever allocated (a consumer that only frees what
/// others made): made on its first free, so that its frees are counted in counters of its own
/// rather than in the shared ones every such thread would write. Null for a thread whose heap
/// is already torn down (a destructor running after ours), for the first frees of a thread
/// while many threads have a heap (`key::heapless_turn`: a new thread frees the closure it was
/// started with before it allocates), or when no heap can be made: those frees are counted in
/// the shared counters.
#[cold]
#[inline(never)]
fn counting_heap() -> *mut Heap {
    if lifecycle::exited() || key::heapless_turn() {
        return ptr::null_mut();
    }
    lifecycle::init_heap().unwrap_or(ptr::null_mut())
}
