//! specalloc: Go 1.27's size-specialised allocation, for Rust.
//!
//! This facade re-exports the runtime ([`specalloc_runtime`]) and the macros: [`alloc!`] for
//! explicit allocations and [`#[specialize]`](specialize) to rewrite the allocation sites of
//! existing code (see `docs/macros.md` for a walkthrough with `cargo expand`).
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;
//!
//! let b = Box::new([1u64; 4]);
//! assert_eq!(b.iter().sum::<u64>(), 4);
//! println!("{}", specalloc::stats());
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub use specalloc_runtime::*;

/// The runtime crate itself, for paths that name it.
pub use specalloc_runtime as runtime;

use core::fmt;
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

/// Rewrites the allocation sites of a function, method, impl block, trait or inline module
/// into calls of the size-specialised entry points ([`spec`]), which pick their routine from
/// the type's size class at compile time.
///
/// | written | becomes (`::specalloc::__private::spec::…`) |
/// | --- | --- |
/// | `Box::new(e)`, `Box::<T>::new(e)` | `boxed(e)`, `boxed::<T>(e)` |
/// | `Box::new_uninit()`, `Box::new_zeroed()` | `uninit()`, `zeroed()` |
/// | `Box::pin(e)` | `Box::into_pin(boxed(e))` |
/// | `Box::new` as a value (`.map(Box::new)`) | `boxed` |
/// | `vec![e; N]` | `vec_from_elem::<_, N>(e)` (`vec_zero` for a literal `0`) |
/// | `vec![a, b, c]` | `vec_from_array([a, b, c])` |
/// | `Vec::with_capacity(N)` | `vec_with_capacity::<_, N>()` |
/// | `String::with_capacity(N)` | `string_with_capacity::<N>()` |
/// | `String::from("…")`, `"…".to_string()`, `"…".to_owned()` | `string_from::<LEN>("…")` |
///
/// `N` must be an integer literal or look like a const item (a SCREAMING_CASE name or a path
/// ending in one, not through `Self` or a type parameter); other lengths are known only at run
/// time and keep the generic path. `Box`, `Vec`, `String` and `vec!` are recognised bare and
/// under `std::` and `alloc::` (`alloc::boxed::Box::new`, `::std::vec!`).
///
/// The walk covers closures, async blocks and the arguments of other macros that parse as
/// comma-separated expressions (`println!`, `assert_eq!`, `format!`, …; others are left
/// untouched, and so are `stringify!`, `concat!`, `quote!` and the like). It leaves alone
/// nested items, const contexts (`const fn` bodies, `const { }` blocks, array lengths, const
/// generic arguments), types and patterns. Semantics are kept: `vec![e; N]` evaluates `e`
/// once, clones it `N - 1` times and drops it when `N` is 0, and `Box<dyn Trait>` coercions
/// still apply. The vectors get the whole capacity of their size class (at least `N`).
///
/// Options: `#[specialize(crate = path)]` when the dependency is renamed (the generated code
/// names `::specalloc::__private` otherwise), and `#[specialize(report)]` to count each
/// rewritten site at run time ([`sites()`]).
///
/// With the `no-size-specialized` feature the rewritten code calls the global allocator
/// instead, with the same results.
///
/// ```
/// #[global_allocator]
/// static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;
///
/// use specalloc::specialize;
///
/// trait Shape {
///     fn area(&self) -> f64;
/// }
/// struct Square(f64);
/// impl Shape for Square {
///     fn area(&self) -> f64 {
///         self.0 * self.0
///     }
/// }
///
/// const LEN: usize = 8;
///
/// #[specialize]
/// fn build(n: usize) -> (Box<u64>, Box<dyn Shape>, Vec<u32>, Vec<Box<i32>>, String, Vec<u8>) {
///     let a = Box::new(7u64); // spec::boxed: the 8-byte tiny routine
///     let s: Box<dyn Shape> = Box::new(Square(2.0)); // unsize coercion still applies
///     let v = vec![1u32; LEN]; // spec::vec_from_elem::<_, { LEN }>
///     let boxes = [1, 2, 3].into_iter().map(Box::new).collect(); // spec::boxed as a value
///     let name = "specalloc".to_string(); // spec::string_from::<9>
///     let runtime = vec![0u8; n]; // length known at run time: left as it is
///     (a, s, v, boxes, name, runtime)
/// }
///
/// let (a, s, v, boxes, name, runtime) = build(3);
/// assert_eq!(*a, 7);
/// assert_eq!(s.area(), 4.0);
/// assert_eq!(v, [1; 8]);
/// assert_eq!(boxes.iter().map(|b| **b).sum::<i32>(), 6);
/// assert_eq!(name, "specalloc");
/// assert_eq!(runtime.len(), 3);
/// ```
///
/// On an impl block, every method (except `const fn`s) is rewritten:
///
/// ```
/// # #[global_allocator]
/// # static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;
/// struct Node {
///     value: u32,
///     next: Option<Box<Node>>,
/// }
///
/// #[specalloc::specialize]
/// impl Node {
///     fn push(self, value: u32) -> Node {
///         Node { value, next: Some(Box::new(self)) }
///     }
/// }
///
/// let list = Node { value: 1, next: None }.push(2).push(3);
/// assert_eq!(list.next.unwrap().value, 2);
/// ```
///
/// Misuse is a compile error on the offending tokens, for example on a `const fn`:
///
/// ```compile_fail
/// #[specalloc::specialize]
/// const fn f() -> u8 {
///     1
/// }
/// ```
pub use specalloc_macros::specialize;

