//! [`SpanList`]: an intrusive doubly linked list of span descriptors, through their `next` and
//! `prev` fields. A span is on at most one list at a time (its `ListTag` says which); only the
//! list's owner (the heap's thread, or the holder of a central pool's lock) touches it.

use core::cell::Cell;
use core::ptr;

use crate::span::Span;

/// The head of an intrusive list of spans.
pub(crate) struct SpanList {
    head: Cell<*mut Span>,
}

impl SpanList {
    /// An empty list.
    pub(crate) const fn new() -> SpanList {
        SpanList {
            head: Cell::new(ptr::null_mut()),
        }
    }

    /// Pushes `s` at the front.
    pub(crate) fn push_front(&self, s: &Span) {
        let sp = s as *const Span as *mut Span;
        let old = self.head.get();
        s.prev.set(ptr::null_mut());
        s.next.set(old);
        if !old.is_null() {
            // SAFETY: list members are live descriptors owned by the list's owner (us).
            unsafe { (*old).prev.set(sp) };
        }
        self.head.set(sp);
    }

    /// Takes `s`, a member, off the list.
    pub(crate) fn unlink(&self, s: &Span) {
        let prev = s.prev.get();
        let next = s.next.get();
        if prev.is_null() {
            debug_assert_eq!(self.head.get(), s as *const Span as *mut Span);
            self.head.set(next);
        } else {
            // SAFETY: list members are live descriptors owned by the list's owner (us).
            unsafe { (*prev).next.set(next) };
        }
        if !next.is_null() {
            // SAFETY: as above.
            unsafe { (*next).prev.set(prev) };
        }
        s.next.set(ptr::null_mut());
        s.prev.set(ptr::null_mut());
    }

    /// Takes the first span off the list.
    pub(crate) fn pop_front(&self) -> Option<&Span> {
        let p = self.head.get();
        if p.is_null() {
            return None;
        }
        // SAFETY: list members are live descriptors (descriptors live in chunk headers, which
        // are never unmapped), owned by the list's owner (us).
        let s = unsafe { &*p };
        self.unlink(s);
        Some(s)
    }

    /// Calls `f` on every member, front to back (`f` must not unlink them).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Span)) {
        let mut p = self.head.get();
        while !p.is_null() {
            // SAFETY: list members are live descriptors owned by the list's owner (us).
            let s = unsafe { &*p };
            f(s);
            p = s.next.get();
        }
    }
}
