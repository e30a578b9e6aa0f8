// The tiny blocks' liveness protocol, kept free of the rest of the allocator so that the same
// source is compiled into the runtime (`heap.rs`, with `core` atomics) and into the loom model
// `tests/loom_tiny.rs` (with loom's). The including module must bring `AtomicU8`, `AtomicU16`
// and `Ordering` into scope.
//
// Each 16-byte tiny block has, in its span's header:
// - a *word* (atomic u16): low byte = objects carved from the block, published when the block
//   stops being its owner's current block (0 while it is current); high byte = objects freed by
//   threads other than the span's owner (atomic increments);
// - a *local* count (u8): objects freed by the span's owner, written only by the owner, with
//   plain (relaxed) stores, so the owner's frees take no atomic read-modify-write.
//
// A block is dead when carved == local + remote. Whoever sees that claims the block by
// compare-and-swapping the word to DEAD; the winner frees the 16-byte block. The owner and a
// remote thread may both miss the moment (each reads the other's count before it changes: the
// owner's store is not ordered before its load): so a remote free that does not find the block
// dead marks it *dirty* for the owner (in `heap.rs`), who re-checks it later from its own thread,
// after the remote increment, and cannot miss it. A current block is never dead (its carved
// count is 0 until it retires); the owner counts its own frees of the current block in its heap
// and stores them as the block's local count when it retires it.

/// The word of a block that has been claimed for freeing.
pub const DEAD: u16 = 0xFFFF;
/// Increment of a word's remote count.
pub const REMOTE_ONE: u16 = 0x100;

/// Objects carved from the block (0 while it is current).
#[inline(always)]
pub fn carved_of(w: u16) -> u8 {
    w as u8
}

/// Objects freed by threads other than the owner.
#[inline(always)]
pub fn remote_of(w: u16) -> u8 {
    (w >> 8) as u8
}

/// Whether a block with word `w` and owner-free count `local` has no live object left.
#[inline(always)]
pub fn is_dead(w: u16, local: u8) -> bool {
    w != DEAD && carved_of(w) != 0 && carved_of(w) == local.wrapping_add(remote_of(w))
}

/// Claims a block seen dead with word `seen`. True: the caller frees the block.
#[inline]
pub fn claim(word: &AtomicU16, seen: u16) -> bool {
    word.compare_exchange(seen, DEAD, Ordering::AcqRel, Ordering::Relaxed)
        .is_ok()
}

/// The owner freed an object of a retired block and stored the new `local` count. True: the
/// caller frees the block.
#[inline(always)]
pub fn owner_free(word: &AtomicU16, local: u8) -> bool {
    let w = word.load(Ordering::Acquire);
    if !is_dead(w, local) {
        return false;
    }
    if remote_of(w) == 0 {
        // Every object was freed by the owner itself: no other thread holds a piece of the
        // block, so nobody races for it and a plain store marks it dead (a stale dirty mark
        // must not find it dead again).
        word.store(DEAD, Ordering::Relaxed);
        return true;
    }
    claim(word, w)
}

/// A thread other than the owner frees an object of the block. `Some(true)`: the caller frees
/// the block; `Some(false)`: the block lives on; `None`: the caller cannot tell, and must mark
/// the block dirty for the owner to re-check.
#[inline]
pub fn remote_free(word: &AtomicU16, local: &AtomicU8) -> Option<bool> {
    let w = word
        .fetch_add(REMOTE_ONE, Ordering::AcqRel)
        .wrapping_add(REMOTE_ONE);
    if carved_of(w) == 0 {
        // Current: the owner will count this free when it retires the block.
        return Some(false);
    }
    if is_dead(w, local.load(Ordering::Acquire)) {
        return Some(claim(word, w));
    }
    None
}

/// The owner retires its current block after carving `carved` objects, of which it freed
/// `local` itself (already stored as the block's local count). True: the caller frees the block.
#[inline]
pub fn retire(word: &AtomicU16, local: u8, carved: u8) -> bool {
    let w = word
        .fetch_add(carved as u16, Ordering::AcqRel)
        .wrapping_add(carved as u16);
    is_dead(w, local) && claim(word, w)
}

/// Starts a block's life: as the current block (`carved` 0), or holding one object of its own.
#[inline]
pub fn start(word: &AtomicU16, local: &AtomicU8, carved: u8) {
    local.store(0, Ordering::Relaxed);
    word.store(carved as u16, Ordering::Relaxed);
}
