//! specalloc: Go 1.27's size-specialised allocation, for Rust.
//!
//! A thread-caching general-purpose allocator (Go's size classes, per-thread heaps with no
//! atomics on the fast path, cross-thread frees, a 4-byte class for the tiniest objects), and
//! on top of it *size-specialised* routines: when the size of an allocation is known at compile
//! time, the call site goes straight to the routine of its size class, with no run-time size
//! lookup and no tiny/small/large dispatch. [`#[specialize]`](specialize) rewrites the
//! allocation sites of existing code into those calls; [`alloc!`] makes them explicitly.
//!
//! # Start in a minute
//!
//! ```toml
//! [dependencies]
//! specalloc = "0.1"
//! ```
//!
//! Install it once, in the binary (and in each test binary, which has its own `main`):
//!
//! ```
//! specalloc::install!(); // #[global_allocator] static …: SpecAlloc, marked as specalloc's own
//!
//! let b = Box::new([1u64; 4]); // every allocation of the program now goes to specalloc
//! assert_eq!(b.iter().sum::<u64>(), 4);
//! println!("{}", specalloc::stats()); // human-readable statistics
//! ```
//!
//! Annotate the hot constructors to give them the specialised routines:
//!
//! ```
//! specalloc::install!();
//! use specalloc::specialize;
//!
//! #[specialize]
//! fn node(key: u64) -> (Box<[u64; 3]>, Box<[u8]>, String) {
//!     (Box::new([key, 0, 0]), Box::<[u8]>::from([1, 2]), "leaf".to_string())
//! }
//!
//! let (b, t, s) = node(7);
//! assert_eq!((b[0], t.len(), s.capacity()), (7, 2, 4)); // exactly as without it
//! ```
//!
//! or allocate explicitly through them:
//!
//! ```
//! specalloc::install!();
//! let b: Box<[u64; 3]> = specalloc::alloc!(box [1, 2, 3]); // the 24-byte class's routine
//! assert_eq!(b.iter().sum::<u64>(), 6);
//! ```
//!
//! `cargo expand` shows what the attribute did; `nm -C` on the binary lists the routines it
//! uses (`specalloc_runtime::routines::small_sc3`, …). The [`guide`] has every form, the
//! diagnostics and the limits.
//!
//! # Libraries and wrappers
//!
//! The specialised routines hand out blocks only in a program that declared `SpecAlloc` itself
//! as its global allocator with [`install!`]. A hand-written `#[global_allocator]`, a wrapper
//! around `SpecAlloc` (counting, adding headers, …) or another allocator get the std behaviour
//! from every specialised entry point and every rewritten site: correct, just not specialised.
//! So a library can use `#[specialize]` whatever its users install, and its own tests and
//! doctests need not install anything.
//!
//! # Cargo features
//!
//! | feature | effect |
//! | --- | --- |
//! | `checked` | misuse (double free, foreign pointer, wrong `Layout`) aborts at once with a message naming the fault and the address |
//! | `no-size-specialized` | the opt-out switch (Go's `GOEXPERIMENT=nosizespecializedmalloc`): every specialised entry point and rewritten site calls the global allocator's generic path, with the same results; build a program both ways to measure what specialisation buys it |
//! | `serde` | `Serialize`/`Deserialize` for [`Stats`] and [`ClassStats`] (statistics as JSON) |
//! | `override` | a binary that calls [`install!`] also exports C's `malloc` family and C++'s `operator new` and `delete`, so the C and C++ code linked into it allocates from specalloc (see [`install!`]) |
//! | `compare-mimalloc`, `compare-system` | for the repository's examples only: another global allocator, to compare |
//!
//! Cargo unifies features across a build: build the two sides of an A/B comparison in separate
//! target directories.
//!
//! # Operations
//!
//! - [`stats()`]: a snapshot of the allocator's counters (per class, tiny objects, large
//!   objects, pages in use and their peak, memory returned to the OS); `Display` prints it
//!   with KiB/MiB units.
//! - [`collect()`]: gives the calling thread's empty spans, the page heap's free pages and the
//!   free pages of freed huge objects back to the OS now, and says how much.
//! - [`set_large_cache_percent`] (or `SPECALLOC_LARGE_CACHE_PERCENT`): the bound of the
//!   resident pages of freed huge objects kept for reuse.
//! - [`set_page_policy`] (or `SPECALLOC_PURGE_DELAY_MS`, `SPECALLOC_DECOMMIT_DELAY_MS`,
//!   `SPECALLOC_HUGE_PAGES`): how long freed memory stays resident (saving page faults when it
//!   is reused) before it goes back to the OS; see [`PagePolicy`]. These four are the only
//!   environment variables the allocator reads.
//!
//! # Platform support
//!
//! Linux on x86_64 and aarch64 (the runtime uses `mmap`, `mremap` and `madvise`); any other
//! target fails to compile with a message saying so.
//!
//! # Debug builds
//!
//! In a `dev` build the allocation path is compiled in the runtime crate, not in yours; give it
//! the optimiser and an opt-level-0 program allocates about as fast as with glibc's `malloc`:
//!
//! ```toml
//! [profile.dev.package.specalloc-runtime]
//! opt-level = 3
//! debug-assertions = false
//! overflow-checks = false
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub use specalloc_runtime::*;

