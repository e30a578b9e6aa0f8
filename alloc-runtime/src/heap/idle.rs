//! The background trimmer's work on one heap: what an idle thread's heap holds that no block
//! of the program is in gives back to the page heap, without the thread. Under the heap's trim
//! lock (`trimlock.rs`, which the owner holds on every slow path), so only while the owner is not
//! in one; the current spans stay the owner's (its fast path allocates from them without a lock).
//!
//! Given back: the outboxes (published to their spans), the kept empty spans, every span on the
//! partial and full lists whose blocks have all been freed (by the owner or, onto their remote
//! lists, by other threads), those of the delayed list, and the reserve of page runs.

use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use super::list::SpanList;
use super::outbox::publish_outboxes;
use super::owned::{collect_remote, release_span};
use super::trimlock::{barrier_ready, no_live_block, trimmer_leave, trimmer_try};
use super::{Heap, NOT_BARE};
use crate::remote;
use crate::span::{ListTag, Span};

/// Heaps a pass looks at, at most, when the registry holds more (see [`trim_idle_heaps`]).
const LOOKS_PER_PASS: usize = 1024;
/// With more heaps than [`LOOKS_PER_PASS`], the passes over which every heap is looked at.
const PASSES_PER_ROUND: usize = 10;

/// The registry heap the next pass starts at (null: its head). The trimmer's own.
static NEXT_LOOK: AtomicPtr<Heap> = AtomicPtr::new(ptr::null_mut());

/// The trimmer's pass over the registry of heaps (`head`, holding `made` heaps): trims each
/// active heap [`worth_trimming`]. Up to [`LOOKS_PER_PASS`] heaps, a pass looks at every one;
/// with more, it goes on from where the last stopped, through a tenth of them (and at least
/// `LOOKS_PER_PASS`), so that each is looked at every [`PASSES_PER_ROUND`] passes: a process
/// with thousands of blocked threads does not pay a cache and TLB miss per thread on every wake
/// (16,000 threads: a third of the process's samples). Returns the bytes given back.
pub(super) fn trim_idle_heaps(head: *mut Heap, made: usize) -> usize {
    let looks = looks_per_pass(made);
    let mut h = NEXT_LOOK.load(Ordering::Relaxed);
    let mut bytes = 0;
    for _ in 0..looks {
        if h.is_null() {
            h = head;
        }
        // SAFETY: registry members are live heaps, never freed, whose `all_next` is written
        // before they are published; `head` is the registry's head.
        let hr = unsafe { &*h };
        if hr.active.load(Ordering::Relaxed) && worth_trimming(hr) {
            bytes += trim(hr);
        }
        h = hr.all_next.get();
    }
    NEXT_LOOK.store(h, Ordering::Relaxed);
    bytes
}

/// Heaps a pass looks at when the registry holds `made`.
fn looks_per_pass(made: usize) -> usize {
    made.min(made.div_ceil(PASSES_PER_ROUND).max(LOOKS_PER_PASS))
}

/// Gives back what `h` holds and does not use, unless its owner is in a slow path. Returns the
/// bytes given back to the page heap.
fn trim(h: &Heap) -> usize {
    if !barrier_ready() || !trimmer_try(&h.trim_owner, &h.trim_trimmer) {
        return 0;
    }
    // Its thread may have exited since the caller looked (it gave everything away then).
    let bytes = if h.active.load(Ordering::Relaxed) {
        trim_locked(h)
    } else {
        0
    };
    trimmer_leave(&h.trim_trimmer);
    bytes
}

