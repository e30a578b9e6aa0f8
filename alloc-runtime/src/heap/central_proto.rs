// The central-pool hand-off protocol, kept free of the rest of the allocator so that the very
// same source is compiled twice: into the runtime (`heap/central.rs`, over `Span` and the pool's
// lock) and into the loom model `tests/loom_central.rs` (over a model span and loom's `Mutex`).
// The including module must bring `DerefMut` into scope.
//
// A span abandoned by an exiting thread goes into its class's pool, owned by nobody: whoever
// holds the pool's lock acts as its owner. Frees never take that lock: a thread that frees a
// block of a pooled span pushes it on the span's remote list, as into any span it does not own
// (the exiting owner quiesced the span, so its remote state is NONE and no delivery happens).
// Only the allocating side takes the lock:
// - a refill adopts a pooled span (`central_pop`) and collects its remote list as its new owner;
// - a sweep (`sweep`: a few spans each time a span is pooled or a thread takes fresh pages for a
//   span, all of them on `collect()`; and `sweep_locked` with a lock a freeing thread found free,
//   once per span's worth of its frees into pooled spans) takes
//   the oldest pooled span off the list, collects its remote list, and gives it back to the page
//   heap if no block is live, else puts it back at the front.
// A remote free counts in the span's `used` until it is collected, so a span whose `used` is 0
// after a collection has no block in flight: no free can still push to it.
// `central_push` writes the owner word and the tag *under* the lock, after everything the
// exiting thread did to the span, which the next holder of the lock sees.

/// List tag of a span on no list (`ListTag::None`).
pub const TAG_NONE: u8 = 0;
/// List tag of a span in a central pool (`ListTag::Central`).
pub const TAG_CENTRAL: u8 = 4;

/// Pooled spans a sweep looks at each time a span is pooled (`give_away`): enough to keep up
/// with the spans pooled, so that emptied spans go back to the page heap while threads come and
/// go, and few enough to keep a thread's exit short.
pub const SWEEP_ON_PUSH: usize = 2;

/// What the protocol needs of a span. The owner-only methods are called by the span's owner,
/// or by the holder of its pool's lock while the span is pooled.
pub trait PoolSpan {
    /// The list tag.
    fn tag(&self) -> u8;
    /// Sets the list tag.
    fn set_tag(&self, tag: u8);
    /// Sets the owner word (0: nobody).
    fn set_owner(&self, heap: usize);
    /// Blocks handed out and not freed locally (owner only).
    fn used(&self) -> u32;
    /// Takes the remote list onto the local free list (owner only); returns the blocks taken.
    fn collect_remote(&self) -> u32;
    /// Gives the span back to the page heap (owner only).
    ///
    /// # Safety
    /// The span holds no live block and is on no list.
    unsafe fn release(&self);
}

/// What the protocol needs of a pool (held under its lock).
pub trait PoolList<S> {
    /// Adds `span` at the front.
    fn push(&mut self, span: &S);
    /// Removes `span`, a member.
    fn unlink(&mut self, span: &S);
    /// Removes and returns the front member, if any.
    fn pop(&mut self) -> Option<*const S>;
    /// The back member (the one pooled or swept longest ago), if any.
    fn back(&self) -> Option<*const S>;
    /// Members.
    fn len(&self) -> usize;
}

/// Puts an abandoned span (owned by the caller, on no list, quiesced) in the locked pool.
pub fn central_push<S: PoolSpan, P: PoolList<S>>(mut pool: impl DerefMut<Target = P>, span: &S) {
    span.set_owner(0);
    span.set_tag(TAG_CENTRAL);
    pool.push(span);
}

/// Takes a span out of the locked pool; the caller owns it from then on (and collects its
/// remote list).
pub fn central_pop<S: PoolSpan, P: PoolList<S>>(
    mut pool: impl DerefMut<Target = P>,
) -> Option<*const S> {
    let s = pool.pop()?;
    // SAFETY: pool members are live spans.
    unsafe { (*s).set_tag(TAG_NONE) };
    Some(s)
}

/// Looks at up to `max` pooled spans, oldest first, under `pool` (a held guard): each one's
/// remote list is collected; the first with no live block left goes back to the page heap
/// (after the guard is dropped) and ends the sweep; the others go back to the front of the
/// pool. Returns the spans looked at and whether one was given back.
pub fn sweep_locked<S: PoolSpan, P: PoolList<S>>(
    mut pool: impl DerefMut<Target = P>,
    max: usize,
) -> (usize, bool) {
    let n = max.min(pool.len());
    for k in 0..n {
        let Some(s) = pool.back() else {
            return (k, false);
        };
        // SAFETY: pool members are live spans.
        let span = unsafe { &*s };
        pool.unlink(span);
        // The holder of the pool's lock owns its members.
        span.collect_remote();
        if span.used() == 0 {
            drop(pool);
            span.set_tag(TAG_NONE);
            // SAFETY: no live block and no block in flight (a remote free counts in `used` until
            // collected); off every list; nobody else can reach it as an owner: it is off the
            // pool and its owner word is 0.
            unsafe { span.release() };
            return (k + 1, true);
        }
        pool.push(span);
    }
    (n, false)
}

/// Looks at up to `max` pooled spans, oldest first (`lock` locks the pool), as
/// [`sweep_locked`] does, taking the lock again after each span given back. Returns the spans
/// given back.
pub fn sweep<S: PoolSpan, P: PoolList<S>, G: DerefMut<Target = P>>(
    lock: impl Fn() -> G,
    max: usize,
) -> usize {
    let mut released = 0;
    let mut left = max;
    while left > 0 {
        let (looked, gave) = sweep_locked(lock(), left);
        left -= looked;
        if !gave {
            break;
        }
        released += 1;
    }
    released
}

/// Gives away a span its exiting owner just took off its lists (quiesced): to the page heap if
/// empty, else to its pool (`lock` locks it), followed by a short sweep of the pool.
///
/// # Safety
/// The caller owns `span`.
pub unsafe fn give_away<S: PoolSpan, P: PoolList<S>, G: DerefMut<Target = P>>(
    span: &S,
    lock: impl Fn() -> G,
) {
    span.set_tag(TAG_NONE);
    span.collect_remote();
    if span.used() == 0 {
        // SAFETY: no live block, on no list, owned by the caller.
        unsafe { span.release() };
    } else {
        central_push(lock(), span);
        sweep(lock, SWEEP_ON_PUSH);
    }
}
