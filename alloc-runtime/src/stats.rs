//! Allocation counters kept outside the thread heaps: slow-path events (spans, large objects,
//! frees by threads without a heap) as global atomics. A leaf: every layer may count here, and
//! only the snapshot (`snapshot.rs`, [`crate::stats()`]) reads the counters, together with the
//! per-heap ones.

use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::span::SPAN_CLASSES;

/// Spans in use per class.
pub(crate) static SPANS: [AtomicUsize; SPAN_CLASSES] =
    [const { AtomicUsize::new(0) }; SPAN_CLASSES];
/// Frees by threads whose heap is torn down or could not be made, and a thread's first frees
/// before it has a heap while many threads have one (per class); a thread that frees before it
/// allocates otherwise gets a heap for its counters (see `heap::miss::counting_heap`).
pub(crate) static ORPHAN_FREES: [AtomicU64; SPAN_CLASSES] =
    [const { AtomicU64::new(0) }; SPAN_CLASSES];
/// Remote frees by threads without a heap (as for [`ORPHAN_FREES`]).
pub(crate) static ORPHAN_REMOTE: AtomicU64 = AtomicU64::new(0);
pub(crate) static LARGE_ALLOCS: AtomicU64 = AtomicU64::new(0);
pub(crate) static LARGE_FREES: AtomicU64 = AtomicU64::new(0);
pub(crate) static LARGE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Highest bytes in use seen so far (pages handed out by the page heap plus live huge objects' runs).
/// Bytes of pages handed out by the page heap (readable without its lock).
pub(crate) static IN_USE_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Bytes of live huge objects' runs of pages (header page included).
pub(crate) static HUGE_BYTES: AtomicUsize = AtomicUsize::new(0);
pub(crate) static PEAK_IN_USE: AtomicUsize = AtomicUsize::new(0);

/// Records the current in-use bytes in the peak (called on slow paths that grow them).
pub(crate) fn note_in_use() {
    let cur = IN_USE_BYTES.load(Ordering::Relaxed) + HUGE_BYTES.load(Ordering::Relaxed);
    PEAK_IN_USE.fetch_max(cur, Ordering::Relaxed);
}

pub(crate) fn large_alloc(bytes: usize) {
    LARGE_ALLOCS.fetch_add(1, Ordering::Relaxed);
    LARGE_BYTES.fetch_add(bytes, Ordering::Relaxed);
}

pub(crate) fn large_free(bytes: usize) {
    LARGE_FREES.fetch_add(1, Ordering::Relaxed);
    LARGE_BYTES.fetch_sub(bytes, Ordering::Relaxed);
}

pub(crate) fn large_resize(old: usize, new: usize) {
    if new >= old {
        LARGE_BYTES.fetch_add(new - old, Ordering::Relaxed);
    } else {
        LARGE_BYTES.fetch_sub(old - new, Ordering::Relaxed);
    }
}
