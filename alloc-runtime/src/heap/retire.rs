//! Busy threads let go of the size classes they stopped allocating in: the background
//! trimmer's wakes of its interval are counted (not the default trimmer's shorter first sleeps,
//! see `purge.rs`), and a heap's first refill after one gives up the current span of each class
//! it did not allocate in since the wake before.

use core::sync::atomic::{AtomicU32, Ordering};

use super::owned::{collect_remote, release_span};
use super::Heap;
use crate::span::{empty_span, ListTag, SPAN_CLASSES};

/// The background trimmer's count of its interval's wakes (wrapping): a heap's next refill after it changed looks
/// for classes the heap stopped allocating in ([`retire_unused`]).
static RETIRE_EPOCH: AtomicU32 = AtomicU32::new(0);

/// Counts a wake of the background trimmer's interval (see [`RETIRE_EPOCH`]).
pub(crate) fn next_retire_epoch() {
    RETIRE_EPOCH.store(
        RETIRE_EPOCH.load(Ordering::Relaxed).wrapping_add(1),
        Ordering::Relaxed,
    );
}

/// Lets go of the current span of every class `h` has not allocated in since its last look (a
/// wake of the background trimmer ago, at least): the span goes on the partial list, or back to
/// the page heap when none of its blocks is live, so that the spans a busy thread holds do not
/// grow with the number of classes it ever touched. A pinned current span never empties; a
/// listed one goes back as soon as its last block is freed, or to the trimmer once the thread is
/// idle. Runs at a refill (`slow::alloc_from`), under the trim lock.
#[cold]
#[inline(never)]
pub(super) fn retire_unused(h: &Heap) {
    h.retire_seen.set(RETIRE_EPOCH.load(Ordering::Relaxed));
    for class in 1..SPAN_CLASSES {
        let cc = &h.classes[class];
        let allocs = crate::raw::load_u64(&cc.allocs);
        let seen = &cc.allocs_seen;
        if allocs != seen.get() {
            seen.set(allocs);
            continue;
        }
        let cur = cc.current.get();
        if cur == empty_span() {
            continue;
        }
        // SAFETY: the current span is a live descriptor owned by `h`.
        let s = unsafe { &*cur };
        cc.current.set(empty_span());
        s.set_tag(ListTag::None);
        collect_remote(s);
        let used = s.used.get() - 1; // unpin
        s.used.set(used);
        if used == 0 {
            // SAFETY: no live block, on no list, owned.
            unsafe { release_span(s) };
        } else {
            // With or without a free block: a refill that finds none parks it as full.
            s.set_tag(ListTag::Partial);
            cc.partial.push_front(s);
        }
    }
}

/// Whether `h` has not looked for unused classes since the trimmer's last wake.
#[inline]
pub(super) fn due(h: &Heap) -> bool {
    RETIRE_EPOCH.load(Ordering::Relaxed) != h.retire_seen.get()
}
