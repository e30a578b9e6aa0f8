//! The trim lock between a heap's owner and the background trimmer (the protocol is in
//! `trim_proto.rs`, shared verbatim with the loom model in `tests/loom_trim.rs`): the owner holds
//! it on every slow path, through [`Heap::enter`]; the trimmer (`idle.rs`) tries it.

#![allow(dead_code)]

use core::hint::spin_loop;
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use super::Heap;
use crate::remote::COUNT_SHIFT;
use crate::span::Span;

include!("../trim_proto.rs");

/// The owner's hold on its heap's trim lock, released when dropped (if this slow path took it).
pub(crate) struct OwnerGuard<'a> {
    lock: Option<&'a AtomicU32>,
}

impl Drop for OwnerGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(l) = self.lock {
            owner_leave(l);
        }
    }
}

impl Heap {
    /// The owner enters a slow path of `self` (see [`OwnerGuard`]); counts the entry, which
    /// tells the trimmer the heap is not idle.
    ///
    /// `self` must be this thread's heap, or the fallback heap under its lock.
    #[inline]
    pub(crate) fn enter(&self) -> OwnerGuard<'_> {
        if owner_enter(&self.trim) {
            let n = self.slow_entries.load(Ordering::Relaxed);
            self.slow_entries
                .store(n.wrapping_add(1), Ordering::Relaxed);
            OwnerGuard {
                lock: Some(&self.trim),
            }
        } else {
            OwnerGuard { lock: None }
        }
    }
}

/// Whether `s`, a span on a list of a heap whose trim lock the caller holds, has no live block.
#[inline]
pub(super) fn no_live_block(s: &Span) -> bool {
    holds_no_live_block(&s.remote, s.used.atomic())
}

/// Takes `h`'s trim lock as its owner does, around a `fork` of its thread (the owner is in no
/// slow path then).
pub(super) fn fork_hold(h: &Heap) {
    let took = owner_enter(&h.trim);
    debug_assert!(took, "fork from inside a slow path");
}

/// In a `fork` child, frees the trim lock of a heap in the pool of unused heaps: the trimmer,
/// which did not survive the fork, may have held it (it tries a heap as its thread exits), and the
/// next thread to take the heap would wait for it forever. A pooled heap holds nothing, so
/// nothing was left half done.
pub(super) fn fork_child_free(h: &Heap) {
    h.trim.store(FREE, Ordering::Release);
}

/// Releases what [`fork_hold`] took (in the parent, or in the child, where the trimmer's thread
/// is gone).
pub(super) fn fork_release(h: &Heap) {
    owner_leave(&h.trim);
}
