//! The fast paths: a pop from the thread's current span of a class, and a push onto the free
//! list of a span the thread owns. No atomic read-modify-write, no lock, one branch each; every
//! miss calls out of line (`slow.rs`, or `gate.rs` for the size-specialised routines).

use super::tls::current_heap;
use super::{inc, miss, slow, ClassCache, Heap};
use crate::chunk::span_of;
use crate::raw;
use crate::span::{narrow_next, Block, Span, OWNER_FULL, TINY_CLASS, TINY_SIZE};

/// The out-of-line path a fast path calls on a miss: `(class, size, zeroed)` to a block.
pub(crate) type Slow = fn(usize, usize, bool) -> *mut u8;

/// Tells the compiler that the branch it is on is rarely taken (`core::hint::cold_path`, with
/// rustc 1.95 or later; nothing before), so that it lays the fast path out as a straight line
/// even where the miss's out-of-line call is not known to be cold (the entry points' misses).
#[inline(always)]
// Only with a rustc that has it (the build script checks), whatever the MSRV.
#[allow(clippy::incompatible_msrv)]
fn cold_path() {
    #[cfg(specalloc_cold_path)]
    core::hint::cold_path();
}

/// Allocates a block of a class of 8 bytes or more from `heap`'s current span, zeroing its first
/// `size` bytes when `ZEROED`; on a miss, calls `slow`.
///
/// # Safety
/// `heap` is this thread's heap or the sentinel (whose current spans have no free block).
#[inline(always)]
pub(super) unsafe fn alloc_wide_in<const ZEROED: bool>(
    heap: *mut Heap,
    class: usize,
    size: usize,
    slow: Slow,
) -> *mut u8 {
    // SAFETY: forwarded; a class's cache is `class * CACHE_SIZE` bytes into the heap.
    unsafe { alloc_wide_cc::<ZEROED>(heap, class * CACHE_SIZE, || class, size, slow) }
}

/// The size of a class's cache in the heap: the stride of [`Heap::classes`], by which a caller
/// with a table of offsets ([`alloc_small_at`]) finds a class's cache without a multiply.
pub(crate) const CACHE_SIZE: usize = size_of::<ClassCache>();

// A class's offset is its cache's offset in the heap: the caches come first.
const _: () = assert!(core::mem::offset_of!(Heap, classes) == 0);

/// [`alloc_wide_in`] from the class cache `cache` bytes into `heap` (`class *`
/// [`CACHE_SIZE`]); `class` gives the class, which only the miss and the heap profiler's
/// sampled allocations need (a caller that has only the cache's offset derives it there).
///
/// # Safety
/// As for [`alloc_wide_in`]; `cache` is the offset of a class of 8 bytes or more.
#[inline(always)]
unsafe fn alloc_wide_cc<const ZEROED: bool>(
    heap: *mut Heap,
    cache: usize,
    class: impl Fn() -> usize,
    size: usize,
    slow: Slow,
) -> *mut u8 {
    // Plain casts, comparisons and `raw`'s accessors: in a build without optimisation every
    // method call would be a real call (see `crate::raw`).
    // SAFETY: `heap + cache` is a class cache of this thread's heap or the sentinel (caches
    // first, `repr(C)`); we write only after finding a block (the sentinel has none), and the
    // current span's list and count are this heap's alone (`add_current`).
    unsafe {
        let cc: &ClassCache = raw::as_ref((heap as *const u8).add(cache) as *const ClassCache);
        let span: &Span = raw::as_ref(raw::get(&cc.current) as *const Span);
        let b = raw::get(&span.free);
        if b as usize == 0 {
            cold_path();
            return slow(class(), size, ZEROED);
        }
        let fresh = raw::get(&span.free_zero);
        raw::set(&span.free, raw::as_ref(b).next);
        span.used.add_current();
        #[cfg(not(feature = "profiling"))]
        inc(&cc.allocs);
        #[cfg(feature = "profiling")]
        if super::count_fires_at(heap as *const u8, cache) {
            cold_path();
            return super::sampled::fire::<ZEROED>(class(), size, span, b);
        }
        #[cfg(feature = "checked")]
        crate::checked::on_alloc(b.cast());
        if ZEROED {
            super::owned::clear_block(b as *mut u8, size, fresh);
        }
        b as *mut u8
    }
}

