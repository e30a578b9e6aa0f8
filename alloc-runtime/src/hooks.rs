//! Test hooks (cargo feature `test-hooks`, for tests only; never in a normal build): park a
//! thread inside each lock and wait state that `fork` must get past, so that a test can fork
//! right then and check that the child does not hang (see `docs/fork.md`). A leaf: the heap
//! calls [`in_delivery`]; the public `test_hooks` module of the crate root re-exports this,
//! the heap's `hold_lock`, and, for the tests of what a thread writes of its heap and of its
//! outboxes, `thread_heap` (where the calling thread's heap is) and `DIRECT_FREES`, and for
//! the tests of a thread's first allocations, `SHARED_FIRST`, `HEAPLESS_FIRST` and
//! `SHARED_FROM_THREADS`.

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// A lock of the allocator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    /// The lock around creating the thread-exit key.
    Key,
    /// The shared heap (threads whose heap is torn down).
    Fallback,
    /// The pool of unused heaps.
    HeapPool,
    /// The central pool of a span class.
    Central(usize),
    /// The huge heap (the free runs of freed huge objects).
    HugeCache,
    /// The page heap.
    PageHeap,
}

/// Every lock, for tests that go through them all.
pub const ALL_LOCKS: [Lock; 6] = [
    Lock::Key,
    Lock::Fallback,
    Lock::HeapPool,
    Lock::Central(3),
    Lock::HugeCache,
    Lock::PageHeap,
];

/// While set, a thread that delivers a span (between claiming a notification and DELIVERED)
/// stays there for [`PARK_FOR`].
pub static PARK_IN_DELIVERY: AtomicBool = AtomicBool::new(false);
/// Threads parked inside a delivery right now.
pub static PARKED_IN_DELIVERY: AtomicUsize = AtomicUsize::new(0);
/// How long a parked delivery lasts.
pub const PARK_FOR: Duration = Duration::from_millis(300);

/// Called inside every delivery.
pub(crate) fn in_delivery() {
    if PARK_IN_DELIVERY.load(Ordering::Acquire) {
        PARKED_IN_DELIVERY.fetch_add(1, Ordering::AcqRel);
        std::thread::sleep(PARK_FOR);
        PARKED_IN_DELIVERY.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Threads a `fork` being prepared holds back at the delivery gate right now (they wait there
/// instead of starting a delivery).
pub static HELD_AT_GATE: AtomicUsize = AtomicUsize::new(0);

/// While set, the next thread to prepare a `fork` clears it and, once its prepare handler holds
/// new deliveries back and before it takes the locks, waits there until [`RESUME_FORK`] is
/// set (so that a test can run another thread's whole fork in that window).
pub static PARK_IN_FORK_PREPARE: AtomicBool = AtomicBool::new(false);
/// Set while a thread waits in its prepare handler (see [`PARK_IN_FORK_PREPARE`]).
pub static PARKED_IN_FORK_PREPARE: AtomicBool = AtomicBool::new(false);
/// Lets the thread parked in its prepare handler go on (cleared when it does).
pub static RESUME_FORK: AtomicBool = AtomicBool::new(false);

/// Called by the `fork` prepare handler between holding deliveries back and taking the locks.
pub(crate) fn in_fork_prepare() {
    if PARK_IN_FORK_PREPARE.swap(false, Ordering::AcqRel) {
        PARKED_IN_FORK_PREPARE.store(true, Ordering::Release);
        while !RESUME_FORK.swap(false, Ordering::AcqRel) {
            std::thread::sleep(Duration::from_millis(1));
        }
        PARKED_IN_FORK_PREPARE.store(false, Ordering::Release);
    }
}

/// `madvise` calls (`MADV_FREE`, `MADV_DONTNEED`) the kernel refused so far.
pub fn failed_advice() -> usize {
    crate::os::FAILED_ADVICE.load(core::sync::atomic::Ordering::Relaxed)
}
