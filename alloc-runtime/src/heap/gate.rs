//! The size-specialised routines' view of the heap. They use the same fast paths as the generic
//! path, but through a thread-local of their own (`SPEC_HEAP`) that stays the sentinel until the
//! first routine called on the thread has checked that blocks from the routines may be handed
//! out at all, that is that `install!` declared `SpecAlloc` itself as the global allocator (see
//! [`ensure_spec_heap`]); otherwise the routines return null.
//!
//! The entry points of `spec.rs` do not call a routine first: they read the install mark
//! (`mark::installed`, decided by the linker), one load and one branch (none under fat LTO in an
//! installed program), and without it go straight to the std code they stand for; with it they
//! take the block inline ([`take_inline`], [`take_with`],
//! the fast path with the class and size as constants, which is what the generic path becomes
//! at a constant layout once inlined, minus the size-class lookup) and call the routine out of
//! line only on a miss.

use core::ptr;

use super::fast::{alloc_tiny_in, alloc_wide_in};
use super::tls::{self, current_heap};
use super::{empty_heap, lifecycle, Heap};

/// This thread's heap for the size-specialised routines (see [`ensure_spec_heap`]).
#[inline(always)]
fn spec_heap() -> *mut Heap {
    tls::locals().spec_heap.get()
}

/// The size-specialised routines' fast path for a class of 8 bytes or more: like
/// [`super::alloc_small`], but through [`spec_heap`], so that the first call on a thread goes
/// through [`ensure_spec_heap`].
#[inline(always)]
pub(crate) fn alloc_small_spec<const ZEROED: bool>(class: usize, size: usize) -> *mut u8 {
    // SAFETY: the spec heap is this thread's heap or the sentinel.
    unsafe { alloc_wide_in::<ZEROED>(spec_heap(), class, size, alloc_slow_spec) }
}

/// The tiny class's size-specialised fast path (see [`alloc_small_spec`]).
#[inline(always)]
pub(crate) fn alloc_tiny_spec<const ZEROED: bool>() -> *mut u8 {
    // SAFETY: the spec heap is this thread's heap or the sentinel.
    unsafe { alloc_tiny_in::<ZEROED>(spec_heap(), alloc_slow_spec) }
}

/// The entry points' inline fast path, for a program whose mark is set (the caller checked
/// [`crate::mark::installed`]): a block of size class `class` (`size` bytes cleared when
/// `ZEROED`), or of the tiny class when `tiny`, from this thread's heap; on a miss, `routine`
/// (the out-of-line routine of the same class and size, which takes the slow path), so that
/// every use of a class still names its routine in the binary. Null only when the OS refuses
/// memory.
///
/// # Safety
/// `routine` must serve the same class (and zeroing) as `tiny`/`class`/`size`, and
/// [`crate::mark::installed`] must have returned `true`: the block is handed to `Box`/`Vec`,
/// which free it through the global allocator, so that must be `SpecAlloc` itself.
#[inline(always)]
pub(crate) unsafe fn take_inline<const ZEROED: bool>(
    tiny: bool,
    class: usize,
    size: usize,
    routine: fn() -> *mut u8,
) -> *mut u8 {
    // SAFETY: forwarded from our caller.
    let p = unsafe { take_with::<ZEROED>(tiny, class, size, miss) };
    if p.is_null() {
        refill(routine)
    } else {
        p
    }
}

/// The fast path of [`take_inline`] with the miss handler `slow` (called with the class, the
/// size and `ZEROED`, as the generic path calls its slow path): a block from this thread's
/// current span of the class, or what `slow` returns.
///
/// # Safety
/// As for [`take_inline`]; `slow` returns null or a block of the class that `Box`/`Vec` may
/// free through the global allocator.
#[inline(always)]
pub(crate) unsafe fn take_with<const ZEROED: bool>(
    tiny: bool,
    class: usize,
    size: usize,
    slow: fn(usize, usize, bool) -> *mut u8,
) -> *mut u8 {
    // In a `dev`-based build, the pop in assembly (`fast_asm.rs`), which stays a few
    // instructions without optimisation.
    #[cfg(specalloc_asm_fast)]
    if !ZEROED {
        // SAFETY: `class` is a class of 8 bytes or more when not `tiny` (our caller's plan),
        // so its cache is inside the heap; the block goes to `Box`/`Vec` (our caller's
        // contract), which free it through this allocator.
        let p = unsafe {
            if tiny {
                super::fast_asm::take_tiny()
            } else {
                super::fast_asm::take_wide(class * core::mem::size_of::<super::ClassCache>())
            }
        };
        if p as usize != 0 {
            return p;
        }
        // The miss with the arguments the Rust path gives it (the tiny class's own).
        return if tiny {
            slow(crate::span::TINY_CLASS, crate::span::TINY_SIZE, ZEROED)
        } else {
            slow(class, size, ZEROED)
        };
    }
    // SAFETY: the current heap is this thread's heap or the sentinel, whose spans have no free
    // block (the miss then calls `slow`).
    unsafe {
        if tiny {
            alloc_tiny_in::<ZEROED>(current_heap(), slow)
        } else {
            alloc_wide_in::<ZEROED>(current_heap(), class, size, slow)
        }
    }
}

/// Calls the routine on the inline fast path's miss, out of line and marked cold: the miss is
/// rare (a span refill), and the mark lets the compiler lay the hit out as a straight line.
#[cold]
#[inline(never)]
fn refill(routine: fn() -> *mut u8) -> *mut u8 {
    routine()
}

/// The inline fast path's miss: null, which [`take_inline`] turns into a call of the routine
/// (and `spec::boxed` into a call with the value).
#[inline(always)]
pub(crate) fn miss(_class: usize, _size: usize, _zeroed: bool) -> *mut u8 {
    ptr::null_mut()
}

#[cold]
#[inline(never)]
fn alloc_slow_spec(class: usize, size: usize, zeroed: bool) -> *mut u8 {
    if spec_heap() == empty_heap() && !ensure_spec_heap() {
        return ptr::null_mut();
    }
    super::miss::alloc_slow(class, size, zeroed)
}

/// Makes the size-specialised routines usable on this thread: checks that
/// [`install!`](crate::install) marked `SpecAlloc` itself as the global allocator, then gives
/// the thread a heap. Blocks from these routines are handed to `Box`/`Vec`, which free them
/// through the global allocator: a wrapper or another allocator would see blocks it never
/// allocated, so without the mark this returns `false` and the routine returns null, which
/// sends the caller to the std code it stands for. The thread's routine heap stays the sentinel
/// then, so each call asks again; only a direct call of a routine gets here without the mark,
/// because the entry points read the mark themselves first.
///
/// A thread's first routine call gives it a heap at once, even while many threads have one:
/// only the generic path serves a thread's first few calls without a heap
/// (`lifecycle::alloc_heapless`), and a routine's hit reads the heap this sets.
#[cold]
#[inline(never)]
fn ensure_spec_heap() -> bool {
    if !crate::mark::installed() {
        return false;
    }
    if lifecycle::exited() {
        // A destructor after this thread's teardown: the generic path serves it.
        return true;
    }
    let mut heap = current_heap();
    if heap == empty_heap() {
        heap = match lifecycle::init_heap() {
            Ok(h) => h,
            // The generic path serves it from the shared heap.
            Err(lifecycle::NoHeap::Shared) => return true,
            Err(lifecycle::NoHeap::OutOfMemory) => return false,
        };
    }
    tls::locals().spec_heap.set(heap);
    true
}