/// Allocates through the routine chosen from a type's size class, returning std types.
///
/// | form | returns | through |
/// | --- | --- | --- |
/// | `alloc!(uninit T)` | `Box<MaybeUninit<T>>` | [`spec::uninit`] |
/// | `alloc!(zeroed T)` | `Box<MaybeUninit<T>>`, all bytes zero | [`spec::zeroed`] |
/// | `alloc!(box expr)` | `Box<_>` | [`spec::boxed`] |
/// | `alloc!(box expr: T)` | `Box<T>` | [`spec::boxed::<T>`](spec::boxed) |
/// | `alloc!(vec [e; N])` | `Vec<_>`, `N` a constant expression | [`spec::vec_from_elem`] |
/// | `alloc!(vec [a, b, …])` | `Vec<_>` | [`spec::vec_from_array`] |
///
/// The macro never needs the type's size: the entry point picks its routine from
/// `size_of`/`align_of` in a constant. It expands through `$crate`, so it works under a
/// renamed dependency.
///
/// ```
/// #[global_allocator]
/// static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;
///
/// use specalloc::alloc;
///
/// // One `[u64; 4]`, uninitialised: the 32-byte class routine.
/// let mut u = alloc!(uninit [u64; 4]);
/// u.write([1, 2, 3, 4]);
/// let u = unsafe { u.assume_init() };
/// assert_eq!(u.iter().sum::<u64>(), 10);
///
/// // Zeroed.
/// let z = alloc!(zeroed [u32; 16]);
/// assert_eq!(unsafe { z.assume_init() }, Box::new([0u32; 16]));
///
/// // Boxing a value, with the type inferred or given.
/// let b = alloc!(box (1u8, 2u16));
/// assert_eq!(*b, (1, 2));
/// let d: Box<dyn std::fmt::Debug> = alloc!(box 5u64: u64);
/// assert_eq!(format!("{d:?}"), "5");
///
/// // Vectors of a constant length.
/// const N: usize = 3;
/// assert_eq!(alloc!(vec [String::from("x"); N]), ["x", "x", "x"]);
/// assert_eq!(alloc!(vec [1u16, 2, 3]), [1, 2, 3]);
/// ```
///
/// Malformed input is a compile error on the offending token:
///
/// ```compile_fail
/// let b = specalloc::alloc!(boxed 5);
/// ```
#[macro_export]
macro_rules! alloc {
    ($($input:tt)*) => {
        $crate::__private::alloc!(crate = $crate; $($input)*)
    };
}

/// One allocation site rewritten by `#[specialize(report)]`, as [`sites()`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteStats {
    /// Source file of the site.
    pub file: &'static str,
    /// Line of the site (1-based).
    pub line: u32,
    /// Column of the site (1-based).
    pub column: u32,
    /// What was written there: `Box::new`, `vec![e; N]`, `String::from`, …
    pub what: &'static str,
    /// Times the site ran.
    pub hits: u64,
    /// Bytes each allocation asks for (at the first run: a site in a generic function may
    /// allocate several sizes).
    pub size: usize,
    /// Alignment each allocation asks for (at the first run).
    pub align: usize,
    /// Where such an allocation goes.
    pub route: SiteRoute,
}

/// Where the allocations of a site go, from their size and alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteRoute {
    /// Zero-sized: nothing is allocated.
    ZeroSized,
    /// A tiny routine (1 to 15 bytes).
    Tiny,
    /// The routine of this size class (16 bytes to 32 KiB).
    Class(usize),
    /// The global allocator's generic path: large or over-aligned, or the
    /// `no-size-specialized` opt-out is on.
    Generic,
}