/// The runtime crate itself, for paths that name it.
pub use specalloc_runtime as runtime;

mod report;

#[doc = include_str!("../docs/macros.md")]
pub mod guide {}

/// The README's Rust snippets, compiled and run as doctests (`cargo test -p specalloc --doc`)
/// with warnings denied, so that the Quickstart works, and stays quiet, as pasted.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
#[doc(test(attr(deny(warnings))))]
pub mod readme {}

pub use report::{site_report, sites, SiteReport, SiteRoute, SiteStats};

/// Declares [`SpecAlloc`] as the program's global allocator and lets the size-specialised
/// routines serve ([`spec`], [`alloc!`], [`#[specialize]`](specialize)): `install!();`, or
/// `install!(static NAME);` to name the static. Put it once in the binary (and in each test
/// binary, which has its own `main`).
///
/// It expands to `#[global_allocator] static NAME: SpecAlloc = SpecAlloc;` plus the mark that
/// the global allocator is specalloc's own: on ELF and Mach-O targets a byte the linker puts in
/// place of the runtime's weak default (so it holds from the first instruction, and under fat
/// LTO the compiler drops the entry points' check), elsewhere a constructor run before `main`.
/// A program can have only one `#[global_allocator]`, so no wrapper can be installed together
/// with the mark. Without it (a hand-written `#[global_allocator]`, a
/// wrapper such as a counting or header-adding allocator, another allocator, or a library's
/// own tests) the specialised entry points silently do what the std code does, through the
/// global allocator: correct, just not specialised.
///
/// ```
/// specalloc::install!(static GLOBAL);
///
/// assert!(specalloc::spec::installed());
/// let v = specalloc::spec::vec_with_capacity::<u32, 5>(); // the 24-byte class routine
/// assert_eq!(v.capacity(), 5);
/// ```
///
/// A second global allocator next to it is a compile error:
///
/// ```compile_fail
/// specalloc::install!();
/// #[global_allocator]
/// static OTHER: std::alloc::System = std::alloc::System;
/// # fn main() {}
/// ```
///
/// With the `override` feature, the binary also exports C's `malloc` family (`malloc`, `free`,
/// `calloc`, `realloc`, `posix_memalign`, `aligned_alloc`, `malloc_usable_size`, …, see
/// `specalloc-malloc`), and C++'s `operator new` and `delete`, so the C and C++ code linked into
/// it (a `-sys` crate, code built with the `cc` crate) and the C library's own allocations
/// (`strdup`, stdio buffers) come to specalloc too.
#[macro_export]
macro_rules! install {
    ($($input:tt)*) => {
        $crate::runtime::install!($($input)*);
        $crate::__keep_malloc!();
    };
}

/// With the `override` feature: a reference from the binary to every exported C function, so
/// that the linker keeps them (an rlib's object is linked only when something refers to it).
#[cfg(feature = "override")]
#[doc(hidden)]
#[macro_export]
macro_rules! __keep_malloc {
    () => {
        const _: () = {
            #[used]
            static __SPECALLOC_KEEP_MALLOC: &$crate::__malloc::Keep = &$crate::__malloc::KEEP;
        };
    };
}

/// Without the `override` feature: nothing.
#[cfg(not(feature = "override"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __keep_malloc {
    () => {};
}