/// Allocates a 4-byte block of the tiny class from `heap`'s current tiny span (zeroed when
/// `ZEROED`); on a miss, calls `slow`.
///
/// # Safety
/// As for [`alloc_wide_in`].
#[inline(always)]
pub(super) unsafe fn alloc_tiny_in<const ZEROED: bool>(heap: *mut Heap, slow: Slow) -> *mut u8 {
    // SAFETY: as in `alloc_wide_in`; the tiny class links through chunk offsets.
    unsafe {
        let cc = raw::at(&raw::as_ref(heap).classes, TINY_CLASS);
        let span: &Span = raw::as_ref(raw::get(&cc.current) as *const Span);
        let b = raw::get(&span.free);
        if b as usize == 0 {
            cold_path();
            return slow(TINY_CLASS, TINY_SIZE, ZEROED);
        }
        raw::set(&span.free, narrow_next(b));
        span.used.add_current();
        #[cfg(not(feature = "profiling"))]
        inc(&cc.allocs);
        #[cfg(feature = "profiling")]
        if super::count_fires_at(heap as *const u8, TINY_CLASS * CACHE_SIZE) {
            cold_path();
            return super::sampled::fire::<ZEROED>(TINY_CLASS, TINY_SIZE, span, b);
        }
        #[cfg(feature = "checked")]
        crate::checked::on_alloc(b.cast());
        if ZEROED {
            *(b as *mut u32) = 0;
        }
        b as *mut u8
    }
}

/// In a `dev`-based build at opt-level 0 on x86_64 Linux (`cfg(specalloc_asm_fast)`) this and
/// the other entry functions below but `alloc_small_at` are calls of their own: the
/// `GlobalAlloc` methods and the size-specialised entry points take the fast paths in assembly
/// there, and the paths still here (their misses, `realloc`, `alloc_zeroed`, the C entry
/// points) would otherwise hold a copy of the fast path's locals in their frames for each call
/// site.
///
/// Allocates a block of size class `class` (8 bytes or more) through the generic path; when
/// `ZEROED`, its first `size` bytes read zero. Null only when the OS refuses memory.
#[cfg_attr(not(specalloc_asm_fast), inline(always))]
#[cfg_attr(specalloc_asm_fast, inline(never))]
pub(crate) fn alloc_small<const ZEROED: bool>(class: usize, size: usize) -> *mut u8 {
    // SAFETY: the current heap is this thread's heap or the sentinel.
    unsafe { alloc_wide_in::<ZEROED>(current_heap(), class, size, miss::alloc_slow) }
}

/// [`alloc_small`] for the class whose cache is `cache` bytes into the heap (`class *`
/// [`CACHE_SIZE`], from a table of such offsets, as the C entry points have), with the miss
/// going to `slow` (a caller's own wrapper of [`super::alloc_slow`]), called in tail position:
/// a caller whose other calls are tail calls too needs no stack frame on its fast path. Two
/// instructions fewer on a hit than finding the cache from the class: the caches are not a
/// power of two apart.
///
/// # Safety
/// `cache` is `class * CACHE_SIZE` for a class of 8 bytes or more.
#[inline(always)]
pub(crate) unsafe fn alloc_small_at<const ZEROED: bool>(
    cache: usize,
    size: usize,
    slow: Slow,
) -> *mut u8 {
    // SAFETY: the current heap is this thread's heap or the sentinel; `cache` is forwarded.
    unsafe { alloc_wide_cc::<ZEROED>(current_heap(), cache, || cache / CACHE_SIZE, size, slow) }
}

/// Allocates a 4-byte block of the tiny class (objects of 1 to 4 bytes) through the generic
/// path. Null only when the OS refuses memory.
#[cfg_attr(not(specalloc_asm_fast), inline(always))]
#[cfg_attr(specalloc_asm_fast, inline(never))]
pub(crate) fn alloc_tiny<const ZEROED: bool>() -> *mut u8 {
    // SAFETY: the current heap is this thread's heap or the sentinel.
    unsafe { alloc_tiny_in::<ZEROED>(current_heap(), miss::alloc_slow) }
}

/// Frees a block of a class of 8 bytes or more.
///
/// # Safety
/// `p` must be a live block returned by a small-class allocation of this allocator.
#[cfg_attr(not(specalloc_asm_fast), inline(always))]
#[cfg_attr(specalloc_asm_fast, inline(never))]
pub(crate) unsafe fn free_small(p: *mut u8) {
    // SAFETY: forwarded.
    unsafe { free_in::<false>(p) }
}

