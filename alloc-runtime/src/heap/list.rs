//! [`SpanList`]: an intrusive, circular, doubly linked list of span descriptors, through their
//! `next` and `prev` fields; the head's `prev` is the tail, so both ends are one load away. A
//! span is on at most one list at a time (its `ListTag` says which); only the list's owner (the
//! heap's thread, or the holder of a central pool's lock) touches it. A span on no list has null
//! links.

use core::cell::Cell;
use core::ptr;

use crate::span::Span;

/// The head of an intrusive circular list of spans.
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

    /// Links `s` (on no list) in before the head; returns whether the list was empty.
    fn link_before_head(&self, s: &Span) -> bool {
        debug_assert!(s.next.get().is_null() && s.prev.get().is_null());
        let sp = s as *const Span as *mut Span;
        let head = self.head.get();
        if head.is_null() {
            s.next.set(sp);
            s.prev.set(sp);
            self.head.set(sp);
            return true;
        }
        // SAFETY: list members are live descriptors owned by the list's owner (us).
        unsafe {
            let tail = (*head).prev.get();
            s.next.set(head);
            s.prev.set(tail);
            (*tail).next.set(sp);
            (*head).prev.set(sp);
        }
        false
    }

    /// Pushes `s` at the front.
    pub(crate) fn push_front(&self, s: &Span) {
        if !self.link_before_head(s) {
            self.head.set(s as *const Span as *mut Span);
        }
    }

    /// Pushes `s` at the back.
    pub(crate) fn push_back(&self, s: &Span) {
        self.link_before_head(s);
    }

    /// Takes `s`, a member, off the list.
    pub(crate) fn unlink(&self, s: &Span) {
        let sp = s as *const Span as *mut Span;
        let prev = s.prev.get();
        let next = s.next.get();
        debug_assert!(
            !prev.is_null() && !next.is_null(),
            "unlink of a span on no list"
        );
        if next == sp {
            debug_assert_eq!(self.head.get(), sp);
            self.head.set(ptr::null_mut());
        } else {
            // SAFETY: list members are live descriptors owned by the list's owner (us).
            unsafe {
                (*prev).next.set(next);
                (*next).prev.set(prev);
            }
            if self.head.get() == sp {
                self.head.set(next);
            }
        }
        s.next.set(ptr::null_mut());
        s.prev.set(ptr::null_mut());
    }

    /// Whether the list holds no span.
    pub(crate) fn is_empty(&self) -> bool {
        self.head.get().is_null()
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

    /// The last span of the list, left on it.
    pub(crate) fn back(&self) -> Option<&Span> {
        let head = self.head.get();
        if head.is_null() {
            return None;
        }
        // SAFETY: list members are live descriptors owned by the list's owner (us); the head's
        // `prev` is the tail.
        Some(unsafe { &*(*head).prev.get() })
    }

    /// Takes every member off the list and calls `f` on it, front to back; those for which `f`
    /// returns true go back on, in their order (`f` owns the others).
    pub(crate) fn retain(&self, mut f: impl FnMut(&Span) -> bool) {
        let keep = SpanList::new();
        while let Some(s) = self.pop_front() {
            if f(s) {
                keep.push_front(s);
            }
        }
        while let Some(s) = keep.pop_front() {
            self.push_front(s);
        }
    }

    /// Calls `f` on every member, front to back (`f` must not unlink them).
    pub(crate) fn for_each(&self, mut f: impl FnMut(&Span)) {
        let head = self.head.get();
        let mut p = head;
        while !p.is_null() {
            // SAFETY: list members are live descriptors owned by the list's owner (us).
            let s = unsafe { &*p };
            f(s);
            p = s.next.get();
            if p == head {
                break;
            }
        }
    }
}
