//! The mark [`install!`](crate::install) sets: whether the program's global allocator is
//! `SpecAlloc` itself, so that the size-specialised routines may hand out blocks. One
//! process-wide flag, decided before `main` (by the constructor `install!` emits) and never
//! changed after: the entry points of `spec` read it on every call (one load and one branch)
//! and, without it, do what std does at once; the heap's routine gate reads it too, and `spec`
//! re-exports it.

use core::sync::atomic::{AtomicBool, Ordering};

/// Whether [`install!`](crate::install) marked the global allocator as specalloc's own
/// `SpecAlloc` (set before `main` by the constructor the macro emits).
static INSTALLED: AtomicBool = AtomicBool::new(false);

/// Whether the routines may hand out blocks: [`install!`](crate::install) declared
/// `SpecAlloc` itself as the global allocator. `false` in a program that installs it by hand,
/// wraps it, or installs another allocator: the entry points then do what std does.
///
/// ```
/// // This doctest does not call `install!`: the entry points use the global allocator.
/// assert!(!specalloc_runtime::spec::installed());
/// let b = specalloc_runtime::spec::boxed(5u64);
/// assert_eq!(*b, 5);
/// ```
#[inline(always)]
pub fn installed() -> bool {
    // Relaxed: the flag is set before `main`, before any thread but the first exists, and
    // guards nothing but itself (the heap the routines use is set up by each thread).
    INSTALLED.load(Ordering::Relaxed)
}

/// Marks the global allocator as `SpecAlloc` itself. Called by the constructor that
/// [`install!`](crate::install) emits next to its `#[global_allocator]`; not public API.
///
/// # Safety
/// The program's `#[global_allocator]` must be [`SpecAlloc`](crate::SpecAlloc) itself, not a
/// wrapper around it nor another allocator: blocks from the routines are freed by the global
/// allocator's `dealloc`, which must be specalloc's.
///
/// As a sanity check against a misuse of this hidden function, a block of the global allocator
/// must be one of specalloc's (it cannot fail when called by `install!`): otherwise this
/// panics, and the mark stays unset.
#[doc(hidden)]
pub unsafe fn __declare_global_allocator() {
    verify_global_allocator();
    INSTALLED.store(true, Ordering::Relaxed);
}

/// Panics unless a block of the global allocator is one of specalloc's.
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
}
