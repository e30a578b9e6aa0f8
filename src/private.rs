//! What the macros' expansions name. Not public API: it may change in any release.
//!
//! Each entry point takes, next to its arguments, the std function (or an empty `vec![]`) the
//! rewritten site called: the expansion keeps naming the user's paths (`Box::new`,
//! `String::from`, `ToString::to_string`, `vec!`, ...), so their imports stay used and type
//! inference sees the same functions. The work is done by [`spec`], which falls back to the
//! std code when the routines do not serve (sizes without a routine, opt-out, or a program
//! that did not `install!` specalloc).
//!
//! The entry points that take the block inline are `#[inline(always)]` in optimised builds
//! only: in a build with debug assertions (a debug build) they are `#[inline]`, a call of
//! their own, so that the user's frame does not gain their locals (LLVM inlines
//! `#[inline(always)]` even unoptimised, and keeps every inlined local in the caller's frame:
//! a recursive function would need several times the stack it needs without the attribute).

pub use core::clone::Clone;
use core::mem::ManuallyDrop;
pub use core::mem::MaybeUninit;
pub use core::option::Option;
use core::pin::Pin;

pub use crate::report::counted as report;
pub use crate::report::Site;
pub use specalloc_macros::alloc;
pub use specalloc_runtime::spec;
pub use std::boxed::Box;
pub use std::string::String;
pub use std::vec::Vec;

/// Primitive numbers, whose value zero is all-zero bytes.
///
/// # Safety
/// All-zero bytes must be a valid value of the type.
pub unsafe trait Zero: Copy {}
macro_rules! zero {
    ($($t:ty)*) => { $(
        // SAFETY: all-zero bytes are the number zero.
        unsafe impl Zero for $t {}
    )* };
}
zero!(u8 u16 u32 u64 u128 usize i8 i16 i32 i64 i128 isize f32 f64);

/// `Box::new(x)` (`_std` is the user's `Box::new`).
#[inline(always)]
#[must_use]
pub fn boxed<T, F: FnOnce(T) -> Box<T>>(_std: F, x: T) -> Box<T> {
    spec::boxed(x)
}

/// Whether a routine serves one `T` (else `Box::new` is as good, and builds the box in place).
struct Served<T>(core::marker::PhantomData<T>);

impl<T> Served<T> {
    const BOX: bool = spec::SIZE_SPECIALIZED
        && spec::routine(core::mem::size_of::<T>(), core::mem::align_of::<T>(), false).is_some();
}

/// `Box::new` as rewritten by `#[specialize]`: `boxer(Box::new)(x)`. The function to call
/// is chosen from `T` at compile time: [`spec::boxed`] when a routine serves `T`, std's
/// `Box::new` itself otherwise, so a large value (a 1 MiB array) is built in place exactly as
/// without the attribute: in a debug build, passing it through an extra function would copy it
/// on the stack. Optimised builds fold the pointer into a direct, inlined call.
#[inline(always)]
#[must_use]
pub fn boxer<T, F: FnOnce(T) -> Box<T>>(_std: F) -> fn(T) -> Box<T> {
    if Served::<T>::BOX {
        spec::boxed::<T>
    } else {
        Box::<T>::new
    }
}

/// `Box::<[T]>::from([a, b, c])` as rewritten by `#[specialize]`:
/// `box_slicer(Box::<[T]>::from)([a, b, c])`, std's `From<[T; N]> for Box<[T]>` (which is
/// `Box::new(array)`, unsized). The function to call is chosen from `[T; N]` at compile time,
/// as [`boxer`] chooses: [`spec::boxed`] when a routine serves the array, std's own
/// `<Box<[T]> as From<[T; N]>>::from` otherwise (a large array is moved as without the
/// attribute).
#[inline(always)]
#[must_use]
pub fn box_slicer<T, const N: usize, F: FnOnce([T; N]) -> Box<[T]>>(
    _std: F,
) -> fn([T; N]) -> Box<[T]> {
    if Served::<[T; N]>::BOX {
        box_slice_spec::<T, N>
    } else {
        <Box<[T]> as From<[T; N]>>::from
    }
}

/// `Box::new(a)` through the routine of `[T; N]`'s class, unsized to `Box<[T]>`.
#[inline(always)]
fn box_slice_spec<T, const N: usize>(a: [T; N]) -> Box<[T]> {
    spec::boxed(a)
}

