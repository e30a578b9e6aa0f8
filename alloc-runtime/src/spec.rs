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
//! declares the `#[global_allocator]` and sets the install mark (a byte the linker decides, see
//! `mark.rs`); a program can have only one global allocator, so a wrapper (counting,
//! header-adding, ...) can never be installed alongside the mark. Without the mark (a
//! hand-written `#[global_allocator]`, a wrapper, another allocator, a library's tests), every
//! entry point silently does what the std code it stands for does, through the global
//! allocator, whatever it is: each entry point reads the mark first (one load and one branch;
//! nothing under fat LTO in an installed program), so the std code is all a program without it
//! runs.
//!
//! With the mark, an entry point takes its block inline: the allocation fast path with the size
//! class and size as constants (what the generic path becomes at a constant layout, without its
//! size-class lookup), calling the routine of that class out of line only when the thread's
//! current span of the class is empty.
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

/// How an entry point takes a block inline when the mark is set (an implementation detail of
/// the entry points): the class and size the routine serves, and the routine, called on a
/// miss.
#[doc(hidden)]
#[derive(Clone, Copy)]
pub struct Plan {
    tiny: bool,
    class: usize,
    size: usize,
    routine: Routine,
}

impl Plan {
    /// A block from the plan's class, or null: without the mark (nothing is allocated then,
    /// and the caller does what std does) or when the OS refuses memory.
    #[inline(always)]
    fn take<const ZEROED: bool>(self) -> *mut u8 {
        if !installed() {
            return core::ptr::null_mut();
        }
        // SAFETY: the mark is set, and the plan's routine serves its class and size (`plan`).
        unsafe {
            crate::heap::take_inline::<ZEROED>(self.tiny, self.class, self.size, self.routine)
        }
    }
}

/// The inline plan for `size` bytes at `align`: `None` where no routine serves the layout (or
/// with the opt-out switch). The class and size are those the routine itself passes to the
/// fast path (`tools/gen_routines.rs`).
const fn plan(size: usize, align: usize, zeroed: bool) -> Option<Plan> {
    if !SIZE_SPECIALIZED {
        return None;
    }
    let routine = match routine(size, align, zeroed) {
        Some(r) => r,
        None => return None,
    };
    let (tiny, class, size) = if size <= crate::size_class::TINY_MAX {
        (true, 0, size)
    } else if size <= 8 {
        (false, 1, size)
    } else if size < 16 {
        (false, 2, size)
    } else {
        match route(size, align) {
            Route::Small(c) => (false, c, crate::size_class::class_size(c)),
            _ => return None,
        }
    };
    Some(Plan {
        tiny,
        class,
        size,
        routine,
    })
}

