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
//! rate): on its next slow path, or at once for the thread that starts or stops profiling.

use core::ptr;
use core::sync::atomic::Ordering;

use super::tls::current_heap;
use super::{ClassCache, Heap};
use crate::span::{span_block_size, Block, Span, SPAN_CLASSES, TINY_CLASS};

/// Sets `cc`'s counter to reach zero after `gap` more allocations, keeping its count.
fn arm_class(cc: &ClassCache, gap: u64) {
    let count = cc.alloc_count();
    let counter = 0u64.wrapping_sub(gap);
    // Owner-written: a reader between the two stores sees a count off by one gap, once.
    cc.alloc_bias
        .store(counter.wrapping_sub(count), Ordering::Relaxed);
    cc.allocs.store(counter, Ordering::Relaxed);
}

/// Draws every class's countdown for the current epoch (all to never firing while
/// profiling is off), if this heap has not yet.
///
/// `h` is this thread's heap (or the fallback heap, under its lock).
#[inline]
pub(super) fn arm(h: &Heap) {
    let epoch = crate::prof::epoch();
    if h.prof_epoch.get() == epoch {
        return;
    }
    h.prof_epoch.set(epoch);
    let rate = crate::prof::rate();
    for (class, cc) in h.classes.iter().enumerate().take(SPAN_CLASSES).skip(1) {
        arm_class(cc, crate::prof::gap(span_block_size(class), rate));
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

/// The countdown of `class` on `h` reached zero on the allocation of `b`, which the caller
/// popped from `span` (current, owned by `h`) and counted. Draws the next gap; on this thread's
/// own heap, records the sample and gives the allocation a page run of its own, freeing `b`
/// back to `span`; otherwise (the fallback heap, or a skipped sample) hands out `b`.
///
/// # Safety
/// `h` owns `span`, which is its current span of `class`; `b` is the block just popped from
/// it and counted in `span.used` and in the class's counter; no lock of the allocator is held
/// unless `h` is not this thread's own heap.
pub(super) unsafe fn take_sample(
    h: &Heap,
    class: usize,
    size: usize,
    zeroed: bool,
    span: &Span,
    b: *mut Block,
) -> *mut u8 {
    let cc = &h.classes[class];
    let block = span_block_size(class);
    let own = ptr::eq(h, current_heap());
    if own {
        arm(h);
    }
    arm_class(cc, crate::prof::gap(block, crate::prof::rate()));
    // Recording walks the stack and taking the run calls the page heap: neither allocates
    // from this heap, and if the unwinder did, `b` is simply a block in use meanwhile.
    let sampled = match own.then(|| crate::prof::sample(block, size)).flatten() {
        Some(r) => crate::large::alloc_sampled(size, zeroed, r),
        None => ptr::null_mut(),
    };
    let p = if sampled.is_null() {
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
    };
    if own {
        // The heap is consistent again: a requested dump may allocate.
        crate::prof::serve_dump_request();
    }
    p
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
