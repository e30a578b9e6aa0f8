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

/// The runtime's [`DeliveryGate`]: a count of deliveries in progress, with a bit that a `fork`
/// being prepared sets to hold new ones back until the fork is done.
pub(crate) struct Deliveries;

/// Deliveries in progress (low bits) and [`FORKING`].
static DELIVERIES: AtomicUsize = AtomicUsize::new(0);
/// Set while a `fork` is prepared: no delivery starts.
const FORKING: usize = 1 << (usize::BITS - 1);

impl DeliveryGate for Deliveries {
    fn enter(&self) {
        loop {
            if DELIVERIES.fetch_add(1, Ordering::Acquire) & FORKING == 0
                || crate::lock::is_forking_thread()
            {
                // No fork is prepared; or this is the forking thread (another `fork` handler
                // freeing), which holds every lock while the others are held back.
                return;
            }
            DELIVERIES.fetch_sub(1, Ordering::Release);
            while DELIVERIES.load(Ordering::Acquire) & FORKING != 0 {
                spin_loop();
            }
        }
    }

    fn leave(&self) {
        DELIVERIES.fetch_sub(1, Ordering::Release);
    }
}

/// `fork` prepare: holds new deliveries back and waits for those in progress to finish (they
/// take no lock, so they finish).
pub(crate) fn fork_prepare() {
    DELIVERIES.fetch_or(FORKING, Ordering::AcqRel);
    while DELIVERIES.load(Ordering::Acquire) & !FORKING != 0 {
        spin_loop();
    }
}

/// `fork` parent handler: lets deliveries start again.
pub(crate) fn fork_parent() {
    DELIVERIES.fetch_and(!FORKING, Ordering::Release);
}

/// `fork` child handler: the child's only thread is the one that forked, which delivers
/// nothing; a count another thread held for an instant when the process was copied is void.
pub(crate) fn fork_child() {
    DELIVERIES.store(0, Ordering::Release);
}
