//! The heap profiler's countdowns (cargo feature `profiling`), and the allocations they pick.
//!
//! Each class's allocation counter ([`ClassCache::allocs`]) is offset so that it wraps to zero
//! at the class's next sampled allocation: the fast path's increment becomes an `add` whose flags
//! a branch reads, and that branch, taken once per sample, is the whole cost on the fast path.
//! The gap from one sample to the next is drawn per class from the geometric distribution the
//! byte-based Poisson sampling gives a block of the class's size (`prof/sampler.rs`), so every
//! allocation is sampled with the probability its size gives it, whatever came before.
//!
//! A picked allocation does not keep the block the fast path popped: the block goes back to its
//! span and the object gets a page run of its own ([`crate::large::alloc_sampled`]), whose descriptor holds
//! the sample's record, so that its free (a small free that finds a large span) drops the
//! record without any lookup for the blocks that were not sampled.
//!
//! A heap draws its countdowns when it first sees a sampling epoch (a start, a stop, a change of
//! rate): on its next slow path or when a countdown fires, or at once for the thread that starts
//! or stops profiling. While profiling is off a countdown fires every 65,536 allocations of its
//! class, so that a thread that never leaves its fast paths sees a start soon.

use core::ptr;
use core::sync::atomic::{AtomicBool, Ordering};

use super::tls::current_heap;
use super::Heap;
use crate::span::{span_block_size, Block, Span, SPAN_CLASSES, TINY_CLASS};

/// Whether the shared heap's holder may take a sample (written and read under the shared
/// heap's lock): a thread that only tried that lock (its first allocations, see
/// `lifecycle::try_alloc_shared`), whose allocations made while it walks its stack, should the
/// unwinder allocate, find the lock taken and go to a heap of its own. A thread that waits for
/// the lock (its heap torn down, or none can be made) would wait for itself there: its samples
/// are skipped.
pub(super) static SHARED_MAY_SAMPLE: AtomicBool = AtomicBool::new(false);

/// Sets the counter of `h`'s class `class` to reach zero after `gap` more allocations,
/// keeping its count (owner only), inside the heap's sequence lock so that a reader on another
/// thread never pairs the new counter with the old offset ([`Heap::alloc_count`]).
fn arm_class(h: &Heap, class: usize, gap: u64) {
    let cc = &h.classes[class];
    let count = cc.alloc_count();
    let counter = 0u64.wrapping_sub(gap);
    let seq = h.prof_seq.load(Ordering::Relaxed);
    h.prof_seq.store(seq.wrapping_add(1), Ordering::Relaxed);
    core::sync::atomic::fence(Ordering::Release);
    cc.alloc_bias
        .store(counter.wrapping_sub(count), Ordering::Relaxed);
    cc.allocs.store(counter, Ordering::Relaxed);
    h.prof_seq.store(seq.wrapping_add(2), Ordering::Release);
}

/// Draws every class's countdown for the current epoch (all to the poll interval while
/// profiling is off), if this heap has not yet.
///
/// `h` is this thread's heap (or the shared heap, under its lock).
#[inline]
pub(super) fn arm(h: &Heap) {
    let epoch = crate::prof::epoch();
    if h.prof_epoch.get() == epoch {
        return;
    }
    h.prof_epoch.set(epoch);
    let rate = crate::prof::rate();
    for class in 1..SPAN_CLASSES {
        arm_class(h, class, crate::prof::gap(span_block_size(class), rate));
    }
}

/// Draws the countdowns of this thread's heap for the current epoch, at once (a thread that
/// starts or stops profiling). Nothing for a thread without a heap: it draws them when it
/// makes one.
pub(crate) fn arm_this_thread() {
    let heap = current_heap();
    if heap != super::empty_heap() {
        // SAFETY: a heap other than the sentinel is this thread's live heap.
        arm(unsafe { &*heap });
    }
}

