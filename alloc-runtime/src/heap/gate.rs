//! The size-specialised routines' view of the heap. They use the same fast paths as the generic
//! path, but through a thread-local of their own (`SPEC_HEAP`) that stays the sentinel until the
//! first routine called on the thread has checked that blocks from the routines may be handed
//! out at all, that is that `install!` declared `SpecAlloc` itself as the global allocator (see
//! [`ensure_spec_heap`]); otherwise the routines return null and the entry points use std. Every later call goes straight to the fast path: the
//! check costs nothing after the first miss.

use core::cell::Cell;
use core::ptr;
use core::sync::atomic::{AtomicBool, Ordering};

use super::fast::{alloc_tiny_in, alloc_wide_in};
use super::{current_heap, empty_heap, lifecycle, slow, Heap, EMPTY_HEAP};

thread_local! {
    /// This thread's heap as seen by the size-specialised routines: the sentinel until the first
    /// such routine has checked that this allocator is the global allocator.
    static SPEC_HEAP: Cell<*mut Heap> = const { Cell::new(&EMPTY_HEAP.0 as *const Heap as *mut Heap) };
}

/// This thread's heap for the size-specialised routines (see [`ensure_spec_heap`]).
#[inline(always)]
fn spec_heap() -> *mut Heap {
    SPEC_HEAP.with(|h| h.get())
}

/// Sends this thread's routines back through the check (its heap is being torn down).
pub(super) fn forget_spec_heap() {
    SPEC_HEAP.with(|c| c.set(empty_heap()));
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

#[cold]
#[inline(never)]
fn alloc_slow_spec(class: usize, size: usize, zeroed: bool) -> *mut u8 {
    if spec_heap() == empty_heap() && !ensure_spec_heap() {
        return ptr::null_mut();
    }
    slow::alloc_slow(class, size, zeroed)
}

/// Makes the size-specialised routines usable on this thread: checks that
/// [`install!`](crate::install) marked `SpecAlloc` itself as the global allocator, then gives
/// the thread a heap. Blocks from these routines are handed to `Box`/`Vec`, which free them
/// through the global allocator: a wrapper or another allocator would see blocks it never
/// allocated, so without the mark this returns `false` and the routine returns null, which
/// sends the entry point (`spec.rs`) to the std code it stands for. The thread's routine heap
/// stays the sentinel then, so each call asks again (cheaply: one load), and a thread that
/// started before the mark was set picks it up.
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
            Some(h) => h,
            None => return false,
        };
    }
    if !VERIFIED.load(Ordering::Acquire) {
        verify_global_allocator();
    }
    SPEC_HEAP.with(|c| c.set(heap));
    true
}

/// Whether [`verify_global_allocator`] has run.
static VERIFIED: AtomicBool = AtomicBool::new(false);

/// A sanity check of the mark, once per process: a block of the global allocator must be one
/// of specalloc's. It cannot fail when the mark was set by `install!` (whose
/// `#[global_allocator]` is `SpecAlloc`); it guards against a misuse of the hidden marking
/// function with another allocator installed.
#[cold]
fn verify_global_allocator() {
    let layout = core::alloc::Layout::from_size_align(24, 8).expect("valid layout");
    // SAFETY: a non-zero-sized layout; the block is freed right below with the same layout.
    let p = unsafe { std::alloc::alloc(layout) };
    let ours = p.is_null() || crate::chunk::owns(p);
    if !p.is_null() {
        // SAFETY: allocated just above by the global allocator with `layout`.
        unsafe { std::alloc::dealloc(p, layout) };
    }
    assert!(
        ours,
        "specalloc: the global allocator was marked as SpecAlloc, but its blocks are not \
         specalloc's (was `spec::__declare_global_allocator` called by hand?)"
    );
    VERIFIED.store(true, Ordering::Release);
}
