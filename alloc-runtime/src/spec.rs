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
//! - Vectors and strings get exactly the capacity asked for, as `Vec::with_capacity` gives.
//!
//! What these return is freed by the global allocator (`Box`/`Vec` drop), so the routines may
//! hand out a block only when the global allocator is specalloc's own [`SpecAlloc`](crate::SpecAlloc),
//! with no wrapper in between. The program states that with [`install!`](crate::install), which
//! declares the `#[global_allocator]` and marks it before `main`; a program can have only one
//! global allocator, so a wrapper (counting, header-adding, ...) can never be installed alongside
//! the mark. Without the mark (a hand-written `#[global_allocator]`, a wrapper, another
//! allocator, a library's tests), every entry point silently does what the std code it stands
//! for does, through the global allocator, whatever it is: the routines return null on their
//! first call on each thread, which sends the entry point to its std fallback.
//!
//! With the cargo feature `no-size-specialized` (Go's `GOEXPERIMENT=nosizespecializedmalloc`),
//! every entry point calls the global allocator instead, with the same results: build a program
//! both ways to measure what specialisation buys it.
//!
//! ```
//! specalloc_runtime::install!();
//!
//! use specalloc_runtime::spec;
//! let b = spec::boxed([1u64, 2, 3]); // calls routines::small_sc3 (24 bytes)
//! assert_eq!(b.iter().sum::<u64>(), 6);
//! let v: Vec<u32> = spec::vec_with_capacity::<u32, 5>();
//! assert_eq!(v.capacity(), 5);
//! let s = spec::string_from::<5>("hello");
//! assert_eq!(s, "hello");
//! ```

use core::alloc::Layout;
use core::marker::PhantomData;
use core::mem::{align_of, size_of, MaybeUninit};

use crate::routines::{Routine, SMALL, SMALL_ZEROED, TINY, TINY_ALIGN, TINY_ZEROED};
use crate::size_class::{route, Route};

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

/// For arrays without a routine: null, which sends the entry point to the std code it stands
/// for (`Vec::with_capacity(N)`, which panics on capacity overflow like std's).
fn fallback_array() -> *mut u8 {
    core::ptr::null_mut()
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
    /// Bytes of `N` elements; `usize::MAX` when that overflows (no routine serves it, and the
    /// entry point falls back to std, which panics at run time as it would).
    const BYTES: usize = match size_of::<T>().checked_mul(N) {
        Some(b) if b <= isize::MAX as usize => b,
        _ => usize::MAX,
    };
    /// Plain routine for `N` elements.
    pub const PLAIN: Routine = pick(Self::BYTES, align_of::<T>(), false, fallback_array);
    /// Zeroing routine for `N` elements.
    pub const ZEROED: Routine = pick(Self::BYTES, align_of::<T>(), true, fallback_array);
}

pub use crate::mark::{__declare_global_allocator, installed};

/// Declares [`SpecAlloc`](crate::SpecAlloc) as the program's global allocator and lets the
/// size-specialised routines serve the entry points of this module (and the code
/// `#[specialize]` generates). Put it once in the binary, or in each test binary:
/// `install!();` or `install!(static NAME);` to name the static.
///
/// It expands to `#[global_allocator] static NAME: SpecAlloc = SpecAlloc;` and a constructor,
/// run before `main` and before any test (an `.init_array` entry on ELF targets,
/// `__mod_init_func` on Apple targets, `.CRT$XCU` on Windows), that marks the global
/// allocator as specalloc's. A program has only one `#[global_allocator]`, so a wrapper can
/// never be installed together with the mark. Without the mark (a hand-written
/// `#[global_allocator]`, a wrapper, another allocator, or a target without constructors)
/// the entry points use the global allocator like the std code they stand for.
///
/// ```
/// specalloc_runtime::install!(static GLOBAL);
///
/// assert!(specalloc_runtime::spec::installed());
/// let v = specalloc_runtime::spec::vec_with_capacity::<u64, 3>();
/// assert_eq!(v.capacity(), 3);
/// ```
#[macro_export]
macro_rules! install {
    () => {
        $crate::install!(static __SPECALLOC_GLOBAL);
    };
    (static $name:ident) => {
        #[global_allocator]
        static $name: $crate::SpecAlloc = $crate::SpecAlloc;

        const _: () = {
            extern "C" fn __specalloc_mark_global_allocator() {
                // SAFETY: the `#[global_allocator]` declared next to this constructor is
                // `SpecAlloc` itself, and a program has only one global allocator.
                unsafe { $crate::spec::__declare_global_allocator() }
            }
            #[used]
            #[cfg_attr(
                any(
                    target_os = "linux",
                    target_os = "android",
                    target_os = "freebsd",
                    target_os = "netbsd",
                    target_os = "openbsd",
                    target_os = "dragonfly",
                    target_os = "illumos",
                    target_os = "solaris"
                ),
                unsafe(link_section = ".init_array")
            )]
            #[cfg_attr(target_vendor = "apple", unsafe(link_section = "__DATA,__mod_init_func"))]
            #[cfg_attr(windows, unsafe(link_section = ".CRT$XCU"))]
            static __SPECALLOC_MARK: extern "C" fn() = __specalloc_mark_global_allocator;
        };
    };
}

