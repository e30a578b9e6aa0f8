//! Frees into spans the thread does not own: the remote-free protocol with its notification
//! (`free_other`), and the outboxes that gather such frees a span at a time and publish them
//! together (`free_batched`), handed over at a refill, at thread exit, when the trimmer trims
//! an idle heap and when `collect()` asks.

use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

use super::{Heap, Outbox, SHARED_HEAP};
use crate::remote;
use crate::span::{span_block_size, Span, OWNER_FULL, TINY_CLASS};

/// A free into a span of another heap or of a central pool, other than a plain push: the whole
/// remote-free protocol with its notification. A pooled span (owner word 0) takes the plain
/// push: its exiting owner withdrew every notification request.
///
/// # Safety
/// `p` is a live block of `span`, which this thread's heap does not own.
#[cold]
#[inline(never)]
pub(super) unsafe fn free_other(span: &Span, p: *mut u8) {
    // Read before the push, as the caller read the class (see `miss::free_slow`).
    let wide = !span.is_narrow();
    // SAFETY: forwarded; one block is a chain of one, from itself to itself.
    unsafe { free_other_chain(span, p as usize, p as usize, 1, wide) }
}

/// [`free_other`] for a chain of `len` freed blocks of `span`, linked from `head` to `tail`
/// (`wide`: with wide links, see `remote`).
///
/// # Safety
/// Every block of the chain is a live block of `span`, freed once, that nothing else references.
unsafe fn free_other_chain(span: &Span, head: usize, tail: usize, len: usize, wide: bool) {
    // SAFETY: the chain's blocks are `span`'s, freed once; a heap is never freed, and its owner
    // does not abandon the span while it is NOTIFYING.
    unsafe {
        remote::free_remote_chain(
            &span.remote,
            &span.owner,
            head,
            tail,
            len,
            wide,
            &remote::Deliveries,
            |hp| {
                #[cfg(feature = "test-hooks")]
                crate::hooks::in_delivery();
                let owner = &*(hp as *const Heap);
                remote::push_delayed(
                    &owner.delayed,
                    span as *const Span as usize,
                    &span.delayed_next,
                );
            },
        );
    }
}

/// Bytes of blocks one outbox gathers before it publishes them (at most [`OUTBOX_BLOCKS`]
/// blocks; a block this large or larger is published at once).
const OUTBOX_BYTES: usize = 4 << 10;
/// Most blocks one outbox gathers.
const OUTBOX_BLOCKS: usize = 64;

/// Frees `p`, a block of `class`, into `span`, which `h` does not own (another thread's),
/// through `h`'s outboxes for the class: frees into one span are published together, one CAS
/// on its remote list for up to [`OUTBOX_BLOCKS`] blocks (snmalloc batches its remote frees the
/// same way). A producer/consumer pair otherwise moves the span's remote word between the two
/// cores on every free. A producer allocates each class from one span at a time, so a consumer
/// fed by a few producers frees each class into as many spans, interleaved: each class has
/// `OUTBOX_WAYS` outboxes, one per span, and a batch for a further span publishes one of them
/// in turn. (With one, `pipeline2` of the Rust suite published a batch every 4.6 frees, against
/// every 53 with one producer.)
///
/// # Safety
/// `h` is this thread's live heap; `p` is a live block of `span`, freed once.
#[inline]
pub(super) unsafe fn free_batched(h: &Heap, span: &Span, class: usize, p: *mut u8) {
    // SAFETY: a span's class is below `SPAN_CLASSES`.
    let set = unsafe { h.outboxes.get_unchecked(class) };
    for ob in set {
        if ptr::eq(ob.span.get(), span) {
            // SAFETY: the outbox holds a chain of `span`'s blocks, and `p` is one more.
            unsafe { append(ob, class, p) };
            if ob.room.get() == 0 {
                // SAFETY: the outbox holds a chain of `span`'s freed blocks.
                unsafe { publish(ob) };
            }
            return;
        }
    }
    // SAFETY: forwarded.
    unsafe { start_batch(h, span, class, p) }
}

/// A heap's first frees into other live threads' spans are pushed at once, each with one
/// compare-and-swap, rather than starting batches in its outboxes: a thread that makes few such
/// frees (a Rust thread frees its spawner's closure as it starts; a C thread the TLS vector of
/// a thread it joins) never writes its outboxes, two thirds of its heap, so that with thousands
/// of live threads each one holds a page of its heap, not three. Decided where a batch would
/// start, so that a thread that frees into other threads' spans all the time pays nothing for
/// it on its other frees.
pub const DIRECT_FREES: u32 = 16;

/// [`free_batched`] when no outbox of the class holds blocks of `span`: one that holds none
/// starts a batch for it (after publishing one, in turn, if every outbox is in use), unless the
/// span is the shared heap's or the heap has not made its first [`DIRECT_FREES`] yet.
///
/// # Safety
/// As for [`free_batched`], which holds the trim lock.
#[inline(never)]
unsafe fn start_batch(h: &Heap, span: &Span, class: usize, p: *mut u8) {
    // A thread's first blocks of a class come from the shared heap (`miss::shared_first`): a
    // few per class, which would otherwise start a batch each and write the outboxes of every
    // thread that frees its own. (Its owner word may have gone to 0 since, the span pooled:
    // `free_other` serves both.)
    if span.owner_word() & !OWNER_FULL == SHARED_HEAP.load(Ordering::Relaxed) {
        // SAFETY: forwarded: `p` is a live block of `span`, freed once, another heap's.
        return unsafe { free_other(span, p) };
    }
    let direct = h.direct_frees.get();
    if direct < DIRECT_FREES {
        h.direct_frees.set(direct + 1);
        // SAFETY: forwarded: `p` is a live block of `span`, freed once, another heap's.
        return unsafe { free_other(span, p) };
    }
    // SAFETY: a span's class is below `SPAN_CLASSES`.
    let set = unsafe { h.outboxes.get_unchecked(class) };
    answer_handover(h);
    let ob = match set.iter().find(|ob| ob.span.get().is_null()) {
        Some(ob) => ob,
        None => {
            // SAFETY: as above.
            let victim = unsafe { h.outbox_victim.get_unchecked(class) };
            let v = victim.get() as usize % set.len();
            victim.set(((v + 1) % set.len()) as u8);
            // SAFETY: every outbox of the class is in use, so this one holds a chain.
            unsafe { publish(&set[v]) };
            &set[v]
        }
    };
    let limit = outbox_limit(class);
    h.outboxes_used.set(true);
    ob.span.set(span);
    ob.head.set(p as usize);
    ob.tail.set(p as usize);
    ob.room.set(limit as u32 - 1);
    if limit == 1 {
        // SAFETY: a chain of one block of `span`.
        unsafe { publish(ob) };
    }
}

