//! Central pools: per class, the spans that exited threads abandoned with live blocks in them.
//! Nobody owns a pooled span; whoever holds its pool's lock acts as its owner. Frees into a
//! pooled span take no lock: they push on its remote list like any free into a span the thread
//! does not own. A refill of the class adopts pooled spans ([`central_pop`]), and sweeps give
//! the emptied ones back to the page heap ([`give_away`] and [`sweep_next`], when a thread takes
//! fresh pages, look at a few, [`sweep_all`] at all).
//!
//! The protocol is in `central_proto.rs`, shared with the loom model `tests/loom_central.rs`;
//! this file binds it to [`Span`] and the pools' locks.

use core::sync::atomic::{AtomicUsize, Ordering};

use super::list::SpanList;
use super::owned::{collect_remote, release_span};
use crate::lock::SpinLock;
use crate::size_class::PAGE_SIZE;
use crate::span::{span_pages, ListTag, Span, SPAN_CLASSES};

/// The central-pool protocol (shared with the loom model).
mod proto {
    #![allow(dead_code)]
    use core::ops::DerefMut;

    include!("central_proto.rs");
}

const _: () = assert!(proto::TAG_CENTRAL == ListTag::Central as u8);
const _: () = assert!(proto::TAG_NONE == ListTag::None as u8);

/// One class's pool.
pub(super) struct Central {
    list: SpanList,
    /// The pool's class (its index in [`CENTRAL`]); its length is `POOLED[class]`.
    class: usize,
}

impl Central {
    /// Spans in the pool (exact under the lock).
    fn count(&self) -> usize {
        POOLED[self.class].load(Ordering::Relaxed)
    }

    /// Sets the pool's length (under the lock).
    fn set_len(&mut self, len: usize) {
        POOLED[self.class].store(len, Ordering::Relaxed);
    }
}

/// Spans in each class's pool: written under the pool's lock, so exact there, and a hint to
/// readers without it ([`sweep_next`], [`central_pop`], the statistics).
static POOLED: [AtomicUsize; SPAN_CLASSES] = [const { AtomicUsize::new(0) }; SPAN_CLASSES];

/// Where [`sweep_next`] looks first.
static SWEEP_CURSOR: AtomicUsize = AtomicUsize::new(0);
// SAFETY: the list is only touched under its lock.
unsafe impl Send for Central {}

impl proto::PoolList<Span> for Central {
    fn push(&mut self, span: &Span) {
        self.list.push_front(span);
        self.set_len(self.count() + 1);
    }

    fn unlink(&mut self, span: &Span) {
        self.list.unlink(span);
        self.set_len(self.count() - 1);
    }

    fn pop(&mut self) -> Option<*const Span> {
        let s = self.list.pop_front()? as *const Span;
        self.set_len(self.count() - 1);
        Some(s)
    }

    fn back(&self) -> Option<*const Span> {
        self.list.back().map(|s| s as *const Span)
    }

    fn len(&self) -> usize {
        self.count()
    }
}

impl proto::PoolSpan for Span {
    fn tag(&self) -> u8 {
        self.list.get()
    }

    fn set_tag(&self, tag: u8) {
        self.list.set(tag);
    }

    fn set_owner(&self, heap: usize) {
        self.owner
            .store(heap, core::sync::atomic::Ordering::Relaxed);
    }

    fn used(&self) -> u32 {
        self.used.get()
    }

    fn collect_remote(&self) -> u32 {
        collect_remote(self)
    }

    unsafe fn release(&self) {
        // SAFETY: forwarded.
        unsafe { release_span(self) }
    }
}

/// The pools, one per span class.
pub(super) static CENTRAL: [SpinLock<Central>; SPAN_CLASSES] = {
    let mut pools = [const {
        SpinLock::new(Central {
            list: SpanList::new(),
            class: 0,
        })
    }; SPAN_CLASSES];
    let mut c = 0;
    while c < SPAN_CLASSES {
        pools[c] = SpinLock::new(Central {
            list: SpanList::new(),
            class: c,
        });
        c += 1;
    }
    pools
};

/// Gives away a span the exiting owner took off its lists: to the page heap if empty, else to
/// its class's pool.
///
/// # Safety
/// The caller owns `s`, which is quiesced.
pub(super) unsafe fn give_away(s: &Span) {
    let class = s.class.get() as usize;
    debug_assert_eq!(
        s.remote.load(Ordering::Relaxed) & crate::remote::STATE_MASK,
        crate::remote::NONE,
        "a span given away must be quiesced: no delivery may name its exited owner"
    );
    // SAFETY: forwarded.
    unsafe { proto::give_away(s, || CENTRAL[class].lock()) }
}

/// Takes a span out of `class`'s pool; the caller owns it from then on.
pub(super) fn central_pop(class: usize) -> Option<&'static Span> {
    if POOLED[class].load(Ordering::Relaxed) == 0 {
        // Nothing pooled (a hint: a span pooled right now waits for the next refill).
        return None;
    }
    let s = proto::central_pop(CENTRAL[class].lock())?;
    // SAFETY: descriptors live in chunk headers, which are never unmapped.
    Some(unsafe { &*s })
}

/// Sweeps every pool: pooled spans whose blocks have all been freed go back to the page heap.
/// Returns the bytes given back.
pub(crate) fn sweep_all() -> usize {
    let mut bytes = 0;
    for (class, pool) in CENTRAL.iter().enumerate().skip(1) {
        let spans = proto::sweep(|| pool.lock(), usize::MAX);
        bytes += spans * span_pages(class) * PAGE_SIZE;
    }
    bytes
}

/// Sweeps a few spans of the next pool that holds any (round robin over the classes): called
/// when a thread takes fresh pages for a span, so that spans exited threads left behind, once
/// their blocks are all freed, go back to the page heap as the program keeps allocating, even in
/// classes nobody refills and without `collect()`.
pub(super) fn sweep_next() {
    let start = SWEEP_CURSOR.load(Ordering::Relaxed);
    for i in 0..SPAN_CLASSES {
        let class = (start + i) % SPAN_CLASSES;
        if POOLED[class].load(Ordering::Relaxed) != 0 {
            SWEEP_CURSOR.store(class + 1, Ordering::Relaxed);
            proto::sweep(|| CENTRAL[class].lock(), proto::SWEEP_ON_PUSH);
            return;
        }
    }
}

/// A freeing thread's share of the sweeping: a thread that freed a span's worth of blocks into
/// `class`'s pooled spans sweeps a few of them, if the pool's lock is free (it never waits for
/// it: the free stays lock-free, and whoever holds the lock is working on the pool anyway).
pub(super) fn sweep_after_frees(class: usize) {
    if let Some(pool) = CENTRAL[class].try_lock() {
        proto::sweep_locked(pool, proto::SWEEP_ON_PUSH);
    }
}

/// Spans in the central pool of each class.
pub(crate) fn central_lens() -> [usize; SPAN_CLASSES] {
    core::array::from_fn(|c| CENTRAL[c].lock().count())
}
