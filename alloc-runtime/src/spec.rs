//! Compile-time-dispatched entry points: each picks its size-specialised routine from
//! `size_of`/`align_of` in a constant, so every call site compiles to a direct call of one
//! routine ([`crate::routines`]), with no run-time size-class lookup and no dispatch on
//! tiny/small/large, in debug and release builds, for concrete and generic `T` alike.
//!
//! - Zero-sized types allocate nothing.
//! - Sizes of 1 to 15 bytes go to the `tiny_size` routines (1 to 4 bytes take the tiny class's
//!   4-byte blocks, 5 to 15 the 8- and 16-byte classes), 16 B to 32 KiB to the size-class
//!   routines.
//! - Larger or over-aligned types go to the global allocator's generic path, which honours any
//!   alignment.
//! - Vectors get the whole capacity of their size class (a `Vec<u32>` asked for 5 elements gets
//!   12: the 48-byte class), which costs nothing and saves a reallocation.
//!
//! What these return is freed by the global allocator (`Box`/`Vec` drop), so specalloc must be
//! the global allocator; the first call on each thread checks that and panics otherwise.
//!
//! With the cargo feature `no-size-specialized` (Go's `GOEXPERIMENT=nosizespecializedmalloc`),
//! every entry point calls the global allocator instead, with the same results: build a program
//! both ways to measure what specialisation buys it.
//!
//! ```
//! #[global_allocator]
//! static G: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
//!
//! use specalloc_runtime::spec;
//! let b = spec::boxed([1u64, 2, 3]); // calls routines::small_sc3 (24 bytes)
//! assert_eq!(b.iter().sum::<u64>(), 6);
//! let v: Vec<u32> = spec::vec_with_capacity::<u32, 5>();
//! assert!(v.capacity() >= 5);
//! let s = spec::string_from::<5>("hello");
//! assert_eq!(s, "hello");
//! ```

use core::alloc::Layout;
use core::marker::PhantomData;
use core::mem::{align_of, size_of, MaybeUninit};

use crate::routines::{Routine, SMALL, SMALL_ZEROED, TINY, TINY_ALIGN, TINY_ZEROED};
use crate::size_class::{class_of, class_size, route, Route};

/// Whether the opt-out switch (`no-size-specialized`) is on in this build.
pub const SIZE_SPECIALIZED: bool = !cfg!(feature = "no-size-specialized");

/// The routine serving `size` bytes at alignment `align`, if there is one (`None` for zero
/// sizes, large sizes, and alignments no routine guarantees). Usable in constants.
///
/// ```
/// use specalloc_runtime::spec::routine;
/// const R: Option<specalloc_runtime::routines::Routine> = routine(24, 8, false);
/// assert!(R.is_some());
/// assert!(routine(0, 1, false).is_none());
/// assert!(routine(1 << 20, 8, false).is_none());
/// ```
pub const fn routine(size: usize, align: usize, zeroed: bool) -> Option<Routine> {
    let class = match route(size, align) {
        Route::Large => return None,
        _ if size == 0 => return None,
        // Under 16 bytes the routine of the exact size serves the layout when its block is
        // aligned enough: it takes the block from the same class the generic path would.
        _ if size < 16 => {
            if align > TINY_ALIGN[size] {
                return None;
            }
            return if zeroed {
                TINY_ZEROED[size]
            } else {
                TINY[size]
            };
        }
        Route::Tiny => return None,
        Route::Small(c) => c,
    };
    if zeroed {
        SMALL_ZEROED[class]
    } else {
        SMALL[class]
    }
}

/// Fallback for sizes without a routine: zero-sized values get a dangling pointer, others the
/// global allocator.
fn fallback<const ZEROED: bool>(layout: Layout) -> *mut u8 {
    if layout.size() == 0 {
        return layout.align() as *mut u8;
    }
    // SAFETY: the layout has a non-zero size.
    unsafe {
        if ZEROED {
            std::alloc::alloc_zeroed(layout)
        } else {
            std::alloc::alloc(layout)
        }
    }
}

fn fallback_one<T, const ZEROED: bool>() -> *mut u8 {
    fallback::<ZEROED>(Layout::new::<T>())
}

fn fallback_array<T, const N: usize, const ZEROED: bool>() -> *mut u8 {
    fallback::<ZEROED>(Layout::new::<[T; N]>())
}

const fn pick(size: usize, align: usize, zeroed: bool, fallback: Routine) -> Routine {
    if !SIZE_SPECIALIZED {
        return fallback;
    }
    match routine(size, align, zeroed) {
        Some(r) => r,
        None => fallback,
    }
}

