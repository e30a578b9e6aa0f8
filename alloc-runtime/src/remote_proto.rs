// The cross-thread free protocol, kept free of the rest of the allocator so that the very same
// source is compiled twice: into the runtime (with `core` atomics, see `remote.rs`) and into the
// loom model in `tests/loom_remote.rs` (with loom's atomics). The including module must bring
// `AtomicUsize`, `Ordering`, a `spin_loop()` function and `LINK_MASK` (the chunk size minus one)
// into scope.
//
// Words:
// - a span's *remote word*: the head of a list of blocks freed by other threads, with a
//   notification state in its two low bits (blocks are at least 4-byte aligned) and the list's
//   length in its top bits;
// - a heap's *delayed word*: a list of *spans* (never blocks) that other threads handed to the
//   heap because they freed a block into a span the heap had parked as full.
//
// Links: a block on a remote list links to the next as blocks on its span's local free list
// do, so that the owner takes a collected list as its free list without rewriting it: a block
// of 8 bytes or more holds the next block's address in its first word (*wide* links, 0 ends the
// list); a 4-byte block holds, in its four bytes, the offset of the next block within their
// chunk (*narrow* links; 0 ends the list, and no block starts at offset 0 of a chunk, which
// holds the chunk header; every block of a span lies in one chunk). The pushing thread says
// which (`wide`).
//
// Count: the remote word's top bits ([`COUNT_SHIFT`] and up) count the blocks on the list, so
// that the owner learns how many it took without walking them (a walk is one load per block of
// lines that other cores just wrote). A span holds fewer than 2^16 blocks, and the runtime
// places no chunk at or above 2^48 (the kernel maps below 2^47 unless given a hint above it).
//
// Notification states of a remote word:
// - NONE: frees push onto the span's remote list; the owner collects it on its slow path.
// - NOTIFY: the owner parked the span as full and will not look at it again by itself (`arm`).
//   The next remote free pushes its block and claims the notification in one step (NOTIFY ->
//   NOTIFYING), pushes the *span* onto the owner's delayed list, and moves the state to
//   DELIVERED. Taking the span back off the full list leaves the request armed (no atomic
//   read-modify-write on that path): a span may be NOTIFY while current or partial, and is then
//   delivered by the next remote free, which the owner ignores (the span is not parked).
// - NOTIFYING: a freeing thread is between claiming the notification and delivering the span.
//   The owner must not go away in that window: before it abandons or releases a span it waits
//   until the span is not NOTIFYING (`quiesce`).
// - DELIVERED: the span sits on its owner's delayed list. Only the owner leaves this state, when
//   it takes the span off that list (`take_delivered`); until then the span is neither re-armed
//   nor given back to the page heap (the runtime defers the release, see `heap/owned.rs`). The
//   deliverer pushes the span before it marks it DELIVERED, so the owner can find a span on its
//   list that is still NOTIFYING: `take_delivered` waits for the mark.
//
// The block that claimed the notification stays on the span's remote list and in the span's
// count of used blocks, like any remote free: a delivered span is an address the owner looks
// at, never memory that is already free.

/// Remote state: plain remote list.
pub const NONE: usize = 0;
/// Remote state: the owner wants to hear about the next remote free.
pub const NOTIFY: usize = 1;
/// Remote state: a freeing thread is delivering the span to its owner's delayed list.
pub const NOTIFYING: usize = 2;
/// Remote state: the span is on its owner's delayed list.
pub const DELIVERED: usize = 3;
/// Mask of the state bits of a remote word.
pub const STATE_MASK: usize = 3;
/// The remote word's count of listed blocks starts at this bit.
pub const COUNT_SHIFT: u32 = 48;
/// Mask of the list's head in a remote word.
pub const HEAD_MASK: usize = ((1usize << COUNT_SHIFT) - 1) & !STATE_MASK;

/// A remote word with the list `head`, `count` blocks on it, and state `state`.
#[inline(always)]
fn remote_word(head: usize, count: usize, state: usize) -> usize {
    debug_assert_eq!(head & !HEAD_MASK, 0, "a block address above 2^48");
    debug_assert!(count < 1 << (usize::BITS - COUNT_SHIFT));
    head | count << COUNT_SHIFT | state
}

