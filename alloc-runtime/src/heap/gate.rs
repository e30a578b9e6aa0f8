//! The size-specialised routines' view of the heap. They use the same fast paths as the generic
//! path, but through a thread-local of their own (`SPEC_HEAP`) that stays the sentinel until the
//! first routine called on the thread has checked that blocks from the routines may be handed
//! out at all (see [`ensure_spec_heap`]). Every later call goes straight to the fast path: the
//! check costs nothing after the first miss.

use core::cell::Cell;
use core::ptr;
use core::sync::atomic::{AtomicU8, Ordering};

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

/// Whether this allocator is the program's global allocator: 0 not checked yet, 1 yes, 2 no.
static GLOBAL_CHECK: AtomicU8 = AtomicU8::new(0);

/// Makes the size-specialised routines usable on this thread: gives it a heap, and checks (once
/// per process) that this allocator is the global allocator. Blocks from these routines are
/// handed to `Box`/`Vec`, which free them through the global allocator: with another one
/// installed that would corrupt memory, so it panics instead, naming the fix.
#[cold]
#[inline(never)]
fn ensure_spec_heap() -> bool {
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
    if GLOBAL_CHECK.load(Ordering::Acquire) != 1 {
        check_global_allocator();
    }
    SPEC_HEAP.with(|c| c.set(heap));
    true
}

#[cold]
fn check_global_allocator() {
    let layout = core::alloc::Layout::from_size_align(24, 8).expect("valid layout");
    // SAFETY: a non-zero-sized layout; the block is freed right below with the same layout.
    let p = unsafe { std::alloc::alloc(layout) };
    let ours = !p.is_null() && crate::chunk::owns(p);
    if !p.is_null() {
        // SAFETY: allocated just above by the global allocator with `layout`.
        unsafe { std::alloc::dealloc(p, layout) };
    }
    if ours {
        GLOBAL_CHECK.store(1, Ordering::Release);
        return;
    }
    GLOBAL_CHECK.store(2, Ordering::Release);
    panic!(
        "specalloc: a size-specialised allocation routine was called, but specalloc is not the \
         global allocator, so the Box or Vec it built would be freed by another allocator. \
         Install it in your binary: `#[global_allocator] static GLOBAL: specalloc::SpecAlloc = \
         specalloc::SpecAlloc;` (or build with the `no-size-specialized` feature, which sends \
         every specialised entry point to the global allocator)."
    );
}