/// Frees a block of the tiny class.
///
/// # Safety
/// `p` must be a live block returned by a tiny allocation of this allocator.
#[cfg_attr(not(specalloc_asm_fast), inline(always))]
#[cfg_attr(specalloc_asm_fast, inline(never))]
pub(crate) unsafe fn free_tiny(p: *mut u8) {
    // SAFETY: forwarded.
    unsafe { free_in::<true>(p) }
}

/// Frees a block of any span class (the tiny class or a size class: anything but a large
/// object), which it reads from the span: `dealloc`'s path, which then needs only the size and
/// alignment tests that tell a large object apart, not the route key's tiny test.
///
/// # Safety
/// `p` must be a live block returned by a tiny or small-class allocation of this allocator.
#[cfg_attr(not(specalloc_asm_fast), inline(always))]
#[cfg_attr(specalloc_asm_fast, inline(never))]
pub(crate) unsafe fn free_block(p: *mut u8) {
    let heap = current_heap();
    // SAFETY: `p` is a live small block, so its span descriptor is valid.
    let span = unsafe { raw::as_ref(span_of(p)) };
    if !span.owner_is(heap as usize) {
        // SAFETY: forwarded from our caller (the two paths read the class from the span).
        return unsafe { free_not_owned(heap, span, p) };
    }
    // SAFETY: as in `free_in`: this heap owns the span, so its free list and counters are ours;
    // `p` is one of its blocks, of the class the span says, and is no longer in use. Each
    // branch has its own tail, so that neither jumps to a shared one.
    unsafe {
        if raw::get(&span.class) as usize != TINY_CLASS {
            free_owned::<false>(heap, span, p)
        } else {
            free_owned::<true>(heap, span, p)
        }
    }
}

/// The owned half of a free: pushes `p` onto `span`'s free list (a narrow link when `NARROW`,
/// the tiny class), counts the free, and takes the span to the slow path when it empties.
///
/// # Safety
/// `heap` is this thread's heap and owns `span` (owner word, untagged); `p` is one of its
/// blocks, no longer in use, and `span` is of the tiny class exactly when `NARROW`.
#[inline(always)]
unsafe fn free_owned<const NARROW: bool>(heap: *mut Heap, span: &Span, p: *mut u8) {
    // Read before the stores below, which the compiler cannot tell apart from the class byte:
    // a caller that read the class already (C's `free`) then reads it once.
    let class = if NARROW {
        TINY_CLASS
    } else {
        raw::get(&span.class) as usize
    };
    // SAFETY: forwarded from our caller.
    unsafe {
        if NARROW {
            span.push_narrow(p as *mut Block);
        } else {
            span.push_wide(p as *mut Block);
        }
        inc(raw::at(&raw::as_ref(heap).frees, class));
        // Last, so that the test below reads the flags of the decrement.
        if span.drop_used() {
            slow::span_emptied(span, &*heap);
        }
    }
}

/// A free into a span whose owner word is not exactly `heap`: one of `heap`'s spans parked full
/// (inline: a program that frees at random frees into such spans often, a quarter of a
/// BTreeMap churn's frees), or the out-of-line miss.
///
/// # Safety
/// `p` is a live block of `span`; `heap` is this thread's heap or the sentinel.
#[inline(always)]
unsafe fn free_not_owned(heap: *mut Heap, span: &Span, p: *mut u8) {
    // Read again: the caller's test compares with memory and keeps no register for the word.
    if span.owner_word() == heap as usize | OWNER_FULL {
        // SAFETY: this heap owns the parked span (the sentinel owns none); `p` is one of its
        // blocks.
        return unsafe { slow::free_to_parked(&*heap, span, p) };
    }
    // SAFETY: forwarded from our caller.
    unsafe { miss::free_slow(p, heap, span) }
}

/// Frees a block; `NARROW` says it is a tiny block.
///
/// # Safety
/// `p` is a live block of a span of the tiny class when `NARROW`, of another class otherwise.
#[inline(always)]
unsafe fn free_in<const NARROW: bool>(p: *mut u8) {
    let heap = current_heap();
    // SAFETY: `p` is a live small block, so its span descriptor is valid.
    let span = unsafe { raw::as_ref(span_of(p)) };
    if !span.owner_is(heap as usize) {
        // SAFETY: forwarded from our caller.
        return unsafe { free_not_owned(heap, span, p) };
    }
    // SAFETY: this heap owns the span (owner word, untagged); `p` is one of its blocks, no
    // longer in use, of the tiny class exactly when `NARROW` (our caller's contract).
    unsafe { free_owned::<NARROW>(heap, span, p) }
}