impl SiteRoute {
    /// The route of an allocation of `size` bytes at `align`.
    ///
    /// ```
    /// use specalloc::SiteRoute;
    /// assert_eq!(SiteRoute::of(0, 1), SiteRoute::ZeroSized);
    /// assert_eq!(SiteRoute::of(1 << 20, 8), SiteRoute::Generic);
    /// if specalloc::spec::SIZE_SPECIALIZED {
    ///     assert_eq!(SiteRoute::of(4, 4), SiteRoute::Tiny);
    ///     assert_eq!(SiteRoute::of(24, 8), SiteRoute::Class(3));
    ///     // Agrees with the entry points' choice of routine.
    ///     for size in 1..40_000 {
    ///         for align in [1, 2, 4, 8, 16, 64, 4096, 16384] {
    ///             let routed = SiteRoute::of(size, align) != SiteRoute::Generic;
    ///             assert_eq!(routed, specalloc::spec::routine(size, align, false).is_some());
    ///         }
    ///     }
    /// }
    /// ```
    pub const fn of(size: usize, align: usize) -> SiteRoute {
        // The same decision as `spec::routine`, without touching its tables of routines, so
        // that a program using `sites()` links only the routines it calls.
        if size == 0 {
            SiteRoute::ZeroSized
        } else if !spec::SIZE_SPECIALIZED {
            SiteRoute::Generic
        } else if size < 16 {
            if align <= routines::TINY_ALIGN[size] {
                SiteRoute::Tiny
            } else {
                SiteRoute::Generic
            }
        } else {
            match size_class::class_of(size, align) {
                0 => SiteRoute::Generic,
                c => SiteRoute::Class(c),
            }
        }
    }
}

impl fmt::Display for SiteStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {} of {} B (align {}) -> ",
            self.file, self.line, self.column, self.what, self.size, self.align
        )?;
        match self.route {
            SiteRoute::ZeroSized => write!(f, "nothing (zero-sized)")?,
            SiteRoute::Tiny => write!(f, "tiny routine")?,
            SiteRoute::Class(c) => write!(f, "class {c} ({} B)", size_class::class_size(c))?,
            SiteRoute::Generic => write!(f, "generic path")?,
        }
        write!(f, ", {} hits", self.hits)
    }
}

/// The sites rewritten by `#[specialize(report)]` that have run so far, most recently first
/// run first. Sites of code without `report` are not counted (it costs an atomic increment
/// per allocation).
///
/// ```
/// #[global_allocator]
/// static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;
///
/// #[specalloc::specialize(report)]
/// fn make() -> Box<[u64; 3]> {
///     Box::new([1, 2, 3])
/// }
///
/// for _ in 0..10 {
///     make();
/// }
/// let site = specalloc::sites().into_iter().find(|s| s.what == "Box::new").unwrap();
/// assert_eq!((site.hits, site.size), (10, 24));
/// println!("{site}"); // src/lib.rs:8:5: Box::new of 24 B (align 8) -> class 3 (24 B), 10 hits
/// ```
pub fn sites() -> Vec<SiteStats> {
    let mut out = Vec::new();
    let mut p = __private::SITES.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: the list holds only `&'static Site`s, never removed.
        let s = unsafe { &*p };
        out.push(s.stats());
        p = s.next.load(Ordering::Acquire);
    }
    out
}

/// What the macros' expansions name. Not public API: it may change in any release.
#[doc(hidden)]
pub mod __private {
    use super::{AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering, SiteRoute, SiteStats};

    pub use specalloc_macros::alloc;
    pub use specalloc_runtime::spec;
    pub use core::mem::MaybeUninit;
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

    /// `vec![0; N]` (a literal zero): taken from the zeroing routine, with nothing written
    /// element by element.
    #[inline(always)]
    pub fn vec_zero<T: Zero, const N: usize>(_zero: T) -> Vec<T> {
        // SAFETY: all-zero bytes are a valid `T` (`Zero`).
        unsafe { spec::vec_zeroed::<T, N>() }
    }

    pub(crate) static SITES: AtomicPtr<Site> = AtomicPtr::new(core::ptr::null_mut());

    /// A site rewritten by `#[specialize(report)]`: a static of its own.
    pub struct Site {
        file: &'static str,
        line: u32,
        column: u32,
        what: &'static str,
        hits: AtomicU64,
        size: AtomicUsize,
        align: AtomicUsize,
        state: AtomicU8,
        pub(crate) next: AtomicPtr<Site>,
    }