/// How many blocks the list of a remote word holds.
#[inline(always)]
pub fn count_of(word: usize) -> usize {
    word >> COUNT_SHIFT
}

/// Writes a free block's link to `next` (0 for the end of the list): its address when `wide`,
/// else its chunk offset (see [`set_link`]).
///
/// # Safety
/// As for [`set_link`]; when `wide`, the block is at least 8 bytes long and 8-aligned.
#[inline(always)]
pub unsafe fn set_link_as(block: usize, next: usize, wide: bool) {
    if wide {
        // SAFETY: guaranteed by the caller.
        unsafe { (block as *mut usize).write(next) }
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { set_link(block, next) }
    }
}

/// Reads a free block's link written by [`set_link_as`] with the same `wide`.
///
/// # Safety
/// As for [`link_of`].
#[inline(always)]
pub unsafe fn link_as(block: usize, wide: bool) -> usize {
    if wide {
        // SAFETY: guaranteed by the caller.
        unsafe { (block as *const usize).read() }
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { link_of(block) }
    }
}

/// Writes a free block's narrow link: the chunk offset of `next` (0 for the end of the list).
///
/// # Safety
/// `block` is a free, writable, 4-aligned block of at least 4 bytes that the caller owns, and
/// `next` is 0 or a block of the same chunk.
#[inline(always)]
pub unsafe fn set_link(block: usize, next: usize) {
    // SAFETY: guaranteed by the caller.
    unsafe { (block as *mut u32).write((next & LINK_MASK) as u32) }
}

/// Reads a free block's narrow link (see [`set_link`]): the next block's address, or 0.
///
/// # Safety
/// `block` is a block on a list this thread has taken (or owns).
#[inline(always)]
pub unsafe fn link_of(block: usize) -> usize {
    // SAFETY: guaranteed by the caller.
    let off = unsafe { (block as *const u32).read() } as usize;
    if off == 0 {
        0
    } else {
        (block & !LINK_MASK) | off
    }
}

/// What a freeing thread holds while it delivers a span, from just before it claims a
/// notification until the span is DELIVERED: the runtime's gate keeps `fork` from copying the
/// process with a delivery half done (a child would find the span NOTIFYING forever, with no
/// thread left to finish it). `enter` may wait while a fork is being prepared.
pub trait DeliveryGate {
    /// About to claim a notification.
    fn enter(&self);
    /// The claim failed, or the delivery is complete.
    fn leave(&self);
}

/// The common case of [`free_remote`], small enough to inline into a free path: one attempt to
/// push `block` on the span's remote list, made only when nobody asked for a notification.
/// Returns false, having published nothing, when the state is NOTIFY or the attempt lost a race;
/// the caller then calls [`free_remote`].
///
/// # Safety
/// As for [`free_remote`].
#[inline(always)]
pub unsafe fn try_push(remote: &AtomicUsize, block: usize, wide: bool) -> bool {
    // SAFETY: forwarded; a single block is a chain of one, from itself to itself.
    unsafe { try_push_chain(remote, block, block, 1, wide) }
}

/// [`try_push`] for a chain of `len` blocks the caller linked from `head` to `tail` (with
/// [`set_link_as`]; `tail`'s link is written here): all of them published in one step.
///
/// # Safety
/// As for [`free_remote_chain`].
#[inline(always)]
pub unsafe fn try_push_chain(
    remote: &AtomicUsize,
    head: usize,
    tail: usize,
    len: usize,
    wide: bool,
) -> bool {
    let old = remote.load(Ordering::Relaxed);
    if old & STATE_MASK == NOTIFY {
        return false;
    }
    // SAFETY: the caller owns the chain until the CAS below publishes it; the list's blocks are
    // in the span's chunk.
    unsafe { set_link_as(tail, old & HEAD_MASK, wide) };
    let new = remote_word(head, count_of(old) + len, old & STATE_MASK);
    remote
        .compare_exchange_weak(old, new, Ordering::Release, Ordering::Relaxed)
        .is_ok()
}

