//! Central pools: per class, the spans that exited threads abandoned with live blocks in them.
//! Nobody owns a pooled span; whoever holds its pool's lock acts as its owner. Frees into a
//! pooled span are done under the lock ([`free_to_central`]), so the span goes back to the page
//! heap with its last block; a refill of the class adopts pooled spans ([`central_pop`]).

use core::sync::atomic::Ordering;

use super::list::SpanList;
use super::slow::{collect_remote, release_span};
use crate::lock::SpinLock;
use crate::span::{ListTag, Span, SPAN_CLASSES};

/// One class's pool.
pub(super) struct Central {
    list: SpanList,
    len: usize,
}
// SAFETY: the list is only touched under its lock.
unsafe impl Send for Central {}

/// The pools, one per span class.
pub(super) static CENTRAL: [SpinLock<Central>; SPAN_CLASSES] = [const {
    SpinLock::new(Central {
        list: SpanList::new(),
        len: 0,
    })
}; SPAN_CLASSES];

/// Frees `p` into an abandoned span, acting as its owner under the central lock, so that spans
/// of exited threads go back to the page heap as soon as their last block is freed. Returns
/// false (and does nothing) if the span has been adopted meanwhile.
///
/// # Safety
/// `p` is a live block of `s`, of class `class`.
pub(super) unsafe fn free_to_central(class: usize, s: &Span, p: *mut u8) -> bool {
    let mut c = CENTRAL[class].lock();
    if s.tag() != ListTag::Central {
        return false;
    }
    // SAFETY: a span in the central pool is owned by whoever holds its lock: us.
    unsafe { s.push_local(p.cast()) };
    s.used.set(s.used.get() - 1);
    collect_remote(s);
    if s.used.get() == 0 {
        c.list.unlink(s);
        c.len -= 1;
        drop(c);
        s.set_tag(ListTag::None);
        // SAFETY: no live block, off every list, and nobody else can reach it (its owner word
        // is 0 and its tag no longer Central, so frees go to its remote list, and it has no
        // live block to free).
        unsafe { release_span(s) };
    }
    true
}

/// Puts an abandoned span (owned by the caller, on no list, quiesced) in its class's pool.
pub(super) fn central_push(class: usize, s: &Span) {
    let mut c = CENTRAL[class].lock();
    // Under the lock: a thread that sees owner 0 and frees into the span through
    // `free_to_central` must find it on the pool list, after everything we did to it.
    s.owner.store(0, Ordering::Relaxed);
    s.set_tag(ListTag::Central);
    c.list.push_front(s);
    c.len += 1;
}

/// Takes a span out of `class`'s pool; the caller owns it from then on.
pub(super) fn central_pop(class: usize) -> Option<&'static Span> {
    let mut c = CENTRAL[class].lock();
    let s = c.list.pop_front()?;
    // SAFETY: descriptors live in chunk headers, which are never unmapped.
    let s: &'static Span = unsafe { &*(s as *const Span) };
    s.set_tag(ListTag::None);
    c.len -= 1;
    Some(s)
}

/// Spans in the central pool of each class.
pub(crate) fn central_lens() -> [usize; SPAN_CLASSES] {
    core::array::from_fn(|c| CENTRAL[c].lock().len)
}