/// The fast path's countdown of `class` reached zero on the allocation of `b`, which it popped
/// from `span` (its current span of the class) and counted: see [`take_sample`]. Called in tail
/// position with its arguments in registers, so that the fast path needs no stack frame;
/// `extern "C"` (it cannot unwind), so that the C entry points, which cannot either, call it
/// in tail position too.
///
/// # Safety
/// As for [`take_sample`], with `span` a current span of this thread's heap.
#[cold]
#[inline(never)]
pub(super) unsafe extern "C" fn fire<const ZEROED: bool>(
    class: usize,
    size: usize,
    span: &Span,
    b: *mut Block,
) -> *mut u8 {
    // The span's owner: this thread's heap (the fast path allocates from no other).
    let heap = span.owner.load(Ordering::Relaxed) as *const Heap;
    // SAFETY: forwarded; the owner of a current span is a live heap.
    unsafe { take_sample(&*heap, class, size, ZEROED, span, b) }
}

/// [`fire`] for the refill (`slow::alloc_from`), whose heap may be the shared heap.
///
/// # Safety
/// As for [`take_sample`].
#[cold]
#[inline(never)]
pub(super) unsafe fn fire_in(
    h: &Heap,
    class: usize,
    size: usize,
    zeroed: bool,
    span: &Span,
    b: *mut Block,
) -> *mut u8 {
    // SAFETY: forwarded.
    unsafe { take_sample(h, class, size, zeroed, span, b) }
}

/// The countdown of `class` on `h` reached zero on the allocation of `b`, which the caller
/// popped from `span` (current, owned by `h`) and counted. Draws the next gap; on this thread's
/// own heap, or on the shared heap for a thread that only tried its lock
/// ([`SHARED_MAY_SAMPLE`]), records the sample and gives the allocation a page run of its own,
/// freeing `b` back to `span`; otherwise (a skipped sample) hands out `b`.
///
/// # Safety
/// `h` owns `span`, which is its current span of `class`; `b` is the block just popped from
/// it and counted in `span.used` and in the class's counter; no lock of the allocator is held
/// unless `h` is not this thread's own heap.
///
/// Inlined into its two callers, so that the stack it walks has no frame of its own.
#[inline(always)]
unsafe fn take_sample(
    h: &Heap,
    class: usize,
    size: usize,
    zeroed: bool,
    span: &Span,
    b: *mut Block,
) -> *mut u8 {
    let cc = &h.classes[class];
    let block = span_block_size(class);
    // A heap other than this thread's is the shared heap, whose lock the caller holds.
    let record = ptr::eq(h, current_heap()) || SHARED_MAY_SAMPLE.load(Ordering::Relaxed);
    if record {
        arm(h);
    }
    arm_class(h, class, crate::prof::gap(block, crate::prof::rate()));
    // Recording walks the stack and taking the run calls the page heap: neither allocates
    // from this heap, and if the unwinder did, `b` is simply a block in use meanwhile.
    let sampled = match record.then(|| crate::prof::sample(block, size)).flatten() {
        Some(r) => crate::large::alloc_sampled(size, zeroed, r),
        None => ptr::null_mut(),
    };
    if sampled.is_null() {
        // SAFETY: forwarded.
        unsafe { hand_out(class, size, zeroed, span, b) }
    } else {
        // `b` goes back as a local free would put it; the current span is pinned, so its
        // count does not reach zero.
        // SAFETY: `h` owns `span` and `b` is one of its blocks, no longer used.
        unsafe {
            if class == TINY_CLASS {
                span.push_narrow(b);
            } else {
                span.push_wide(b);
            }
        }
        span.used.set(span.used.get() - 1);
        // Not an allocation of the class after all (a large one): one off the count, the
        // countdown drawn above left as it is.
        cc.alloc_bias.store(
            cc.alloc_bias.load(Ordering::Relaxed).wrapping_add(1),
            Ordering::Relaxed,
        );
        sampled
    }
}

/// Hands out `b` as the fast path does after its count: the checked mode's record, the zeroing.
///
/// # Safety
/// `b` was just popped from `span`, a span of `class` owned by the caller's heap, whose
/// free-list flag says whether the blocks left on its list were never written.
unsafe fn hand_out(class: usize, size: usize, zeroed: bool, span: &Span, b: *mut Block) -> *mut u8 {
    #[cfg(feature = "checked")]
    crate::checked::on_alloc(b.cast());
    if zeroed {
        if class == TINY_CLASS {
            // SAFETY: a tiny block, ours now.
            unsafe { *(b as *mut u32) = 0 };
        } else {
            // SAFETY: a block of `class`, ours now, at least `size` bytes long.
            unsafe { super::owned::clear_block(b.cast(), size, span.free_zero.get()) };
        }
    }
    b.cast()
}
