//! C++'s `operator new` on the C entry points' fast path: [`malloc_or`] is
//! [`malloc`](crate::cabi::malloc) with what to do instead of returning null, for a `new` whose
//! failure the C++ runtime reports (the new-handler, `std::bad_alloc`). Its hit is `malloc`'s,
//! with no frame: each miss is a call in tail position, and only the misses look at the null.

use crate::cabi::{alloc_big, malloc_with, small_miss};

/// What [`malloc_or`] does where [`malloc`](crate::cabi::malloc) would return null.
pub trait OnNull {
    /// Called, in tail position, with the size that could not be served; its result is
    /// [`malloc_or`]'s.
    fn on_null(size: usize) -> *mut u8;
}

/// [`malloc`](crate::cabi::malloc), but `N::on_null(size)` in place of a null.
///
/// ```
/// use specalloc_runtime::cabi_new::{malloc_or, OnNull};
///
/// struct Abort;
/// impl OnNull for Abort {
///     fn on_null(_size: usize) -> *mut u8 {
///         std::process::abort()
///     }
/// }
/// let p = malloc_or::<Abort>(100);
/// assert!(!p.is_null() && p as usize % 16 == 0);
/// // SAFETY: `p` came from `malloc_or` (the `malloc` family's blocks) and is freed once.
/// unsafe { specalloc_runtime::cabi::free(p) };
/// ```
#[inline(always)]
pub fn malloc_or<N: OnNull>(size: usize) -> *mut u8 {
    malloc_with(
        size,
        |class, size, zeroed| small_miss_or::<N>(size, class, zeroed),
        big_or::<N>,
    )
}

/// [`malloc_or`]'s small miss: `malloc`'s, then `N::on_null` for a null.
#[cold]
#[inline(never)]
fn small_miss_or<N: OnNull>(size: usize, class: usize, zeroed: bool) -> *mut u8 {
    let p = small_miss(size, class, zeroed);
    if p.is_null() {
        return N::on_null(size);
    }
    p
}

/// [`malloc_or`] above the small fast path's sizes (and of 0 bytes): `malloc`'s, then
/// `N::on_null` for a null.
#[inline(never)]
fn big_or<N: OnNull>(size: usize) -> *mut u8 {
    let p = alloc_big::<false>(size);
    if p.is_null() {
        return N::on_null(size);
    }
    p
}
