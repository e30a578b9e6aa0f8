// The idle-heap trim protocol, kept free of the rest of the allocator so that the very same
// source is compiled twice: into the runtime (with `core` atomics, see `heap/trimlock.rs`) and
// into the loom model in `tests/loom_trim.rs` (with loom's atomics). The including module must
// bring `AtomicU32`, `AtomicUsize`, `Ordering`, the functions `spin_loop()`, `light_barrier()`
// and `heavy_barrier() -> bool` (see the trim lock below) and `COUNT_SHIFT` (the remote word's
// count field, see `remote_proto.rs`) into scope.
//
// A heap's lists (partial, full, delayed), its kept empty spans, its outboxes and its reserve are
// touched only on its owner's slow paths; its current spans and the local free lists of its
// spans also on the owner's fast paths, which take no lock and no atomic read-modify-write. A
// *trimmer* (the background thread) gives an idle heap's memory back without the owner:
//
// - The *trim lock*, two words per heap, one written by each side (an asymmetric Dekker lock,
//   so that the owner's side takes no read-modify-write; see below):
//   - the *owner word*, written by the owner only: odd while it is in a slow path, even outside;
//     it goes up by one on each entry and each exit, so it also counts the owner's slow-path
//     entries (a trimmer passes a heap whose word changed since its last look: not idle).
//   - the *trimmer word*, written by the trimmer only: 1 while it tries or holds the lock.
//   The owner takes it on entering any slow path (`owner_enter`; a slow path called from
//   another is already inside, and does not take it again): it makes its word odd, then reads
//   the trimmer word, and while that reads 1 makes its word even again, waits, and tries again. A trimmer only tries (`trimmer_try`): it
//   sets its word, then reads the owner word, and backs off (clears its word) if that is odd.
//   Each side's read must not be ordered before its own store, which takes a full barrier
//   between them: the trimmer's is `heavy_barrier()` (`membarrier(2)` in the runtime, which runs
//   a full barrier on every thread of the process), the owner's `light_barrier()` (a compiler
//   barrier in the runtime: `membarrier` supplies the hardware barrier on its side). The loom
//   model makes both a `SeqCst` fence, which is what the pair guarantees. With both barriers in
//   place, at most one side reads the other's word as clear, so at most one is inside.
// - Holding it, the trimmer may do what the owner's slow paths do with the lists, the outboxes
//   and the reserve. It never touches a current span (the owner's fast path pops from it at any
//   time), and it takes a span off a list only when the span holds no live block
//   (`holds_no_live_block`): then no block of it can be freed, so the owner's fast path, which
//   reaches a non-current span only through the free of one of its blocks, cannot touch it.
// - `holds_no_live_block`: a span's `used` counts the blocks handed out and not freed locally
//   (plus one while it is current); a block freed by another thread stays counted until its
//   owner collects it, and the remote word counts those on its remote list. While the trimmer
//   holds the lock nobody collects and nothing is allocated from a non-current span, so `used`
//   only falls (local frees) and the remote count only grows (remote frees): reading the remote
//   word first, then `used`, a `used` equal to the count read means that every block counted is
//   on the remote list, none live, none in another thread's outbox, none on its way. A current
//   span's pin keeps `used` above the count.
// - An owner's fast path may still act on what it saw before the trimmer took a span: a local
//   free that emptied a span, or brought a parked span to its wake-up count, then enters the
//   slow path (and waits for the lock) to move the span. Such a slow path looks again under the
//   lock: a span the trimmer gave back no longer names the heap as its owner.

/// The owner enters a slow path: makes its word odd, then waits while a trimmer holds the lock
/// (see [`owner_wait`]). Returns the value its word takes when it leaves, or `None` when the
/// owner is already inside (a slow path called from another): the outer one leaves.
///
/// The including module provides `light_barrier()`.
#[inline]
pub fn owner_enter(owner: &AtomicU32, trimmer: &AtomicU32) -> Option<u32> {
    let v = owner.load(Ordering::Relaxed);
    if v & 1 != 0 {
        return None;
    }
    owner.store(v.wrapping_add(1), Ordering::Relaxed);
    light_barrier();
    if trimmer.load(Ordering::Acquire) != 0 {
        owner_wait(owner, trimmer, v);
    }
    Some(v.wrapping_add(2))
}

/// [`owner_enter`] found the trimmer inside (or trying): waits with its word even again (so
/// that a signal handler that allocates meanwhile on this thread waits too, rather than taking
/// the odd word for a slow path of its own), then tries again.
/// Inline, a spin without a call: a call on the path, even an unlikely one, makes every slow
/// path that enters keep its values in saved registers.
#[inline(always)]
pub fn owner_wait(owner: &AtomicU32, trimmer: &AtomicU32, v: u32) {
    loop {
        owner.store(v, Ordering::Relaxed);
        while trimmer.load(Ordering::Acquire) != 0 {
            spin_loop();
        }
        owner.store(v.wrapping_add(1), Ordering::Relaxed);
        light_barrier();
        if trimmer.load(Ordering::Acquire) == 0 {
            return;
        }
    }
}

/// The owner leaves the slow path that took the lock; `to` is what [`owner_enter`] returned.
#[inline]
pub fn owner_leave(owner: &AtomicU32, to: u32) {
    owner.store(to, Ordering::Release);
}

/// A trimmer tries the lock: true when it took it (the owner is not in a slow path, and the
/// barrier could be run).
///
/// The including module provides `heavy_barrier() -> bool` (false: it could not be run, and the
/// lock is not taken).
#[inline]
pub fn trimmer_try(owner: &AtomicU32, trimmer: &AtomicU32) -> bool {
    // Set already: a trimmer that did not survive a `fork` was in the middle of this heap (only
    // the one trimmer writes the word); it stays as it was left.
    if trimmer.load(Ordering::Relaxed) != 0 {
        return false;
    }
    trimmer.store(1, Ordering::Relaxed);
    if heavy_barrier() && owner.load(Ordering::Acquire) & 1 == 0 {
        return true;
    }
    trimmer.store(0, Ordering::Release);
    false
}

/// The trimmer is done with the heap.
#[inline]
pub fn trimmer_leave(trimmer: &AtomicU32) {
    trimmer.store(0, Ordering::Release);
}

/// Whether a non-current span of a heap whose trim lock the caller holds has no live block:
/// every block its `used` counts is on its remote list (see the top of this file). Once true it
/// stays true until the lock holder collects or allocates.
#[inline]
pub fn holds_no_live_block(remote: &AtomicUsize, used: &AtomicU32) -> bool {
    let listed = remote.load(Ordering::Acquire) >> COUNT_SHIFT;
    used.load(Ordering::Acquire) as usize == listed
}
