//! Cross-thread frees: the remote-free list of each span and the delayed list of each heap.
//!
//! The protocol itself is in `remote_proto.rs`, shared verbatim with the loom model in
//! `tests/loom_remote.rs`; see the comment at its top for the states and their transitions.

#![allow(dead_code)]

use core::hint::spin_loop;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Links hold a block's offset within its chunk.
const LINK_MASK: usize = crate::size_class::CHUNK_SIZE - 1;

include!("remote_proto.rs");

/// The runtime's [`DeliveryGate`]: a count of deliveries in progress, with a count of the
/// `fork`s being prepared, which hold new deliveries back until they are done.
pub(crate) struct Deliveries;

/// Deliveries in progress (the low half) and `fork`s being prepared (the high half, in units
/// of [`FORK`]). Forks are counted, not flagged: glibc runs `pthread_atfork` handlers without
/// a lock of its own, so two threads' forks can overlap, and the first to finish must not let
/// deliveries start while the second is between its prepare handler and its fork.
static DELIVERIES: AtomicUsize = AtomicUsize::new(0);
/// One `fork` being prepared.
const FORK: usize = 1 << (usize::BITS / 2);
/// The deliveries in progress, in [`DELIVERIES`].
const IN_PROGRESS: usize = FORK - 1;

impl DeliveryGate for Deliveries {
    fn enter(&self) {
        loop {
            if DELIVERIES.fetch_add(1, Ordering::Acquire) < FORK || crate::lock::is_forking_thread()
            {
                // No fork is prepared; or this is the forking thread (another `fork` handler
                // freeing), which holds every lock while the others are held back.
                return;
            }
            DELIVERIES.fetch_sub(1, Ordering::Release);
            #[cfg(feature = "test-hooks")]
            crate::hooks::HELD_AT_GATE.fetch_add(1, Ordering::AcqRel);
            while DELIVERIES.load(Ordering::Acquire) >= FORK {
                spin_loop();
            }
            #[cfg(feature = "test-hooks")]
            crate::hooks::HELD_AT_GATE.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn leave(&self) {
        DELIVERIES.fetch_sub(1, Ordering::Release);
    }
}

/// `fork` prepare: holds new deliveries back and waits for those in progress to finish (they
/// take no lock, so they finish).
pub(crate) fn fork_prepare() {
    DELIVERIES.fetch_add(FORK, Ordering::AcqRel);
    while DELIVERIES.load(Ordering::Acquire) & IN_PROGRESS != 0 {
        spin_loop();
    }
}

/// `fork` parent handler: this fork no longer holds deliveries back (others being prepared
/// still do).
pub(crate) fn fork_parent() {
    DELIVERIES.fetch_sub(FORK, Ordering::Release);
}

/// `fork` child handler: the child's only thread is the one that forked, which delivers
/// nothing; the counts of the other threads (a delivery they were making, a fork they were
/// preparing) are void. So are this thread's forks: in the child of a fork made inside
/// another's handlers, the outer forks no longer hold deliveries back there (see
/// [`Forks`](crate::lock::Forks)).
pub(crate) fn fork_child() {
    DELIVERIES.store(0, Ordering::Release);
}