/// `Box::<str>::from("…")` (`_std` is the user's `Box::<str>::from`), std's
/// `From<&str> for Box<str>`: one block of exactly `N` bytes (none for `""`), the literal's
/// length, with the bytes copied in. Not `#[must_use]`, as `From::from` is not (nor is
/// `Default::default`, below).
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
pub fn box_str<const N: usize, F: FnOnce(&'static str) -> Box<str>>(
    _std: F,
    s: &'static str,
) -> Box<str> {
    // Capacity `N` is the length: `into_boxed_str` keeps the block as it is.
    spec::string_from::<N>(s).into_boxed_str()
}

/// `Box::<T>::default()` as rewritten by `#[specialize]`:
/// `box_default::<T, _>(Box::<T>::default).make()`. Which `make` runs is decided where the
/// site is, by method resolution: [`BoxDefault::make`] when `T: Default` (then std's
/// `Box::<T>::default` is its `impl<T: Default> Default for Box<T>`, the only impl a sized
/// `T: Default` can have), and otherwise, through `Deref`, [`StdDefault::make`], which calls
/// std's function: `Box::<str>::default()`, `Box::<[u8]>::default()`, a `Box<dyn Trait>` of
/// the user's own `Default` impl, or a type parameter without a `Default` bound.
///
/// The probe is zero-sized (the site it counts under `report` is a type, [`SiteOf`]): it is a
/// temporary that lives to the end of the statement, so an `async` block that awaits later in
/// that statement holds nothing more than without the attribute.
pub struct BoxDefault<T: ?Sized, F, S = NoSite> {
    std: StdDefault<T, F>,
    site: core::marker::PhantomData<S>,
}

/// The fallback of [`BoxDefault`]: std's `Box::<T>::default`, called as it is.
pub struct StdDefault<T: ?Sized, F>(F, core::marker::PhantomData<fn() -> Box<T>>);

/// The site a [`BoxDefault`] counts, as a type (a unit struct the `report` expansion declares
/// next to its static), so that the probe stays zero-sized.
pub trait SiteOf {
    /// The site counted, if any.
    fn site() -> Option<&'static Site>;
}

/// No site: `#[specialize]` without `report`.
pub struct NoSite;

impl SiteOf for NoSite {
    #[inline(always)]
    fn site() -> Option<&'static Site> {
        None
    }
}

/// The probe of `Box::<T>::default()` (`std` is the user's `Box::<T>::default`).
#[inline(always)]
#[must_use]
pub fn box_default<T: ?Sized, F: Fn() -> Box<T>>(std: F) -> BoxDefault<T, F> {
    box_default_at(std)
}

/// [`box_default`], counted at `S`'s site (`#[specialize(report)]`) when `make` allocates.
#[inline(always)]
#[must_use]
pub(crate) fn box_default_at<T: ?Sized, F: Fn() -> Box<T>, S: SiteOf>(
    std: F,
) -> BoxDefault<T, F, S> {
    BoxDefault {
        std: StdDefault(std, core::marker::PhantomData),
        site: core::marker::PhantomData,
    }
}

impl<T: Default, F: Fn() -> Box<T>, S: SiteOf> BoxDefault<T, F, S> {
    /// What std's `impl<T: Default> Default for Box<T>` does, in its order: the block first
    /// (`Box::new_uninit`, here through the routine of `T`'s class), then `T::default()` written
    /// into it; if `T::default()` panics, the block is freed.
    #[cfg_attr(debug_assertions, inline)]
    #[cfg_attr(not(debug_assertions), inline(always))]
    pub fn make(&self) -> Box<T> {
        if let Some(site) = S::site() {
            site.hit(core::mem::size_of::<T>(), core::mem::align_of::<T>());
        }
        let mut b = spec::uninit::<T>();
        // SAFETY: `b` is valid for writing one `T` (`MaybeUninit<T>` has `T`'s layout);
        // written, it is initialised. Should `T::default()` panic, `b` is dropped as a
        // `Box<MaybeUninit<T>>`, which frees the block and drops nothing.
        unsafe {
            b.as_mut_ptr().write(T::default());
            b.assume_init()
        }
    }
}

impl<T: ?Sized, F, S> core::ops::Deref for BoxDefault<T, F, S> {
    type Target = StdDefault<T, F>;

    #[inline(always)]
    fn deref(&self) -> &StdDefault<T, F> {
        &self.std
    }
}

impl<T: ?Sized, F: Fn() -> Box<T>> StdDefault<T, F> {
    /// std's `Box::<T>::default()` itself (not counted by `report`: no routine serves it).
    #[inline(always)]
    pub fn make(&self) -> Box<T> {
        (self.0)()
    }
}

