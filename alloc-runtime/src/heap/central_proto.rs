// The central-pool hand-off protocol, kept free of the rest of the allocator so that the very
// same source is compiled twice: into the runtime (`heap/central.rs`, over `Span` and the pool's
// `SpinLock`) and into the loom model `tests/loom_central.rs` (over a model span and loom's
// `Mutex`). The including module must bring `DerefMut` into scope.
//
// A span abandoned by an exiting thread goes into its class's pool, owned by nobody: whoever
// holds the pool's lock acts as its owner. A thread that frees a block of a span whose owner
// word is 0 frees it under that lock (`free_to_central`), so the span goes back to the page heap
// with its last block; if the span was adopted meanwhile (its tag is no longer CENTRAL), the
// free goes to the span's remote list instead. A refill adopts a pooled span (`central_pop`).
// `central_push` writes the owner word and the tag *under* the lock: a freeing thread that sees
// owner 0 must find the span on the pool's list, after everything the exiting thread did to it.

/// List tag of a span on no list (`ListTag::None`).
pub const TAG_NONE: u8 = 0;
/// List tag of a span in a central pool (`ListTag::Central`).
pub const TAG_CENTRAL: u8 = 4;

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
    /// Sets `used` (owner only).
    fn set_used(&self, used: u32);
    /// Pushes a freed block on the local free list (owner only).
    ///
    /// # Safety
    /// `block` is a block of this span, live until now, freed once.
    unsafe fn push_local(&self, block: usize);
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
    /// Adds `span`.
    fn push(&mut self, span: &S);
    /// Removes `span`, a member.
    fn unlink(&mut self, span: &S);
    /// Removes and returns a member, if any.
    fn pop(&mut self) -> Option<*const S>;
}

/// Frees `block` into `span`, acting as its owner under the pool's lock (`pool` is the locked
/// pool). Returns false, having done nothing, if the span is no longer pooled (adopted
/// meanwhile): the caller frees the block remotely then.
///
/// # Safety
/// `block` is a live block of `span`, freed once; `span` is of the pool's class.
pub unsafe fn free_to_central<S: PoolSpan, P: PoolList<S>>(
    mut pool: impl DerefMut<Target = P>,
    span: &S,
    block: usize,
) -> bool {
    if span.tag() != TAG_CENTRAL {
        return false;
    }
    // SAFETY: a pooled span is owned by the holder of the pool's lock: us.
    unsafe { span.push_local(block) };
    span.set_used(span.used() - 1);
    span.collect_remote();
    if span.used() == 0 {
        pool.unlink(span);
        drop(pool);
        span.set_tag(TAG_NONE);
        // SAFETY: no live block, off every list; its owner word is 0 and its tag no longer
        // CENTRAL, so nobody else acts as its owner, and it has no block left to free.
        unsafe { span.release() };
    }
    true
}

/// Puts an abandoned span (owned by the caller, on no list, quiesced) in the locked pool.
pub fn central_push<S: PoolSpan, P: PoolList<S>>(mut pool: impl DerefMut<Target = P>, span: &S) {
    span.set_owner(0);
    span.set_tag(TAG_CENTRAL);
    pool.push(span);
}

/// Takes a span out of the locked pool; the caller owns it from then on.
pub fn central_pop<S: PoolSpan, P: PoolList<S>>(
    mut pool: impl DerefMut<Target = P>,
) -> Option<*const S> {
    let s = pool.pop()?;
    // SAFETY: pool members are live spans.
    unsafe { (*s).set_tag(TAG_NONE) };
    Some(s)
}

/// Gives away a span its exiting owner just took off its lists (quiesced): to the page heap if
/// empty, else to its pool (`lock` locks it).
///
/// # Safety
/// The caller owns `span`.
pub unsafe fn give_away<S: PoolSpan, P: PoolList<S>, G: DerefMut<Target = P>>(
    span: &S,
    lock: impl FnOnce() -> G,
) {
    span.set_tag(TAG_NONE);
    span.collect_remote();
    if span.used() == 0 {
        // SAFETY: no live block, on no list, owned by the caller.
        unsafe { span.release() };
    } else {
        central_push(lock(), span);
    }
}