/// The routines chosen for one `T`, as constants (an implementation detail of the entry
/// points, public for the macros).
#[doc(hidden)]
pub struct One<T>(PhantomData<T>);

impl<T> One<T> {
    /// Plain routine for one `T`.
    pub const PLAIN: Routine = pick(
        size_of::<T>(),
        align_of::<T>(),
        false,
        fallback_one::<T, false>,
    );
    /// Zeroing routine for one `T`.
    pub const ZEROED: Routine = pick(
        size_of::<T>(),
        align_of::<T>(),
        true,
        fallback_one::<T, true>,
    );
}

/// The routines chosen for `[T; N]`, and the capacity a `Vec` gets from them.
#[doc(hidden)]
pub struct Array<T, const N: usize>(PhantomData<T>);

impl<T, const N: usize> Array<T, N> {
    const BYTES: usize = size_of::<[T; N]>();
    /// Plain routine for `N` elements.
    pub const PLAIN: Routine = pick(
        Self::BYTES,
        align_of::<T>(),
        false,
        fallback_array::<T, N, false>,
    );
    /// Zeroing routine for `N` elements.
    pub const ZEROED: Routine = pick(
        Self::BYTES,
        align_of::<T>(),
        true,
        fallback_array::<T, N, true>,
    );
    /// Elements that fit in the block: the whole size class for size-class routines, else `N`.
    pub const CAPACITY: usize = if size_of::<T>() == 0 {
        usize::MAX
    } else if SIZE_SPECIALIZED
        && Self::BYTES >= 16
        && routine(Self::BYTES, align_of::<T>(), false).is_some()
    {
        class_size(class_of(Self::BYTES, align_of::<T>())) / size_of::<T>()
    } else {
        N
    };
}

#[cold]
fn oom(layout: Layout) -> ! {
    std::alloc::handle_alloc_error(layout)
}

/// Allocates room for one `T`, uninitialised, through the routine of `T`'s size class.
///
/// ```
/// # #[global_allocator] static G: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
/// let mut b = specalloc_runtime::spec::uninit::<u64>();
/// b.write(7);
/// assert_eq!(unsafe { b.assume_init() }, Box::new(7));
/// ```
#[inline(always)]
pub fn uninit<T>() -> Box<MaybeUninit<T>> {
    let p = (One::<T>::PLAIN)();
    if p.is_null() {
        oom(Layout::new::<T>());
    }
    // SAFETY: `p` is a block of at least `size_of::<T>()` bytes at `align_of::<T>()`, from the
    // global allocator's runtime (checked on first use), which is what `Box` frees through;
    // zero-sized `T` gets a dangling aligned pointer, which `Box` never frees.
    unsafe { Box::from_raw(p.cast()) }
}

/// Allocates one `T` whose bytes are all zero, through the zeroing routine of its class.
///
/// ```
/// # #[global_allocator] static G: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
/// let b = specalloc_runtime::spec::zeroed::<[u32; 16]>();
/// assert_eq!(unsafe { b.assume_init() }, Box::new([0u32; 16]));
/// ```
#[inline(always)]
pub fn zeroed<T>() -> Box<MaybeUninit<T>> {
    let p = (One::<T>::ZEROED)();
    if p.is_null() {
        oom(Layout::new::<T>());
    }
    // SAFETY: as in `uninit`; the block reads zero.
    unsafe { Box::from_raw(p.cast()) }
}

/// Boxes `x` through the routine of `T`'s size class: `Box::new`, specialised.
///
/// ```
/// # #[global_allocator] static G: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
/// let b: Box<dyn std::fmt::Debug> = specalloc_runtime::spec::boxed((1u8, 2u16));
/// assert_eq!(format!("{b:?}"), "(1, 2)");
/// ```
#[inline(always)]
pub fn boxed<T>(x: T) -> Box<T> {
    let p = (One::<T>::PLAIN)();
    if p.is_null() {
        oom(Layout::new::<T>());
    }
    // SAFETY: `p` is a live block for one `T` (see `uninit`); writing initialises it.
    unsafe {
        p.cast::<T>().write(x);
        Box::from_raw(p.cast())
    }
}