/// What [`free_remote`] did with the block.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Pushed {
    /// Pushed on the span's remote list.
    ToSpan,
    /// Pushed on the span's remote list, and the span delivered to the owner whose heap address
    /// is given.
    Delivered(usize),
}

/// Frees `block` from a thread that does not own its span.
///
/// `owner` is the span's owner word (heap address, low bits a tag); `deliver(heap)` pushes the
/// span onto that heap's delayed list (with [`push_delayed`]); `gate` brackets a delivery.
///
/// # Safety
/// `block` is a block of the span, freed exactly once, that nothing else references; the span
/// stays allocated until the block has been collected; the heap named by the owner word stays
/// valid while the span is NOTIFYING.
pub unsafe fn free_remote(
    remote: &AtomicUsize,
    owner: &AtomicUsize,
    block: usize,
    wide: bool,
    gate: &impl DeliveryGate,
    deliver: impl FnOnce(usize),
) -> Pushed {
    // SAFETY: forwarded; a single block is a chain of one, from itself to itself.
    unsafe { free_remote_chain(remote, owner, block, block, 1, wide, gate, deliver) }
}

/// [`free_remote`] for a chain of `len` blocks of one span, linked from `head` to `tail` by the
/// caller (with [`set_link_as`]; `tail`'s link is written here): a freeing thread that batches its
/// frees into a span publishes them in one step, and they count as one free for the
/// notification (the owner hears about the span once).
///
/// # Safety
/// Every block of the chain is a block of the span, freed exactly once, that nothing else
/// references; the span stays allocated until they have been collected; the heap named by the
/// owner word stays valid while the span is NOTIFYING.
#[allow(clippy::too_many_arguments)]
pub unsafe fn free_remote_chain(
    remote: &AtomicUsize,
    owner: &AtomicUsize,
    head: usize,
    tail: usize,
    len: usize,
    wide: bool,
    gate: &impl DeliveryGate,
    deliver: impl FnOnce(usize),
) -> Pushed {
    // SAFETY: forwarded from our caller.
    if unsafe { try_push_chain(remote, head, tail, len, wide) } {
        return Pushed::ToSpan;
    }
    let mut old = remote.load(Ordering::Relaxed);
    loop {
        let state = old & STATE_MASK;
        // SAFETY: the caller owns the chain until the CAS below publishes it; the list's blocks
        // are in the span's chunk.
        unsafe { set_link_as(tail, old & HEAD_MASK, wide) };
        let count = count_of(old) + len;
        if state == NOTIFY {
            gate.enter();
            // Push and claim the notification in one step. Acquire: the owner word written
            // before the owner's `arm`.
            match remote.compare_exchange_weak(
                old,
                remote_word(head, count, NOTIFYING),
                Ordering::AcqRel,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(cur) => {
                    gate.leave();
                    old = cur;
                }
            }
        } else {
            match remote.compare_exchange_weak(
                old,
                remote_word(head, count, state),
                Ordering::Release,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Pushed::ToSpan,
                Err(cur) => old = cur,
            }
        }
    }
    // We hold the notification: the owner cannot abandon or release the span until we leave
    // NOTIFYING, so its heap (and delayed word) stay valid.
    let heap = owner.load(Ordering::Acquire) & !STATE_MASK;
    deliver(heap);
    let mut old = remote.load(Ordering::Relaxed);
    loop {
        debug_assert_eq!(old & STATE_MASK, NOTIFYING);
        match remote.compare_exchange_weak(
            old,
            (old & !STATE_MASK) | DELIVERED,
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => {
                gate.leave();
                return Pushed::Delivered(heap);
            }
            Err(cur) => old = cur,
        }
    }
}

/// Takes the whole remote list (owner only), keeping the state bits. Returns its head and how
/// many blocks it holds, or `(0, 0)`.
#[inline]
pub fn take_remote(remote: &AtomicUsize) -> (usize, usize) {
    let mut old = remote.load(Ordering::Relaxed);
    loop {
        if old & HEAD_MASK == 0 {
            return (0, 0);
        }
        match remote.compare_exchange_weak(
            old,
            old & STATE_MASK,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => return (old & HEAD_MASK, count_of(old)),
            Err(cur) => old = cur,
        }
    }
}

