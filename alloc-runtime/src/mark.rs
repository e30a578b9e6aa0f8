//! The mark [`install!`](crate::install) sets: whether the program's global allocator is
//! `SpecAlloc` itself, so that the size-specialised routines may hand out blocks. Decided
//! before `main` and never changed after: the entry points of `spec` read it on every call and,
//! without it, do what std does at once; the heap's routine gate reads it too, and `spec`
//! re-exports it.
//!
//! On ELF and Mach-O targets (`cfg(specalloc_link_mark)`, set by the build script) the mark is
//! decided by the linker: `csrc/install_mark.c` defines `specalloc_install_mark` as a weak,
//! hidden byte 0, and `install!` defines it as a strong byte 1 next to its
//! `#[global_allocator]`, which replaces the weak one. Without link-time optimisation reading it
//! costs one load and one branch, as a run-time flag would; with fat LTO the compiler sees the
//! strong definition and its value, so an installed program's entry points carry no check at
//! all. Elsewhere the mark is a run-time flag set by a constructor that `install!` emits.

/// Declares [`SpecAlloc`](crate::SpecAlloc) as the program's global allocator and lets the
/// size-specialised routines serve the entry points of this module (and the code
/// `#[specialize]` generates). Put it once in the binary, or in each test binary:
/// `install!();` or `install!(static NAME);` to name the static.
///
/// It expands to `#[global_allocator] static NAME: SpecAlloc = SpecAlloc;` and the mark that
/// lets the routines serve: on ELF and Mach-O targets a `#[no_mangle]` byte,
/// `specalloc_install_mark = 1`, which replaces the runtime's weak default 0 when the program is
/// linked (under fat LTO the compiler then drops the entry points' check); elsewhere a
/// constructor run before `main` (a `.CRT$XCU` entry on Windows). A program has only one
/// `#[global_allocator]`, so a wrapper can never be installed together with the mark. Without
/// the mark (a hand-written `#[global_allocator]`, a wrapper, another allocator) the entry
/// points use the global allocator like the std code they stand for.
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

        $crate::__install_mark!();
    };
}

/// Whether this build's install mark is decided by the linker (ELF and Mach-O targets), so that
/// it holds from the program's first instruction, constructors included; `false` where a
/// constructor sets it before `main` instead.
///
/// ```
/// if specalloc_runtime::spec::MARK_AT_LINK_TIME {
///     // This doctest does not call `install!`: the weak default is in place.
///     assert!(!specalloc_runtime::spec::installed());
/// }
/// ```
pub const MARK_AT_LINK_TIME: bool = cfg!(specalloc_link_mark);

#[cfg(specalloc_link_mark)]
unsafe extern "C" {
    /// The link-time mark: 1 when `install!` is linked into this image, else the weak
    /// default 0 of `csrc/install_mark.c`. Immutable, so reading it is safe.
    safe static specalloc_install_mark: u8;
    /// A strong, hidden symbol of `csrc/install_mark.c`, beside the weak default: referencing
    /// it makes the linker take that object into every image that links the runtime.
    safe static specalloc_install_mark_default: u8;
}

/// Keeps `csrc/install_mark.c`'s object, with the weak, hidden default of the mark, in every
/// image that links the runtime (`#[used]`: rustc makes the linker keep it, and so the object
/// it points into). Without it an image whose own objects do not pull that object in would
/// take the mark from whatever defines it first: a Rust shared library that installs
/// specalloc, linked before the runtime, would turn the routines on in an executable that does
/// not. With it the image's own definition wins, and its hidden visibility keeps the mark out
/// of the image's exported symbols even where `install!` defines it (see `install_mark.c`).
#[cfg(specalloc_link_mark)]
#[used]
static KEEP_DEFAULT_MARK: &u8 = &specalloc_install_mark_default;

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
#[cfg(specalloc_link_mark)]
#[inline(always)]
pub fn installed() -> bool {
    specalloc_install_mark != 0
}

/// Defines the strong, set link-time mark; [`install!`](crate::install) expands this next to
/// its `#[global_allocator]`. Not public API.
#[cfg(specalloc_link_mark)]
#[doc(hidden)]
#[macro_export]
macro_rules! __install_mark {
    () => {
        const _: () = {
            /// The install mark, set: this image's global allocator is `SpecAlloc` itself
            /// (declared next to it), which frees the routines' blocks.
            #[unsafe(no_mangle)]
            #[used]
            static specalloc_install_mark: u8 = 1;
        };
    };
}

#[cfg(not(specalloc_link_mark))]
pub use run_time::{__declare_global_allocator, installed};

/// The run-time mark of targets without weak symbols, set by a constructor.
#[cfg(not(specalloc_link_mark))]
mod run_time {
    use core::sync::atomic::{AtomicBool, Ordering};

    /// Whether [`install!`](crate::install) marked the global allocator as specalloc's own
    /// `SpecAlloc` (set before `main` by the constructor the macro emits).
    static INSTALLED: AtomicBool = AtomicBool::new(false);

    /// Whether the routines may hand out blocks: [`install!`](crate::install) declared
    /// `SpecAlloc` itself as the global allocator. `false` in a program that installs it by
    /// hand, wraps it, or installs another allocator: the entry points then do what std does.
    ///
    /// ```
    /// // This doctest does not call `install!`: the entry points use the global allocator.
    /// assert!(!specalloc_runtime::spec::installed());
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
    /// The program's `#[global_allocator]` must be [`SpecAlloc`](crate::SpecAlloc) itself, not
    /// a wrapper around it nor another allocator: blocks from the routines are freed by the
    /// global allocator's `dealloc`, which must be specalloc's.
    #[doc(hidden)]
    pub unsafe fn __declare_global_allocator() {
        INSTALLED.store(true, Ordering::Relaxed);
    }
}

/// Defines the constructor that sets the run-time mark; [`install!`](crate::install) expands
/// this next to its `#[global_allocator]`. Not public API.
#[cfg(not(specalloc_link_mark))]
#[doc(hidden)]
#[macro_export]
macro_rules! __install_mark {
    () => {
        const _: () = {
            extern "C" fn __specalloc_mark_global_allocator() {
                // SAFETY: the `#[global_allocator]` declared next to this constructor is
                // `SpecAlloc` itself, and a program has only one global allocator.
                unsafe { $crate::__declare_global_allocator() }
            }
            #[used]
            #[cfg_attr(windows, unsafe(link_section = ".CRT$XCU"))]
            #[cfg_attr(not(windows), unsafe(link_section = ".init_array"))]
            static __SPECALLOC_MARK: extern "C" fn() = __specalloc_mark_global_allocator;
        };
    };
}