/// An empty `Vec` with room for at least `N` elements (the whole size class), through the
/// routine of `N * size_of::<T>()` bytes.
///
/// ```
/// # #[global_allocator] static G: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
/// let mut v = specalloc_runtime::spec::vec_with_capacity::<u64, 3>();
/// assert!(v.capacity() >= 3);
/// v.extend([1, 2, 3, 4]); // grows by realloc like any Vec
/// assert_eq!(v, [1, 2, 3, 4]);
/// ```
#[inline(always)]
pub fn vec_with_capacity<T, const N: usize>() -> Vec<T> {
    if size_of::<T>() == 0 || N == 0 {
        return Vec::new();
    }
    let p = (Array::<T, N>::PLAIN)();
    if p.is_null() {
        oom(Layout::new::<[T; N]>());
    }
    // SAFETY: `p` holds `CAPACITY` elements of `T`, allocated (by the global allocator's runtime)
    // in the size class that `CAPACITY * size_of::<T>()` maps to, so `Vec` frees or grows it
    // with a layout of the same class.
    unsafe { Vec::from_raw_parts(p.cast(), 0, Array::<T, N>::CAPACITY) }
}

/// `vec![x; N]` with a constant `N`: `x` is cloned `N - 1` times and moved into the last slot
/// (dropped when `N` is 0), as the macro does.
///
/// ```
/// # #[global_allocator] static G: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
/// let v = specalloc_runtime::spec::vec_from_elem::<_, 3>(String::from("a"));
/// assert_eq!(v, ["a", "a", "a"]);
/// ```
#[inline(always)]
pub fn vec_from_elem<T: Clone, const N: usize>(x: T) -> Vec<T> {
    if N == 0 {
        drop(x);
        return Vec::new();
    }
    let mut v = vec_with_capacity::<T, N>();
    for _ in 1..N {
        v.push(x.clone());
    }
    v.push(x);
    v
}

/// `vec![0; N]`-style zeroed vector of a type for which all-zero bytes are a valid value
/// (integers, floats): taken from the zeroing routine, so nothing is written element by element.
///
/// # Safety
/// All-zero bytes must be a valid `T`.
///
/// ```
/// # #[global_allocator] static G: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
/// let v = unsafe { specalloc_runtime::spec::vec_zeroed::<u32, 10>() };
/// assert_eq!(v, [0u32; 10]);
/// ```
#[inline(always)]
pub unsafe fn vec_zeroed<T, const N: usize>() -> Vec<T> {
    if size_of::<T>() == 0 || N == 0 {
        let mut v = Vec::new();
        // SAFETY: zero-sized (or no) elements; all-zero is a valid `T` by the caller.
        unsafe {
            for _ in 0..N {
                v.push(core::mem::zeroed());
            }
        }
        return v;
    }
    let p = (Array::<T, N>::ZEROED)();
    if p.is_null() {
        oom(Layout::new::<[T; N]>());
    }
    // SAFETY: as in `vec_with_capacity`; the first `N` elements read zero, a valid `T` by the
    // caller's guarantee.
    unsafe { Vec::from_raw_parts(p.cast(), N, Array::<T, N>::CAPACITY) }
}

/// `vec![a, b, c]`: the array's elements moved into a vector allocated through the routine of
/// the array's size.
///
/// ```
/// # #[global_allocator] static G: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
/// let v = specalloc_runtime::spec::vec_from_array([1u16, 2, 3]);
/// assert_eq!(v, [1, 2, 3]);
/// ```
#[inline(always)]
pub fn vec_from_array<T, const N: usize>(a: [T; N]) -> Vec<T> {
    let mut v = vec_with_capacity::<T, N>();
    let a = MaybeUninit::new(a);
    // SAFETY: `v` has room for at least `N` elements; the array is moved bit for bit and its
    // original is never dropped (it is in a `MaybeUninit`).
    unsafe {
        core::ptr::copy_nonoverlapping(a.as_ptr().cast::<T>(), v.as_mut_ptr(), N);
        v.set_len(N);
    }
    v
}

/// An empty `String` with room for at least `N` bytes.
///
/// ```
/// # #[global_allocator] static G: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
/// let mut s = specalloc_runtime::spec::string_with_capacity::<32>();
/// s.push_str("hi");
/// assert!(s.capacity() >= 32);
/// ```
#[inline(always)]
pub fn string_with_capacity<const N: usize>() -> String {
    // SAFETY: an empty vector is valid UTF-8.
    unsafe { String::from_utf8_unchecked(vec_with_capacity::<u8, N>()) }
}

/// An owned copy of a string whose length `N` is known at compile time (a literal):
/// `"…".to_string()`, specialised. Panics if `s.len() != N`.
///
/// ```
/// # #[global_allocator] static G: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
/// assert_eq!(specalloc_runtime::spec::string_from::<3>("abc"), "abc");
/// ```
#[inline(always)]
pub fn string_from<const N: usize>(s: &str) -> String {
    assert_eq!(s.len(), N, "string_from: length mismatch");
    let mut out = string_with_capacity::<N>();
    out.push_str(s);
    out
}