/// Blocks an outbox of `class` gathers before it publishes them.
fn outbox_limit(class: usize) -> usize {
    (OUTBOX_BYTES / span_block_size(class)).clamp(1, OUTBOX_BLOCKS)
}

/// Puts `p` at the head of the chain an outbox of `class` holds (which has room for it).
///
/// # Safety
/// The outbox holds a chain of a span's freed blocks; `p` is a freed block of the same span,
/// ours until published.
#[inline(always)]
unsafe fn append(ob: &Outbox, class: usize, p: *mut u8) {
    // SAFETY: `p` is ours, and the chain's head a block of the same span (chunk); a block of a
    // class other than the tiny one holds a pointer.
    unsafe { remote::set_link_as(p as usize, ob.head.get(), class != TINY_CLASS) };
    ob.head.set(p as usize);
    ob.room.set(ob.room.get() - 1);
}

/// Publishes the chain an outbox holds and empties it.
///
/// # Safety
/// The outbox is not empty.
#[inline(never)]
unsafe fn publish(ob: &Outbox) {
    // SAFETY: an outbox's span stays allocated while it holds blocks of it.
    let span = unsafe { &*ob.span.get() };
    ob.span.set(ptr::null());
    // The span holds a block of the chain, so its class is still the outbox's.
    let class = span.class.get() as usize;
    let len = outbox_limit(class) - ob.room.get() as usize;
    // SAFETY: a chain of freed blocks of `span`, linked by `free_batched`, ours until published
    // (the push's common case is tried first inside).
    unsafe { free_other_chain(span, ob.head.get(), ob.tail.get(), len, class != TINY_CLASS) };
}

/// Frees `p`, a block of `class`, into `span` at once, from a thread with a heap: a pooled
/// span's frees are not batched (its sweeps should find them), but if `h`'s outbox for the class
/// still holds blocks of the span (gathered while another thread owned it), they go with it.
///
/// # Safety
/// `h` is this thread's live heap; `p` is a live block of `span`, freed once.
pub(super) unsafe fn free_now(h: &Heap, span: &Span, class: usize, p: *mut u8) {
    // SAFETY: a span's class is below `SPAN_CLASSES`.
    let set = unsafe { h.outboxes.get_unchecked(class) };
    let batch = if h.outboxes_used.get() {
        set.iter().find(|ob| ptr::eq(ob.span.get(), span))
    } else {
        None
    };
    if let Some(ob) = batch {
        // SAFETY: the outbox holds a chain of `span`'s blocks; with `p` at its head it goes out.
        unsafe {
            append(ob, class, p);
            publish(ob);
        }
    } else {
        // SAFETY: `p` is a live block of `span`, freed once.
        unsafe { free_other(span, p) };
    }
}

/// Bumped by `collect()` on any thread: every thread hands its batches over at its next refill
/// or its next free that starts a batch (a thread that neither allocates nor frees keeps at
/// most `OUTBOX_WAYS` spans per class back until it does, or exits).
static HANDOVER: AtomicUsize = AtomicUsize::new(0);

/// Asks every thread to hand its batches over (see [`HANDOVER`]).
pub(super) fn request_handover() {
    HANDOVER.fetch_add(1, Ordering::Relaxed);
}

/// A refill of `class` first hands over the class's batches (spans of other threads that its
/// own outboxes keep from being emptied and given back), and every batch if `collect()` asked.
#[inline]
pub(super) fn hand_over_on_refill(h: &Heap, class: usize) {
    if !h.outboxes_used.get() {
        return;
    }
    // SAFETY: a span's class is below `SPAN_CLASSES`.
    for ob in unsafe { h.outboxes.get_unchecked(class) } {
        if !ob.span.get().is_null() {
            // SAFETY: not empty.
            unsafe { publish(ob) };
        }
    }
    answer_handover(h);
}

/// Publishes every outbox of `h` if a `collect()` asked since it last did.
#[inline]
fn answer_handover(h: &Heap) {
    if HANDOVER.load(Ordering::Relaxed) != h.handover_seen.get() {
        publish_outboxes(h);
    }
}

/// Publishes every outbox of `h`: at thread exit, when the thread collects, and when another
/// thread's `collect()` asked.
///
/// `h` must be this thread's heap (or the shared heap, whose outboxes stay empty).
pub(super) fn publish_outboxes(h: &Heap) {
    h.handover_seen.set(HANDOVER.load(Ordering::Relaxed));
    if !h.outboxes_used.get() {
        return;
    }
    for ob in h.outboxes.iter().flatten() {
        if !ob.span.get().is_null() {
            // SAFETY: not empty.
            unsafe { publish(ob) };
        }
    }
    h.outboxes_used.set(false);
}