/// Allocates room for one `T`, uninitialised, through the routine of `T`'s size class
/// (`Box::new_uninit()`, specialised).
///
/// ```
/// # specalloc_runtime::install!();
/// let mut b = specalloc_runtime::spec::uninit::<u64>();
/// b.write(7);
/// // SAFETY: initialised (written or zeroed) above.
/// assert_eq!(unsafe { b.assume_init() }, Box::new(7));
/// ```
#[inline(always)]
#[must_use]
pub fn uninit<T>() -> Box<MaybeUninit<T>> {
    let p = (One::<T>::PLAIN)();
    if p.is_null() {
        return Box::new_uninit();
    }
    // SAFETY: `p` is a block of at least `size_of::<T>()` bytes at `align_of::<T>()` from a
    // routine, which hands out blocks only when `SpecAlloc` itself is the global allocator
    // (`install!`), which is what `Box` frees through; zero-sized `T` gets a dangling aligned
    // pointer, which `Box` never frees.
    unsafe { Box::from_raw(p.cast()) }
}

/// Allocates one `T` whose bytes are all zero, through the zeroing routine of its class
/// (`Box::new_zeroed()`, specialised).
///
/// ```
/// # specalloc_runtime::install!();
/// let b = specalloc_runtime::spec::zeroed::<[u32; 16]>();
/// // SAFETY: initialised (written or zeroed) above.
/// assert_eq!(unsafe { b.assume_init() }, Box::new([0u32; 16]));
/// ```
#[inline(always)]
#[must_use]
pub fn zeroed<T>() -> Box<MaybeUninit<T>> {
    let p = (One::<T>::ZEROED)();
    if p.is_null() {
        return Box::new_zeroed();
    }
    // SAFETY: as in `uninit`; the block reads zero.
    unsafe { Box::from_raw(p.cast()) }
}

/// Boxes `x` through the routine of `T`'s size class: `Box::new`, specialised.
///
/// ```
/// # specalloc_runtime::install!();
/// let b: Box<dyn std::fmt::Debug> = specalloc_runtime::spec::boxed((1u8, 2u16));
/// assert_eq!(format!("{b:?}"), "(1, 2)");
/// ```
#[inline(always)]
#[must_use]
pub fn boxed<T>(x: T) -> Box<T> {
    let p = (One::<T>::PLAIN)();
    if p.is_null() {
        return Box::new(x);
    }
    // SAFETY: `p` is a live block for one `T` (see `uninit`); writing initialises it.
    unsafe {
        p.cast::<T>().write(x);
        Box::from_raw(p.cast())
    }
}

/// An empty `Vec` with room for exactly `N` elements (`Vec::with_capacity(N)`, specialised),
/// through the routine of `N * size_of::<T>()` bytes.
///
/// ```
/// # specalloc_runtime::install!();
/// let mut v = specalloc_runtime::spec::vec_with_capacity::<u64, 3>();
/// assert_eq!(v.capacity(), 3);
/// v.extend([1, 2, 3, 4]); // grows by realloc like any Vec
/// assert_eq!(v, [1, 2, 3, 4]);
/// ```
#[inline(always)]
#[must_use]
pub fn vec_with_capacity<T, const N: usize>() -> Vec<T> {
    if size_of::<T>() == 0 || N == 0 {
        return Vec::with_capacity(N);
    }
    let p = (Array::<T, N>::PLAIN)();
    if p.is_null() {
        return Vec::with_capacity(N);
    }
    // SAFETY: `p` is a block for `N` elements of `T` from a routine (so `SpecAlloc` itself is
    // the global allocator, see `uninit`), in the size class that `N * size_of::<T>()` maps
    // to, so `Vec` frees or grows it with a layout of the same class.
    unsafe { Vec::from_raw_parts(p.cast(), 0, N) }
}

