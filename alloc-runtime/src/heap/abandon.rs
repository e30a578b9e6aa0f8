//! Giving a heap's spans away: at its thread's exit, and the shared heap's once no thread has
//! used it for a while.
//!
//! Both hand every span on as the exit protocol does (`central_proto.rs`, `remote_proto.rs`):
//! no span may ask for a notification after this, the delivered ones are taken back, and each
//! span goes to the page heap if none of its blocks is live, else to its class's central pool,
//! where any thread's refill takes it before fresh pages.

use core::sync::atomic::Ordering;

use super::central::give_away;
use super::slow::process_delayed;
use super::Heap;
use crate::remote;
use crate::span::{empty_span, Span, SPAN_CLASSES};

/// Gives away every span `h` owns: empty ones to the page heap, the others to the central pools;
/// and its reserve of page runs to the page heap.
///
/// # Safety
/// `h` is a heap no thread will use again without taking it from the pool, or the shared heap
/// with its lock held.
pub(super) unsafe fn abandon(h: &Heap) {
    // 1. No span of ours may be NOTIFY or NOTIFYING: after this, nobody delivers to `h`.
    for_each_owned(h, |s| {
        remote::quiesce(&s.remote);
    });
    // 2. Take what was delivered before that (without asking for new notifications).
    process_delayed(h, true);
    debug_assert_eq!(h.delayed.load(Ordering::Relaxed), 0);
    // 3. Hand every span on.
    for cc in &h.classes[1..] {
        let cur = cc.current.get();
        if cur != empty_span() {
            cc.current.set(empty_span());
            // SAFETY: the current span is a live descriptor owned by `h`.
            let s = unsafe { &*cur };
            s.used.set(s.used.get() - 1); // unpin
                                          // SAFETY: owned by `h`, quiesced, on no list.
            unsafe { give_away(s) };
        }
        while let Some(s) = cc.partial.pop_front() {
            // SAFETY: as above.
            unsafe { give_away(s) };
        }
    }
    while let Some(s) = h.full.pop_front() {
        // SAFETY: as above.
        unsafe { give_away(s) };
    }
    h.empty_kept.set(0);
    // 4. The page runs kept for new spans go back to the page heap, and the home chunk is
    // another heap's to take.
    super::reserve::release(h);
    h.home.leave();
}

/// The shared heap's part of the background trimmer's pass: once no thread has used it since the
/// pass before (the idle-heap trimmer's test, `idle::worth_trimming`), it gives every span away
/// as an exiting thread's heap does, and stays usable (a thread that allocates from it next
/// takes spans again, from the central pools first).
///
/// # Safety
/// `h` is the shared heap, and the caller holds its lock, which makes it the heap's only user.
pub(super) unsafe fn give_back_shared(h: &Heap) {
    if !super::idle::worth_trimming(h) {
        return;
    }
    {
        // As its users do (`slow::alloc_from`).
        let _inside = h.enter();
        // Its threads free into other heaps' spans through their own heaps, so its outboxes
        // stay empty and there is nothing to publish first.
        debug_assert!(!h.outboxes_used.get());
        // SAFETY: the caller's lock keeps every other thread out of `h` until it is left.
        unsafe { abandon(h) };
    }
    // Bare until a thread uses it again: the passes until then skip it (see `worth_trimming`,
    // whose look this entry must not count as a user's).
    let word = h.owner_word();
    h.trim_seen.store(word, Ordering::Relaxed);
    h.trim_bare_at.store(word, Ordering::Relaxed);
    h.trim_delayed_at
        .store(h.delayed.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// Calls `f` on every span `h` owns: its current spans, its partial and full lists.
fn for_each_owned(h: &Heap, mut f: impl FnMut(&Span)) {
    for cc in &h.classes[1..SPAN_CLASSES] {
        let cur = cc.current.get();
        if cur != empty_span() {
            // SAFETY: the current span is a live descriptor owned by `h`.
            f(unsafe { &*cur });
        }
        cc.partial.for_each(&mut f);
    }
    h.full.for_each(&mut f);
}