    const UNLISTED: u8 = 0;
    const LISTING: u8 = 1;
    const LISTED: u8 = 2;

    impl Site {
        /// A site not run yet.
        pub const fn new(file: &'static str, line: u32, column: u32, what: &'static str) -> Self {
            Site {
                file,
                line,
                column,
                what,
                hits: AtomicU64::new(0),
                size: AtomicUsize::new(0),
                align: AtomicUsize::new(0),
                state: AtomicU8::new(UNLISTED),
                next: AtomicPtr::new(core::ptr::null_mut()),
            }
        }

        /// Counts one run allocating `size` bytes at `align`; the first run lists the site.
        #[inline]
        pub fn hit(&'static self, size: usize, align: usize) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            if self.state.load(Ordering::Acquire) != LISTED {
                self.list(size, align);
            }
        }

        #[cold]
        fn list(&'static self, size: usize, align: usize) {
            if self
                .state
                .compare_exchange(UNLISTED, LISTING, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return;
            }
            self.size.store(size, Ordering::Relaxed);
            self.align.store(align, Ordering::Relaxed);
            let me = self as *const Site as *mut Site;
            let mut head = SITES.load(Ordering::Acquire);
            loop {
                self.next.store(head, Ordering::Relaxed);
                match SITES.compare_exchange_weak(head, me, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(h) => head = h,
                }
            }
            self.state.store(LISTED, Ordering::Release);
        }

        pub(crate) fn stats(&self) -> SiteStats {
            let (size, align) = (
                self.size.load(Ordering::Relaxed),
                self.align.load(Ordering::Relaxed),
            );
            SiteStats {
                file: self.file,
                line: self.line,
                column: self.column,
                what: self.what,
                hits: self.hits.load(Ordering::Relaxed),
                size,
                align,
                route: SiteRoute::of(size, align.max(1)),
            }
        }
    }

    /// The entry points of [`spec`], each counting its site first (`#[specialize(report)]`).
    pub mod report {
        use super::{spec, Site, Zero};
        use core::mem::{align_of, size_of, MaybeUninit};

        /// [`spec::boxed`], counted.
        #[inline(always)]
        pub fn boxed<T>(site: &'static Site, x: T) -> Box<T> {
            site.hit(size_of::<T>(), align_of::<T>());
            spec::boxed(x)
        }

        /// [`spec::uninit`], counted.
        #[inline(always)]
        pub fn uninit<T>(site: &'static Site) -> Box<MaybeUninit<T>> {
            site.hit(size_of::<T>(), align_of::<T>());
            spec::uninit()
        }

        /// [`spec::zeroed`], counted.
        #[inline(always)]
        pub fn zeroed<T>(site: &'static Site) -> Box<MaybeUninit<T>> {
            site.hit(size_of::<T>(), align_of::<T>());
            spec::zeroed()
        }

        /// [`spec::vec_with_capacity`], counted.
        #[inline(always)]
        pub fn vec_with_capacity<T, const N: usize>(site: &'static Site) -> Vec<T> {
            site.hit(size_of::<[T; N]>(), align_of::<T>());
            spec::vec_with_capacity::<T, N>()
        }

        /// [`spec::vec_from_elem`], counted.
        #[inline(always)]
        pub fn vec_from_elem<T: Clone, const N: usize>(site: &'static Site, x: T) -> Vec<T> {
            site.hit(size_of::<[T; N]>(), align_of::<T>());
            spec::vec_from_elem::<T, N>(x)
        }

        /// [`super::vec_zero`], counted.
        #[inline(always)]
        pub fn vec_zero<T: Zero, const N: usize>(site: &'static Site, zero: T) -> Vec<T> {
            site.hit(size_of::<[T; N]>(), align_of::<T>());
            super::vec_zero::<T, N>(zero)
        }

        /// [`spec::vec_from_array`], counted.
        #[inline(always)]
        pub fn vec_from_array<T, const N: usize>(site: &'static Site, a: [T; N]) -> Vec<T> {
            site.hit(size_of::<[T; N]>(), align_of::<T>());
            spec::vec_from_array(a)
        }

        /// [`spec::string_with_capacity`], counted.
        #[inline(always)]
        pub fn string_with_capacity<const N: usize>(site: &'static Site) -> String {
            site.hit(N, 1);
            spec::string_with_capacity::<N>()
        }

        /// [`spec::string_from`], counted.
        #[inline(always)]
        pub fn string_from<const N: usize>(site: &'static Site, s: &str) -> String {
            site.hit(N, 1);
            spec::string_from::<N>(s)
        }
    }
}
