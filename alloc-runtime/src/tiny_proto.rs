// The tiny blocks' liveness protocol, kept free of the rest of the allocator so that the same
// source is compiled into the runtime (`heap.rs`, with `core` atomics) and into the loom model
// `tests/loom_tiny.rs` (with loom's). The including module must bring `AtomicU8` and `Ordering`
// into scope.
//
// A tiny block's count starts at `TINY_BIAS` when it becomes its owner's current block; the
// owner carves objects from it without touching the count. Every free, from any thread,
// subtracts one. When the block stops being current, the owner subtracts `TINY_BIAS - carved`.
// Exactly one of these subtractions brings the count to zero, and whoever makes it frees the
// block; the bias keeps a current block alive whatever is freed from it. A block that never was
// current (it held one object from the start) starts at 1.

/// The bias a current block's count carries: more than a block can hold objects.
pub const TINY_BIAS: u8 = 64;

/// Ends a block's time as current after `carved` objects. Returns whether the block is dead
/// (every object already freed), in which case the caller frees it.
#[inline]
pub fn retire_count(count: &AtomicU8, carved: u8) -> bool {
    let drop_by = TINY_BIAS - carved;
    count.fetch_sub(drop_by, Ordering::AcqRel) == drop_by
}

/// Frees one object of a block. Returns whether that was the block's last reference, in which
/// case the caller frees the block.
#[inline(always)]
pub fn free_count(count: &AtomicU8) -> bool {
    if count.fetch_sub(1, Ordering::Release) == 1 {
        fence_acquire();
        return true;
    }
    false
}
