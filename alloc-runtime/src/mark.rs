//! The mark [`install!`](crate::install) sets: whether the program's global allocator is
//! `SpecAlloc` itself, so that the size-specialised routines may hand out blocks. A leaf: the
//! heap's routine gate reads it, `spec` re-exports it.

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
#[inline]
pub fn installed() -> bool {
    INSTALLED.load(Ordering::Acquire)
}

/// Marks the global allocator as `SpecAlloc` itself. Called by the constructor that
/// [`install!`](crate::install) emits next to its `#[global_allocator]`; not public API.
///
/// # Safety
/// The program's `#[global_allocator]` must be [`SpecAlloc`](crate::SpecAlloc) itself, not a
/// wrapper around it nor another allocator: blocks from the routines are freed by the global
/// allocator's `dealloc`, which must be specalloc's.
#[doc(hidden)]
pub unsafe fn __declare_global_allocator() {
    INSTALLED.store(true, Ordering::Release);
}
