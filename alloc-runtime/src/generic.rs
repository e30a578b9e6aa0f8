//! The generic entry path: a layout's route (the tiny class, a size class from the run-time
//! table, or large) and its fast path, for the `GlobalAlloc` methods and the crate's `alloc`,
//! `alloc_zeroed` and `dealloc`.
//!
//! In builds of a `dev`-based profile on x86_64 Linux (`cfg(specalloc_asm_fast)`, see
//! `build.rs`) the `GlobalAlloc` methods `alloc` and `dealloc` go first through [`asm`]: the
//! same fast paths written as naked functions, which are machine code whatever the
//! optimisation level, where the Rust paths compiled at opt-level 0 keep every value on the
//! stack and cost two to three times the instructions.

use core::alloc::Layout;

#[cfg(feature = "checked")]
use crate::checked;
use crate::heap;
use crate::large;
#[cfg(feature = "checked")]
use crate::size_class::route;
use crate::size_class::{
    class_of_key, class_of_key_medium, route_key, KEY_SMALL_MAX, MAX_SMALL_SIZE, PAGE_SIZE,
    TINY_MAX,
};
use crate::size_class::{route as route_of, Route};

/// The generic path: the tiny class, then a size class from the run-time table, then large.
#[inline(always)]
pub(crate) fn alloc_generic<const ZEROED: bool>(layout: Layout) -> *mut u8 {
    let (size, align) = (layout.size(), layout.align());
    let key = route_key(size, align);
    if key < TINY_MAX {
        return heap::alloc_tiny::<ZEROED>();
    }
    if key < KEY_SMALL_MAX {
        return heap::alloc_small::<ZEROED>(class_of_key(key), size);
    }
    if key < MAX_SMALL_SIZE && align <= 16 {
        return heap::alloc_small::<ZEROED>(class_of_key_medium(key), size);
    }
    alloc_other(size, align, ZEROED)
}

/// The generic path past the table: a size class at a large alignment, or a large object.
#[cold]
#[inline(never)]
pub(crate) fn alloc_other(size: usize, align: usize, zero: bool) -> *mut u8 {
    match route_of(size, align) {
        Route::Small(class) if zero => heap::alloc_small::<true>(class, size),
        Route::Small(class) => heap::alloc_small::<false>(class, size),
        _ => large::alloc_large(size, align, zero),
    }
}

/// `dealloc`'s body, inlined into the crate's `dealloc` and into `SpecAlloc::dealloc`.
///
/// # Safety
/// `ptr` was returned by this allocator for `layout` (or resized to it) and not freed since.
#[inline(always)]
pub(crate) unsafe fn dealloc_generic(ptr: *mut u8, layout: Layout) {
    let (size, align) = (layout.size(), layout.align());
    #[cfg(feature = "checked")]
    check_free(ptr, size, align, false);
    // Two tests, each with its own branch (joined, the compiler computes both and branches
    // once, two instructions more).
    if size > MAX_SMALL_SIZE {
        // SAFETY: a size past the classes means `ptr` is a large object of that layout.
        return unsafe { large::free_large(ptr, size, align) };
    }
    if align > PAGE_SIZE {
        // SAFETY: as above: over-aligned for every class.
        return unsafe { large::free_large(ptr, size, align) };
    }
    // SAFETY: any other layout is tiny or of a size class (`route`), so `ptr` is a block of a
    // span; the span says which.
    unsafe { heap::free_block(ptr) }
}

/// Checked mode: validates a free (or, with `keep`, a block about to be resized) and aborts on
/// misuse.
#[cfg(feature = "checked")]
pub(crate) fn check_free(ptr: *mut u8, size: usize, align: usize, keep: bool) {
    use checked::Kind;
    let kind = if let Route::Tiny = route(size, align) {
        Kind::Tiny
    } else if let Route::Small(class) = route(size, align) {
        Kind::Small(class)
    } else if large::is_medium(size, align) {
        Kind::Medium(large::medium_pages(size))
    } else {
        checked::check_huge(
            ptr,
            size,
            align,
            || large::huge_is_live(ptr),
            || large::huge_layout(ptr),
        );
        return;
    };
    if keep {
        checked::check_live(ptr, size, align, kind);
    } else {
        checked::on_free(ptr, size, align, kind);
    }
}

#[cfg(specalloc_asm_fast)]
pub(crate) mod asm;
