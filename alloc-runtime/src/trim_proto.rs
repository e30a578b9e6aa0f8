// The idle-heap trim protocol, kept free of the rest of the allocator so that the very same
// source is compiled twice: into the runtime (with `core` atomics, see `heap/trim.rs`) and into
// the loom model in `tests/loom_trim.rs` (with loom's atomics). The including module must bring
// `AtomicU32`, `AtomicUsize`, `Ordering`, a `spin_loop()` function and `COUNT_SHIFT` (the
// remote word's count field, see `remote_proto.rs`) into scope.
//
// A heap's lists (partial, full, delayed), its kept empty spans, its outboxes and its reserve are
// touched only on its owner's slow paths; its current spans and the local free lists of its
// spans also on the owner's fast paths, which take no lock and no atomic read-modify-write. A
// *trimmer* (the background thread) gives an idle heap's memory back without the owner:
//
// - The *trim lock*, one word per heap: FREE, OWNER (the owner is in a slow path) or TRIMMER.
//   The owner takes it on entering any slow path (`owner_enter`; a slow path called from
//   another is already inside, and does not take it again) and waits while a trimmer holds it;
//   a trimmer only tries (`trimmer_try`), and passes a heap whose owner is inside.
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

/// Trim lock: nobody holds it.
pub const FREE: u32 = 0;
/// Trim lock: the owner is in a slow path.
pub const OWNER: u32 = 1;
/// Trim lock: a trimmer holds it.
pub const TRIMMER: u32 = 2;

/// The owner enters a slow path: takes the trim lock, waiting while a trimmer holds it. Returns
/// false when the owner already holds it (a slow path called from another): the outer one
/// releases it.
#[inline]
pub fn owner_enter(lock: &AtomicU32) -> bool {
    loop {
        match lock.compare_exchange(FREE, OWNER, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(OWNER) => return false,
            Err(_) => spin_loop(),
        }
    }
}

/// The owner leaves the slow path that took the lock.
#[inline]
pub fn owner_leave(lock: &AtomicU32) {
    lock.store(FREE, Ordering::Release);
}

/// A trimmer tries the lock: true when it took it (the owner is not in a slow path).
#[inline]
pub fn trimmer_try(lock: &AtomicU32) -> bool {
    lock.compare_exchange(FREE, TRIMMER, Ordering::Acquire, Ordering::Relaxed)
        .is_ok()
}

/// The trimmer is done with the heap.
#[inline]
pub fn trimmer_leave(lock: &AtomicU32) {
    lock.store(FREE, Ordering::Release);
}

/// Whether a non-current span of a heap whose trim lock the caller holds has no live block:
/// every block its `used` counts is on its remote list (see the top of this file). Once true it
/// stays true until the lock holder collects or allocates.
#[inline]
pub fn holds_no_live_block(remote: &AtomicUsize, used: &AtomicU32) -> bool {
    let listed = remote.load(Ordering::Acquire) >> COUNT_SHIFT;
    used.load(Ordering::Acquire) as usize == listed
}