/// The C `malloc` family the `override` feature exports (see [`install!`]).
#[cfg(feature = "override")]
#[doc(hidden)]
pub use specalloc_malloc as __malloc;

/// Rewrites the allocation sites of a function, method, impl block, trait or inline module
/// into calls of the size-specialised entry points ([`spec`]), which pick their routine from
/// the type's size class at compile time.
///
/// | written | becomes (`::specalloc::__private::spec::…`) |
/// | --- | --- |
/// | `Box::new(e)`, `Box::<T>::new(e)` | `boxed(e)` (through `__private::boxer`: std's `Box::new` for types no routine serves, so large values are built in place) |
/// | `Box::new_uninit()`, `Box::new_zeroed()` | `uninit()`, `zeroed()` |
/// | `Box::pin(e)` | `Box::into_pin(boxed(e))` (through `__private::pinner`: std's `Box::pin` for types no routine serves) |
/// | `String::from("…")`, `"…".to_string()`, `"…".to_owned()` | `string_from::<LEN>("…")` |
///
/// (The generated calls go through thin wrappers in `__private` that also take the std
/// function the site called, `Box::new`, `String::from`, … , so that the imports naming them
/// stay used.)
///
/// `vec!` (every form), `Box::new` used as a value, `Vec::with_capacity` and
/// `String::with_capacity` are left to std: std's `vec!` has behaviour no rewrite matches by
/// hand (zeroed memory for every zero value, the drop order of a panicking clone, zero-sized
/// elements, the common type of a list's elements, its lints), and a bare `vec!` may be a
/// macro of the program's own; std's `with_capacity` is inlined where it is called, and a
/// call of an entry point in its place could make the calling code slower, not faster (for a
/// vector through the routines, call [`spec::vec_with_capacity`] yourself).
///
/// Sites whose value is discarded (`Box::new(5u8);` as a statement) are left alone, so that
/// `#[must_use]` warns as it does without the attribute; so are the arguments of macros that
/// show their input (`assert!`, `assert_eq!`, `debug_assert!`, `dbg!`, `stringify!`, unknown
/// macros).
///
/// In a program that does not [`install!`] specalloc (or wraps it in another allocator), the
/// rewritten code does exactly what the original does, through the global allocator: that is
/// how a library adopts the attribute.
///
/// `Box` and `String` are recognised bare and under `std::` and `alloc::`
/// (`alloc::boxed::Box::new`, `::std::string::String::from`).
///
/// The walk covers closures, async blocks and the arguments of other macros that parse as
/// comma-separated expressions (`println!`, `assert_eq!`, `format!`, …; others are left
/// untouched, and so are `stringify!`, `concat!`, `quote!` and the like). It leaves alone
/// nested items, const contexts (`const fn` bodies, `const { }` blocks, array lengths, const
/// generic arguments), types and patterns. Semantics are kept: `Box<dyn Trait>` coercions
/// still apply. Strings get exactly the capacity the original call gives.
///
/// Options: `#[specialize(crate = path)]` when the dependency is renamed (the generated code
/// names `::specalloc::__private` otherwise), and `#[specialize(report)]` to count each
/// rewritten site at run time ([`sites()`]).
///
/// With the `no-size-specialized` feature the rewritten code calls the global allocator
/// instead, with the same results.
///
/// ```
/// specalloc::install!();
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
///     let mut v = Vec::with_capacity(LEN); // left to std (inlined, as without the attribute)
///     v.resize(LEN, 1u32);
///     let boxes = [1, 2, 3].into_iter().map(Box::new).collect(); // std's `Box::new`
///     let name = "specalloc".to_string(); // spec::string_from::<9>
///     let runtime = vec![0u8; n]; // `vec!`: left to std
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
/// # specalloc::install!();
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
/// specalloc::install!();
///
/// use specalloc::alloc;
///
/// // One `[u64; 4]`, uninitialised: the 32-byte class routine.
/// let mut u = alloc!(uninit [u64; 4]);
/// u.write([1, 2, 3, 4]);
/// // SAFETY: initialised (written or zeroed) above.
/// let u = unsafe { u.assume_init() };
/// assert_eq!(u.iter().sum::<u64>(), 10);
///
/// // Zeroed.
/// let z = alloc!(zeroed [u32; 16]);
/// // SAFETY: initialised (written or zeroed) above.
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

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;