/// A block for `plan`, or null (no plan, no mark, or no memory).
#[inline(always)]
fn take<const ZEROED: bool>(plan: Option<Plan>) -> *mut u8 {
    match plan {
        Some(plan) => plan.take::<ZEROED>(),
        None => core::ptr::null_mut(),
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
    /// Inline plan for one `T` (plain).
    pub const PLAN: Option<Plan> = plan(size_of::<T>(), align_of::<T>(), false);
    /// Inline plan for one `T` (zeroed).
    pub const PLAN_ZEROED: Option<Plan> = plan(size_of::<T>(), align_of::<T>(), true);
    /// Whether a routine serves one `T` (the plain plan's fields follow, as plain constants,
    /// so that even an unoptimised build passes them as immediates).
    pub const SERVED: bool = Self::PLAN.is_some();
    /// The plain plan's `tiny`.
    pub const TINY: bool = match Self::PLAN {
        Some(p) => p.tiny,
        None => false,
    };
    /// The plain plan's class.
    pub const CLASS: usize = match Self::PLAN {
        Some(p) => p.class,
        None => 0,
    };
    /// The plain plan's size.
    pub const SIZE: usize = match Self::PLAN {
        Some(p) => p.size,
        None => 0,
    };
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
    /// Inline plan for `N` elements (plain).
    pub const PLAN: Option<Plan> = plan(Self::BYTES, align_of::<T>(), false);
    /// Inline plan for `N` elements (zeroed).
    pub const PLAN_ZEROED: Option<Plan> = plan(Self::BYTES, align_of::<T>(), true);
}

pub use crate::mark::{installed, MARK_AT_LINK_TIME};

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
    let p = take::<false>(One::<T>::PLAN);
    if p.is_null() {
        return Box::new_uninit();
    }
    // A routine hands out blocks only when `SpecAlloc` itself is the global allocator
    // (`install!`), which is what `Box` frees through; zero-sized `T` gets a dangling aligned
    // pointer, which `Box` never frees.
    // SAFETY: `p` is a block of at least `size_of::<T>()` bytes at `align_of::<T>()` from a
    // routine, freed by `Box` through the same allocator (above).
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
    let p = take::<true>(One::<T>::PLAN_ZEROED);
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
    if !One::<T>::SERVED {
        return Box::new(x);
    }
    if installed() {
        // A value passed in registers goes to the out-of-line miss with the call, so the hit
        // writes it and returns with no branch to join; a larger one is passed through memory,
        // and the miss only brings the block, as the generic path's slow path does (passing it
        // would make the hit copy it from the miss's argument slot).
        let by_value = size_of::<T>() <= 2 * size_of::<usize>();
        let slow = if by_value {
            crate::heap::miss
        } else {
            block_miss::<T>
        };
        // SAFETY: the mark is set, and the constants are those of one plan (`One::<T>::PLAN`).
        let p = unsafe {
            crate::heap::take_with::<false>(One::<T>::TINY, One::<T>::CLASS, One::<T>::SIZE, slow)
        };
        if p.is_null() {
            if by_value {
                return boxed_miss(x);
            }
            std::alloc::handle_alloc_error(Layout::new::<T>());
        }
        // SAFETY: `p` is a live block for one `T` from this thread's heap, handed out only
        // when `SpecAlloc` itself is the global allocator (see `uninit`); writing initialises
        // it.
        return unsafe { write_box(p, x) };
    }
    // What `Box::new` does (the type is not zero-sized: it has a plan).
    let p = std_alloc(Layout::new::<T>());
    // SAFETY: `p` is a live block of the global allocator with `T`'s layout, as `Box::new`
    // takes it.
    unsafe { write_box(p, x) }
}

/// The block of [`boxed`] on a miss of the inline fast path, for a `T` passed in memory: out of
/// line, the routine of `T`'s class, or the global allocator's block if it finds no memory
/// (null only if that refuses too).
#[cold]
#[inline(never)]
fn block_miss<T>(_class: usize, _size: usize, _zeroed: bool) -> *mut u8 {
    let p = One::<T>::PLAIN();
    if p.is_null() {
        // SAFETY: `T` is not zero-sized (it has a plan).
        unsafe { std::alloc::alloc(Layout::new::<T>()) }
    } else {
        p
    }
}

/// [`boxed`] on a miss of the inline fast path, for a `T` passed in registers, out of line: the routine of `T`'s class (which
/// refills the thread's span), or what `Box::new` does if it finds no memory. `x` comes along,
/// so the hit writes it where the fast path is and returns, with no branch to join.
#[cold]
#[inline(never)]
fn boxed_miss<T>(x: T) -> Box<T> {
    let mut p = One::<T>::PLAIN();
    if p.is_null() {
        p = std_alloc(Layout::new::<T>());
    }
    // SAFETY: `p` is a live block for one `T`, from the routine (installed, see `uninit`) or
    // from the global allocator with `T`'s layout.
    unsafe { write_box(p, x) }
}

/// Moves `x` into the block `p` and boxes it.
///
/// # Safety
/// `p` is a live block for one `T` (size and alignment) that `Box<T>`'s drop may free through
/// the global allocator with `T`'s layout.
#[inline(always)]
unsafe fn write_box<T>(p: *mut u8, x: T) -> Box<T> {
    // SAFETY: `p` is valid for writing one `T` and owned by the caller (our contract).
    unsafe {
        p.cast::<T>().write(x);
        Box::from_raw(p.cast())
    }
}