/// Whether the trimmer should try `h` on this pass: its owner entered no slow path since the
/// last call (the first call says no), and it may hold something to give back.
///
/// A trim that leaves a heap *bare* (no span on its partial and full lists; its outboxes and
/// reserve are always emptied) records the owner word it saw and the head of its delayed list.
/// While both stay as recorded, the heap stays bare: lists, outboxes and reserve change only on
/// the owner's slow paths, which change the word; a span is delivered to the delayed list (a
/// push, which changes its head, and which only the owner or the trimmer undo) only when it is
/// parked full, so on a list, or current (its notification request stays armed when it comes
/// back), which the trimmer leaves alone. Such a heap is passed without its lock, so a pass over
/// thousands of blocked threads' heaps runs no `membarrier` for any of them.
pub(super) fn worth_trimming(h: &Heap) -> bool {
    let now = h.owner_word();
    let seen = h.trim_seen.swap(now, Ordering::Relaxed);
    if seen != now {
        // Busy: what the last trim recorded no longer holds (and must not match the word
        // again after it wraps).
        h.trim_bare_at.store(NOT_BARE, Ordering::Relaxed);
        return false;
    }
    h.trim_bare_at.load(Ordering::Relaxed) != now
        || h.trim_delayed_at.load(Ordering::Relaxed) != h.delayed.load(Ordering::Relaxed)
}

/// [`trim`] with the lock held.
fn trim_locked(h: &Heap) -> usize {
    publish_outboxes(h);
    // Spans other threads delivered: the empty ones are taken off the delayed list (and given
    // back below, or here if their owner already let them go); the others go back on it, as
    // delivered, for the owner.
    let mut p = remote::take_delayed(&h.delayed);
    while p != 0 {
        // SAFETY: a delivered span stays allocated, and owned by `h`, until it is taken off the
        // delayed list, which we now hold (see `slow::process_delayed`).
        let s = unsafe { &*(p as *const Span) };
        p = s.delayed_next.load(Ordering::Relaxed);
        let tag = s.tag();
        let empty = tag == ListTag::Releasing
            || (matches!(tag, ListTag::Partial | ListTag::Full) && no_live_block(s));
        if !empty {
            remote::push_delayed(&h.delayed, s as *const Span as usize, &s.delayed_next);
            continue;
        }
        remote::take_delivered(&s.remote);
        if tag == ListTag::Releasing {
            s.set_tag(ListTag::None);
            // SAFETY: an empty span on no list, owned by `h`, off the delayed list.
            unsafe { release_span(s) };
        }
    }
    let mut bytes = 0;
    for cc in &h.classes[1..] {
        bytes += give_back_empty(&cc.partial);
    }
    bytes += give_back_empty(&h.full);
    // Every span left on a partial list holds a live block.
    h.empty_kept.set(0);
    bytes += super::reserve::release(h);
    let bare = h.full.is_empty() && h.classes[1..].iter().all(|cc| cc.partial.is_empty());
    // The owner is out of its slow paths while we hold the lock: its word stays as read here
    // until we leave, but for an owner waiting for us, which makes it odd for a moment (an odd
    // word never matches an idle one: the skip is lost once).
    h.trim_bare_at.store(
        if bare { h.owner_word() } else { NOT_BARE },
        Ordering::Relaxed,
    );
    h.trim_delayed_at
        .store(h.delayed.load(Ordering::Relaxed), Ordering::Relaxed);
    bytes
}

/// Gives back the spans of `list` that hold no live block; keeps the others in their order.
fn give_back_empty(list: &SpanList) -> usize {
    let mut bytes = 0;
    list.retain(|s| {
        if !no_live_block(s) {
            return true;
        }
        collect_remote(s);
        debug_assert_eq!(s.used.get(), 0);
        bytes += s.npages.get() as usize * crate::size_class::PAGE_SIZE;
        s.set_tag(ListTag::None);
        // SAFETY: owned by `h` (whose trim lock we hold), no live block, off its list.
        unsafe { release_span(s) };
        false
    });
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_heap_is_looked_at_within_a_round() {
        for made in [
            0,
            1,
            16,
            LOOKS_PER_PASS,
            LOOKS_PER_PASS + 1,
            5_000,
            16_000,
            1 << 20,
        ] {
            let looks = looks_per_pass(made);
            assert!(looks <= made);
            // All of them on every pass up to the limit; beyond it, every heap within a round.
            if made <= LOOKS_PER_PASS {
                assert_eq!(looks, made);
            } else {
                assert!(looks >= LOOKS_PER_PASS);
                assert!(looks * PASSES_PER_ROUND >= made, "{made}: {looks}");
            }
        }
        assert_eq!(looks_per_pass(16_000), 1_600);
    }
}
