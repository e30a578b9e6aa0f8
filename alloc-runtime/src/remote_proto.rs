// The cross-thread free protocol, kept free of the rest of the allocator so that the very same
// source is compiled twice: into the runtime (with `core` atomics, see `remote.rs`) and into the
// loom model in `tests/loom_remote.rs` (with loom's atomics). The including module must bring
// `AtomicUsize`, `Ordering` and a `spin_loop()` function into scope.
//
// Words:
// - a span's *remote word*: the head of a list of blocks freed by other threads, with a
//   notification state in its two low bits (blocks are at least 8-byte aligned);
// - a heap's *delayed word*: a list of blocks that other threads delivered to the heap itself
//   because their span was parked on the heap's full list.
//
// Notification states of a remote word:
// - NONE: frees push onto the span's remote list; the owner collects it on its slow path.
// - NOTIFY: the owner parked the span as full and will not look at it again by itself. The next
//   remote free claims the notification (NOTIFY -> NOTIFYING), delivers its block to the owner's
//   delayed list, and resets the state to NONE. The owner thereby learns that the span has room.
// - NOTIFYING: a freeing thread is between claiming the notification and delivering its block.
//   The owner must not go away in that window: before it abandons its spans it waits until no
//   span of it is NOTIFYING (`quiesce`), and only then drains its delayed list for the last time.

/// Remote state: plain remote list.
pub const NONE: usize = 0;
/// Remote state: the owner wants to hear about the next remote free.
pub const NOTIFY: usize = 1;
/// Remote state: a freeing thread is delivering a block to the owner's delayed list.
pub const NOTIFYING: usize = 2;
/// Mask of the state bits of a remote word.
pub const STATE_MASK: usize = 3;

/// Writes a block's link word.
///
/// # Safety
/// `block` must be the address of a free, writable, 8-aligned block of at least 8 bytes.
#[inline(always)]
unsafe fn set_link(block: usize, next: usize) {
    // SAFETY: guaranteed by the caller.
    unsafe { (block as *mut usize).write(next) }
}

/// Reads a block's link word.
///
/// # Safety
/// `block` must be the address of a block on a list this thread has taken.
#[inline(always)]
pub unsafe fn link_of(block: usize) -> usize {
    // SAFETY: guaranteed by the caller.
    unsafe { (block as *const usize).read() }
}

/// What [`free_remote`] did with the block.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Pushed {
    /// Pushed on the span's remote list.
    ToSpan,
    /// Delivered to the delayed list of the owner whose address is given.
    ToOwner(usize),
}

/// Frees `block` from a thread that does not own its span.
///
/// `owner` is the span's owner word (heap address, low bit a tag); `delayed_of(heap)` returns
/// that heap's delayed word.
///
/// # Safety
/// `block` is a block of the span, freed exactly once, that nothing else references; the span
/// stays allocated until the block has been collected; `delayed_of` returns a word that stays
/// valid while the span is NOTIFYING.
pub unsafe fn free_remote<'a>(
    remote: &AtomicUsize,
    owner: &AtomicUsize,
    block: usize,
    delayed_of: impl Fn(usize) -> &'a AtomicUsize,
) -> Pushed {
    let mut old = remote.load(Ordering::Relaxed);
    loop {
        if old & STATE_MASK == NOTIFY {
            match remote.compare_exchange_weak(
                old,
                (old & !STATE_MASK) | NOTIFYING,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(cur) => {
                    old = cur;
                    continue;
                }
            }
        }
        // SAFETY: the caller owns `block` until the CAS below publishes it.
        unsafe { set_link(block, old & !STATE_MASK) };
        match remote.compare_exchange_weak(
            old,
            block | (old & STATE_MASK),
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => return Pushed::ToSpan,
            Err(cur) => old = cur,
        }
    }
    // We hold the notification: the owner cannot abandon the span until we reset the state,
    // so its heap (and delayed word) stay valid.
    let heap = owner.load(Ordering::Acquire) & !STATE_MASK;
    let delayed = delayed_of(heap);
    let mut head = delayed.load(Ordering::Relaxed);
    loop {
        // SAFETY: we own `block` until the CAS publishes it.
        unsafe { set_link(block, head) };
        match delayed.compare_exchange_weak(head, block, Ordering::Release, Ordering::Relaxed) {
            Ok(_) => break,
            Err(cur) => head = cur,
        }
    }
    let mut old = remote.load(Ordering::Relaxed);
    loop {
        debug_assert_eq!(old & STATE_MASK, NOTIFYING);
        match remote.compare_exchange_weak(
            old,
            old & !STATE_MASK,
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => return Pushed::ToOwner(heap),
            Err(cur) => old = cur,
        }
    }
}

/// Takes the whole remote list (owner only), keeping the state bits. Returns its head, or 0.
#[inline]
pub fn take_remote(remote: &AtomicUsize) -> usize {
    let mut old = remote.load(Ordering::Relaxed);
    loop {
        if old & !STATE_MASK == 0 {
            return 0;
        }
        match remote.compare_exchange_weak(
            old,
            old & STATE_MASK,
            Ordering::Acquire,
            Ordering::Relaxed,
        ) {
            Ok(_) => return old & !STATE_MASK,
            Err(cur) => old = cur,
        }
    }
}

/// Asks to be notified of the next remote free (owner only, when parking the span as full;
/// the state must be NONE).
#[inline]
pub fn set_notify(remote: &AtomicUsize) {
    let mut old = remote.load(Ordering::Relaxed);
    loop {
        debug_assert_eq!(old & STATE_MASK, NONE);
        match remote.compare_exchange_weak(
            old,
            (old & !STATE_MASK) | NOTIFY,
            Ordering::Release,
            Ordering::Relaxed,
        ) {
            Ok(_) => return,
            Err(cur) => old = cur,
        }
    }
}

/// Withdraws a notification request that nobody claimed (owner only, when it takes the span back
/// off its full list by itself). A claimed one (NOTIFYING) completes on its own: its block still
/// arrives on the delayed list.
#[inline]
pub fn clear_notify(remote: &AtomicUsize) {
    let mut old = remote.load(Ordering::Relaxed);
    while old & STATE_MASK == NOTIFY {
        match remote.compare_exchange_weak(
            old,
            old & !STATE_MASK,
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            Ok(_) => return,
            Err(cur) => old = cur,
        }
    }
}

/// Brings the span to state NONE and waits out any delivery in progress (owner only, before it
/// abandons the span). After this returns, no thread will deliver a block of this span to the
/// owner's delayed list.
pub fn quiesce(remote: &AtomicUsize) {
    let mut old = remote.load(Ordering::Acquire);
    loop {
        match old & STATE_MASK {
            NONE => return,
            NOTIFY => {
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
            _ => {
                spin_loop();
                old = remote.load(Ordering::Acquire);
            }
        }
    }
}

/// Takes the heap's whole delayed list (owner only). Returns its head, or 0.
#[inline]
pub fn take_delayed(delayed: &AtomicUsize) -> usize {
    if delayed.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    delayed.swap(0, Ordering::Acquire)
}