/// What `Box::new` does for a type that is not zero-sized: a block of the global allocator,
/// `handle_alloc_error` when it refuses.
#[inline(always)]
fn std_alloc(layout: Layout) -> *mut u8 {
    // SAFETY: the callers' layouts are not zero-sized.
    let p = unsafe { std::alloc::alloc(layout) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    p
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
    let p = take::<false>(Array::<T, N>::PLAN);
    if p.is_null() {
        return Vec::with_capacity(N);
    }
    // SAFETY: `p` is a block for `N` elements of `T` from a routine (so `SpecAlloc` itself is
    // the global allocator, see `uninit`), in the size class that `N * size_of::<T>()` maps
    // to, so `Vec` frees or grows it with a layout of the same class.
    unsafe { Vec::from_raw_parts(p.cast(), 0, N) }
}

/// An empty `Vec` with room for exactly `N` elements, allocated as std's `vec![a, b, ...]`
/// allocates its array `[T; N]` (`Box::new`'s path, at the array's layout, which cannot
/// overflow: the type exists), through the routine of its size when one serves it.
///
/// ```
/// # specalloc_runtime::install!();
/// let v = specalloc_runtime::spec::vec_for_array::<u16, 3>();
/// assert_eq!((v.len(), v.capacity()), (0, 3));
/// ```
#[inline(always)]
#[must_use]
pub fn vec_for_array<T, const N: usize>() -> Vec<T> {
    if size_of::<[T; N]>() == 0 {
        return Vec::with_capacity(N);
    }
    let mut p = take::<false>(Array::<T, N>::PLAN);
    if p.is_null() {
        p = std_alloc(Layout::new::<[T; N]>());
    }
    // SAFETY: `p` is a block for `N` elements of `T`, from a routine (see `vec_with_capacity`)
    // or from the global allocator with the layout of `[T; N]`, which is the layout a `Vec` of
    // capacity `N` frees with.
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
        take::<true>(Array::<T, N>::PLAN_ZEROED)
    };
    if p.is_null() {
        // SAFETY: forwarded (all-zero bytes are a valid `T`).
        return unsafe { std_zeroed::<T>(N) };
    }
    // SAFETY: as in `vec_with_capacity`; the `N` elements read zero, a valid `T` by the
    // caller's guarantee.
    unsafe { Vec::from_raw_parts(p.cast(), N, N) }
}

/// What std's `vec![0; n]` does: a zeroed allocation of the global allocator
/// (`alloc_zeroed`, whose fresh pages are zero without being touched), capacity exactly `n`;
/// "capacity overflow" and `handle_alloc_error` as std.
///
/// # Safety
/// All-zero bytes must be a valid `T`.
#[inline]
unsafe fn std_zeroed<T>(n: usize) -> Vec<T> {
    if size_of::<T>() == 0 || n == 0 {
        let mut v = Vec::with_capacity(n);
        // SAFETY: room for `n` elements (zero-sized ones, or none); all-zero bytes are a valid
        // `T` by the caller, so writing them initialises the elements.
        unsafe {
            core::ptr::write_bytes(v.as_mut_ptr(), 0, n);
            v.set_len(n);
        }
        return v;
    }
    let layout = match Layout::array::<T>(n) {
        Ok(l) if l.size() <= isize::MAX as usize => l,
        // Panics with std's "capacity overflow".
        _ => return Vec::with_capacity(n),
    };
    // SAFETY: a non-zero-sized layout.
    let p = unsafe { std::alloc::alloc_zeroed(layout) };
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    // SAFETY: a block of the global allocator for `n` elements of `T` (the layout `Vec` frees
    // with), all bytes zero, a valid `T` by the caller.
    unsafe { Vec::from_raw_parts(p.cast(), n, n) }
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