/// Whether the remote list holds a block (a hint: frees may land right after).
#[inline]
pub fn has_remote(remote: &AtomicUsize) -> bool {
    remote.load(Ordering::Acquire) & HEAD_MASK != 0
}

/// Asks to hear of the next remote free into a span the owner is parking as full (owner only).
/// Taking a parked span back does not withdraw the request (that would cost an atomic
/// read-modify-write on every unparking, in every program), so one may still be armed from an
/// earlier parking: then nothing changes, and a single-threaded program arms each span once.
/// A delivery in progress (NOTIFYING) is waited out. Returns false, and changes nothing, when
/// the span is on the owner's delayed list (DELIVERED): the owner looks at it when it takes that
/// list.
///
/// A request left armed on a span that is current or partial is claimed by the next remote free
/// like any other; the owner finds the span delivered while it is not parked, and ignores it.
#[inline]
pub fn arm(remote: &AtomicUsize) -> bool {
    let mut old = remote.load(Ordering::Acquire);
    loop {
        match old & STATE_MASK {
            NONE => {}
            NOTIFY => return true,
            DELIVERED => return false,
            _ => {
                spin_loop();
                old = remote.load(Ordering::Acquire);
                continue;
            }
        }
        // Release: the owner word, written before, for the thread that claims the request.
        match remote.compare_exchange_weak(
            old,
            old | NOTIFY,
            Ordering::Release,
            Ordering::Acquire,
        ) {
            Ok(_) => return true,
            Err(cur) => old = cur,
        }
    }
}

/// Withdraws an unclaimed request and waits out a delivery in progress (owner only, before it
/// abandons or releases the span). Returns whether the span is on the owner's delayed
/// list (DELIVERED); otherwise it is NONE. Either way, no thread will start a delivery of this
/// span until the owner asks again.
pub fn quiesce(remote: &AtomicUsize) -> bool {
    let mut old = remote.load(Ordering::Acquire);
    loop {
        match old & STATE_MASK {
            NONE => return false,
            DELIVERED => return true,
            NOTIFY => {
                match remote.compare_exchange_weak(
                    old,
                    old & !STATE_MASK,
                    Ordering::Acquire,
                    Ordering::Acquire,
                ) {
                    Ok(_) => return false,
                    Err(cur) => old = cur,
                }
            }
            _ => {
                spin_loop();
                old = remote.load(Ordering::Acquire);
            }
        }
    }
}

/// The owner took the span off its delayed list: DELIVERED -> NONE. The delivering thread puts
/// the span on the list before it marks it DELIVERED, so the owner may find it there still
/// NOTIFYING: it waits out that last step (no lock is involved, and `fork` waits for deliveries
/// to finish, so it is short).
pub fn take_delivered(remote: &AtomicUsize) {
    let mut old = remote.load(Ordering::Acquire);
    loop {
        match old & STATE_MASK {
            DELIVERED => {}
            NOTIFYING => {
                spin_loop();
                old = remote.load(Ordering::Acquire);
                continue;
            }
            s => {
                debug_assert!(false, "take_delivered in state {s}");
                return;
            }
        }
        match remote.compare_exchange_weak(
            old,
            old & !STATE_MASK,
            Ordering::Acquire,
            Ordering::Acquire,
        ) {
            Ok(_) => return,
            Err(cur) => old = cur,
        }
    }
}

/// Pushes `item` (a span's address) onto a delayed list; `link` is the item's own link word.
pub fn push_delayed(delayed: &AtomicUsize, item: usize, link: &AtomicUsize) {
    let mut head = delayed.load(Ordering::Relaxed);
    loop {
        link.store(head, Ordering::Relaxed);
        match delayed.compare_exchange_weak(head, item, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => return,
            Err(cur) => head = cur,
        }
    }
}

/// Takes the heap's whole delayed list (owner only). Returns its head, or 0; each item's link
/// word (read with a relaxed load) names the next.
#[inline]
pub fn take_delayed(delayed: &AtomicUsize) -> usize {
    if delayed.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    delayed.swap(0, Ordering::Acquire)
}