/// `Box::pin` as rewritten by `#[specialize]`: `pinner(Box::pin)(x)`. The function to call is
/// chosen from `T` at compile time, as [`boxer`] chooses: the routine's box pinned when a
/// routine serves `T`, std's `Box::pin` itself otherwise (a large value is then passed exactly
/// as without the attribute, with no extra copy on the stack of a debug build).
#[inline(always)]
#[must_use]
pub fn pinner<T, F: FnOnce(T) -> Pin<Box<T>>>(_std: F) -> fn(T) -> Pin<Box<T>> {
    if Served::<T>::BOX {
        pin_spec::<T>
    } else {
        Box::<T>::pin
    }
}

/// `Box::pin(x)` through the routine of `T`'s class.
#[inline(always)]
fn pin_spec<T>(x: T) -> Pin<Box<T>> {
    Box::into_pin(spec::boxed(x))
}

/// `Box::new_uninit()`.
#[inline(always)]
#[must_use]
pub fn uninit<T, F: FnOnce() -> Box<MaybeUninit<T>>>(_std: F) -> Box<MaybeUninit<T>> {
    spec::uninit()
}

/// `Box::new_zeroed()`.
#[inline(always)]
#[must_use]
pub fn zeroed<T, F: FnOnce() -> Box<MaybeUninit<T>>>(_std: F) -> Box<MaybeUninit<T>> {
    spec::zeroed()
}

/// `vec![x; N]` as std builds it (`_empty` is the user's `vec![]`): `x` cloned `N - 1` times
/// with `clone` (the user's `Clone::clone`, so an unmet bound names `Clone`), moved into the
/// last slot, dropped when `N` is 0; capacity exactly `N`.
#[inline(always)]
#[must_use]
pub fn vec_from_elem<T, const N: usize, C: Fn(&T) -> T>(_empty: Vec<T>, clone: C, x: T) -> Vec<T> {
    if N == 0 {
        drop(x);
        return Vec::new();
    }
    let mut v = spec::vec_with_capacity::<T, N>();
    /// Sets the vector's length on drop, so that a panicking `clone` drops the clones made.
    struct SetLen<'a, T> {
        v: &'a mut Vec<T>,
        len: usize,
    }
    impl<T> Drop for SetLen<'_, T> {
        fn drop(&mut self) {
            // SAFETY: the first `len` elements were written.
            unsafe { self.v.set_len(self.len) }
        }
    }
    let mut p = v.as_mut_ptr();
    let mut guard = SetLen { v: &mut v, len: 0 };
    // As std's `extend_with`: a moving pointer, the length kept aside until the end.
    for _ in 1..N {
        // SAFETY: fewer than `N - 1` elements written so far, within the capacity of `N`.
        unsafe {
            p.write(clone(&x));
            p = p.add(1);
        }
        guard.len += 1;
    }
    // SAFETY: the last of the `N` slots.
    unsafe { p.write(x) };
    guard.len += 1;
    drop(guard);
    v
}

/// `vec![0; N]` (a literal zero): taken from the zeroing routine, with nothing written element
/// by element.
#[inline(always)]
#[must_use]
pub fn vec_zero<T: Zero, const N: usize>(_empty: Vec<T>, _zero: T) -> Vec<T> {
    // SAFETY: all-zero bytes are a valid `T` (`Zero`).
    unsafe { spec::vec_zeroed::<T, N>() }
}

/// `vec![a, b, c]` as rewritten by `#[specialize]`, for two elements:
/// `vec_list_finish((vec_list_putter())((vec_list_putter())(vec_list::<_, 2>(vec![]), a), b))`.
/// As std's `vec!` does, the block is allocated *before* the elements are evaluated (an
/// element that panics, returns early with `?` or reads an allocation counter sees it), and
/// each element is moved into the block as it comes, so no array of all of them is built on
/// the stack. On a panic or early return the elements written are dropped (last first, as the
/// temporaries of std's array are) and the block freed.
pub struct VecList<T, const N: usize> {
    v: Vec<T>,
}

impl<T, const N: usize> Drop for VecList<T, N> {
    #[inline]
    fn drop(&mut self) {
        while let Some(x) = self.v.pop() {
            drop(x);
        }
        let v = core::mem::ManuallyDrop::new(core::mem::take(&mut self.v));
        if core::mem::size_of::<[T; N]>() != 0 {
            // SAFETY: the vector's block, of capacity `N` (`vec_list`), so allocated with the
            // layout of `[T; N]`, empty now; freed here directly, as std frees its array's
            // box, so that an allocation nothing used can be optimised away as std's is.
            unsafe {
                std::alloc::dealloc(v.as_ptr() as *mut u8, core::alloc::Layout::new::<[T; N]>())
            };
        }
    }
}