/// `vec![x; N]` with a constant `N`, as std builds it: `x` is cloned `N - 1` times and moved
/// into the last slot (dropped when `N` is 0), filling the block in one pass (`resize`, which
/// the compiler turns into a `memset` for bytes).
///
/// ```
/// # specalloc_runtime::install!();
/// let v = specalloc_runtime::spec::vec_from_elem::<_, 3>(String::from("a"));
/// assert_eq!(v, ["a", "a", "a"]);
/// ```
#[inline(always)]
#[must_use]
pub fn vec_from_elem<T: Clone, const N: usize>(x: T) -> Vec<T> {
    if N == 0 {
        drop(x);
        return Vec::new();
    }
    let mut v = vec_with_capacity::<T, N>();
    v.resize(N, x);
    v
}

/// `vec![0; N]`-style zeroed vector of a type for which all-zero bytes are a valid value
/// (integers, floats): taken from the zeroing routine, so nothing is written element by element.
///
/// # Safety
/// All-zero bytes must be a valid `T`.
///
/// ```
/// # specalloc_runtime::install!();
/// // SAFETY: all-zero bytes are a valid `u32`.
/// let v = unsafe { specalloc_runtime::spec::vec_zeroed::<u32, 10>() };
/// assert_eq!(v, [0u32; 10]);
/// ```
#[inline(always)]
#[must_use]
pub unsafe fn vec_zeroed<T, const N: usize>() -> Vec<T> {
    let p = if size_of::<T>() == 0 || N == 0 {
        core::ptr::null_mut()
    } else {
        (Array::<T, N>::ZEROED)()
    };
    if p.is_null() {
        let mut v = Vec::with_capacity(N);
        // SAFETY: room for `N` elements; all-zero bytes are a valid `T` by the caller.
        unsafe {
            core::ptr::write_bytes(v.as_mut_ptr(), 0, N);
            v.set_len(N);
        }
        return v;
    }
    // SAFETY: as in `vec_with_capacity`; the `N` elements read zero, a valid `T` by the
    // caller's guarantee.
    unsafe { Vec::from_raw_parts(p.cast(), N, N) }
}

/// `vec![a, b, c]`: the array's elements moved into a vector allocated through the routine of
/// the array's size.
///
/// ```
/// # specalloc_runtime::install!();
/// let v = specalloc_runtime::spec::vec_from_array([1u16, 2, 3]);
/// assert_eq!(v, [1, 2, 3]);
/// ```
#[inline(always)]
#[must_use]
pub fn vec_from_array<T, const N: usize>(a: [T; N]) -> Vec<T> {
    let mut v = vec_with_capacity::<T, N>();
    let a = MaybeUninit::new(a);
    // SAFETY: `v` has room for `N` elements; the array is moved bit for bit and its original
    // is never dropped (it is in a `MaybeUninit`).
    unsafe {
        core::ptr::copy_nonoverlapping(a.as_ptr().cast::<T>(), v.as_mut_ptr(), N);
        v.set_len(N);
    }
    v
}

/// An empty `String` with room for exactly `N` bytes (`String::with_capacity(N)`).
///
/// ```
/// # specalloc_runtime::install!();
/// let mut s = specalloc_runtime::spec::string_with_capacity::<32>();
/// s.push_str("hi");
/// assert_eq!(s.capacity(), 32);
/// ```
#[inline(always)]
#[must_use]
pub fn string_with_capacity<const N: usize>() -> String {
    // SAFETY: an empty vector is valid UTF-8.
    unsafe { String::from_utf8_unchecked(vec_with_capacity::<u8, N>()) }
}

/// An owned copy of a string whose length `N` is known at compile time (a literal):
/// `"…".to_string()`, specialised, with capacity `N` as std gives. Panics if `s.len() != N`.
///
/// ```
/// # specalloc_runtime::install!();
/// let s = specalloc_runtime::spec::string_from::<3>("abc");
/// assert_eq!((s.as_str(), s.capacity()), ("abc", 3));
/// ```
#[inline(always)]
#[must_use]
pub fn string_from<const N: usize>(s: &str) -> String {
    assert_eq!(s.len(), N, "string_from: length mismatch");
    let mut out = string_with_capacity::<N>();
    out.push_str(s);
    out
}