/// The allocation of `vec![a, b, c]` (`_empty` is the user's `vec![]`): room for exactly `N`.
#[inline(always)]
#[must_use]
pub fn vec_list<T, const N: usize>(_empty: Vec<T>) -> VecList<T, N> {
    VecList {
        v: spec::vec_for_array::<T, N>(),
    }
}

/// The function that moves the next element of `vec![a, b, c]` into the block, as a pointer:
/// `(vec_list_putter())(list, x)`, the element the argument of the call. The function behind
/// the pointer, `vec_list_put`, takes the element as a `ManuallyDrop<T>` and copies its bytes
/// into the block from where the caller evaluated it: an unoptimised build then copies a large
/// element once, from the caller's temporary into the block, as std's `vec!` does (a function
/// that moved its `T` on, to `ptr::write` or an assignment, would copy it on the stack once
/// more: `vec![[3u8; 1 << 20]]` runs on a 2 MiB stack). Called through a pointer, not a
/// function item, a diagnostic on an element (a type error, a use after move) names no
/// function of specalloc.
#[inline(always)]
#[must_use]
pub fn vec_list_putter<T, const N: usize>() -> fn(VecList<T, N>, T) -> VecList<T, N> {
    let put: fn(VecList<T, N>, ManuallyDrop<T>) -> VecList<T, N> = vec_list_put::<T, N>;
    // The two function pointer types differ only in the second parameter, `T` against
    // `ManuallyDrop<T>`, a `#[repr(transparent)]` wrapper of its one field `T`: the types are
    // ABI-compatible ("ABI compatibility" in the documentation of the `fn` primitive).
    // SAFETY: so calling `vec_list_put` through the returned pointer passes the `T` as its
    // `ManuallyDrop<T>`, with the same bytes and the same ownership.
    unsafe {
        core::mem::transmute::<
            fn(VecList<T, N>, ManuallyDrop<T>) -> VecList<T, N>,
            fn(VecList<T, N>, T) -> VecList<T, N>,
        >(put)
    }
}

/// Moves the next element of `vec![a, b, c]` into the block: its bytes copied into the next
/// slot, the `ManuallyDrop` forgotten (the block owns the element now).
#[inline(always)]
fn vec_list_put<T, const N: usize>(mut list: VecList<T, N>, x: ManuallyDrop<T>) -> VecList<T, N> {
    let len = list.v.len();
    assert!(len < N, "vec_list_put: more than N elements");
    // `len < N`, so the slot `len` is within the block's capacity of exactly `N` (at least `N`
    // for zero-sized `T`) and holds nothing.
    // SAFETY: the slot is in the block and free (above); `x` is a `T` (`ManuallyDrop<T>` has its
    // layout), read once and never dropped here: moved in, the first `len + 1` are initialised.
    unsafe {
        let from = (&x as *const ManuallyDrop<T>).cast::<T>();
        core::ptr::copy_nonoverlapping(from, list.v.as_mut_ptr().add(len), 1);
        list.v.set_len(len + 1);
    }
    list
}

/// The vector of `vec![a, b, c]`, once its `N` elements are in.
#[inline(always)]
#[must_use]
pub fn vec_list_finish<T, const N: usize>(list: VecList<T, N>) -> Vec<T> {
    assert_eq!(list.v.len(), N, "vec_list_finish: fewer than N elements");
    let mut list = core::mem::ManuallyDrop::new(list);
    core::mem::take(&mut list.v)
}

/// `vec![a, b, c]` from an array (`alloc!`'s former expansion): capacity exactly `N`.
#[inline(always)]
#[must_use]
pub fn vec_from_array<T, const N: usize>(_empty: Vec<T>, a: [T; N]) -> Vec<T> {
    spec::vec_from_array(a)
}

/// `String::from("…")`, `"…".to_string()`, `"…".to_owned()` (`_std` is the user's function):
/// capacity exactly `N`, the literal's length.
#[cfg_attr(debug_assertions, inline)]
#[cfg_attr(not(debug_assertions), inline(always))]
#[must_use]
pub fn string_from<const N: usize, F: FnOnce(&'static str) -> String>(
    _std: F,
    s: &'static str,
) -> String {
    spec::string_from::<N>(s)
}
