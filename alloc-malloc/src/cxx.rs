//! C++'s replaceable allocation functions: `operator new` and `operator delete` in all their
//! forms (plain, array, `nothrow`, sized, aligned), under their Itanium C++ ABI names, so that a
//! C++ program's `new` and `delete` come straight here. Without them they reach specalloc
//! through libstdc++'s own operators, which call one another and then `malloc` or `free`
//! through the PLT: `delete[]` with a size passes through three of libstdc++'s functions before
//! `free`, and `new[]` through two before `malloc`, about 30 % of the instructions of a loop of
//! such pairs.
//!
//! A `new` that gets no memory hands the request to the next definition of the same operator
//! in the process (libstdc++'s, found with `dlsym(RTLD_NEXT)`), which tries `malloc` again,
//! calls the program's new-handler between tries, and throws `std::bad_alloc` (or, for the
//! `nothrow` forms, returns null), exactly as the C++ runtime does. The exception passes
//! through this function's frame, so the `new` forms are `extern "C-unwind"` (the library is
//! built with `panic = "unwind"`, the default). Where there is no other definition (a program
//! that links `libspecalloc.a` and libstdc++ statically, whose operators are then these alone),
//! a failed `new` stops the program with a message.
//!
//! Every `delete` form is `free`: a block is found from its address, whatever its size and
//! alignment.

use core::ffi::{c_void, CStr};

use specalloc_runtime::cabi;
use specalloc_runtime::cabi_new::{malloc_or, OnNull};

/// `operator new(size_t)` and `operator new[](size_t)`, as found by [`next`].
type New = unsafe extern "C-unwind" fn(usize) -> *mut c_void;
/// The `nothrow` forms: the size and a `const std::nothrow_t &`.
type NewNothrow = unsafe extern "C-unwind" fn(usize, *const c_void) -> *mut c_void;
/// The aligned forms: the size and a `std::align_val_t`.
type NewAligned = unsafe extern "C-unwind" fn(usize, usize) -> *mut c_void;
/// The aligned `nothrow` forms.
type NewAlignedNothrow = unsafe extern "C-unwind" fn(usize, usize, *const c_void) -> *mut c_void;

/// The next definition of the operator named `name` after this library's (libstdc++'s), for a
/// request this library could not serve; aborts, with a message, when there is none.
#[cold]
#[inline(never)]
fn next(name: &CStr) -> *mut c_void {
    // SAFETY: `RTLD_NEXT` with a NUL-terminated name; `dlsym` reads the name only.
    let f = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if f.is_null() {
        let msg = b"specalloc: operator new failed (out of memory, or an alignment that is not \
                    a power of two), and there is no C++ runtime's operator new to report it\n";
        // SAFETY: writes `msg.len()` bytes of `msg` to stderr; nothing to do if that fails, as
        // the process aborts next.
        unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
        std::process::abort();
    }
    f
}

/// A block of `size` bytes (a unique one for 0), or null: the `nothrow` forms'.
#[inline(always)]
fn plain(size: usize) -> *mut c_void {
    cabi::malloc(size).cast()
}

/// A block of `size` bytes aligned to `align`, or null (also when `align` is not a power of
/// two, which the next definition then refuses with `std::bad_alloc`, as libstdc++ does).
#[inline(always)]
fn aligned(size: usize, align: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        return core::ptr::null_mut();
    }
    cabi::memalign(align, size).cast()
}

/// The next definition of the operator `$name` (see [`next`]), as a function pointer of the
/// type the caller names. Unsafe: the caller vouches for that type.
macro_rules! next_of {
    ($name:ident) => {
        core::mem::transmute::<*mut c_void, _>(next(
            const {
                match CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
                    Ok(name) => name,
                    Err(_) => panic!("an operator's name has no NUL inside"),
                }
            },
        ))
    };
}

macro_rules! new_forms {
    ($($(#[$doc:meta])* $name:ident: $ty:ident ($($arg:ident: $t:ty),*) => $get:expr;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// Called as C++ calls it (a `new` expression or a direct call), with a valid
        /// `std::nothrow_t` reference where the form takes one; the block is released with one
        /// of the `delete` forms (or `free`).
        #[no_mangle]
        pub unsafe extern "C-unwind" fn $name($($arg: $t),*) -> *mut c_void {
            let p = $get;
            if !p.is_null() {
                return p;
            }
            // SAFETY: the next definition of this same operator has this signature (the
            // Itanium ABI's name fixes it), and our caller's contract is its own.
            unsafe {
                let f: $ty = next_of!($name);
                f($($arg),*)
            }
        }
    )*};
}

/// The plain forms: [`malloc_or`] (`malloc`'s hit, no frame), whose null goes to the next
/// definition of the operator (`$next` is the [`OnNull`] that calls it).
macro_rules! plain_forms {
    ($($(#[$doc:meta])* $name:ident: $next:ident;)*) => {$(
        struct $next;

        impl OnNull for $next {
            fn on_null(size: usize) -> *mut u8 {
                // SAFETY: the next definition of this same operator has this signature (the
                // Itanium ABI's name fixes it); any size is valid.
                unsafe {
                    let f: New = next_of!($name);
                    f(size).cast()
                }
            }
        }

        $(#[$doc])*
        ///
        /// # Safety
        /// Called as C++ calls it; the block is released with one of the `delete` forms (or
        /// `free`).
        #[no_mangle]
        pub unsafe extern "C-unwind" fn $name(size: usize) -> *mut c_void {
            malloc_or::<$next>(size).cast()
        }
    )*};
}

plain_forms! {
    /// `operator new(std::size_t)`.
    _Znwm: NextNew;
    /// `operator new[](std::size_t)`.
    _Znam: NextNewArray;
}

new_forms! {
    /// `operator new(std::size_t, const std::nothrow_t &)`.
    _ZnwmRKSt9nothrow_t: NewNothrow(size: usize, nothrow: *const c_void) => plain(size);
    /// `operator new[](std::size_t, const std::nothrow_t &)`.
    _ZnamRKSt9nothrow_t: NewNothrow(size: usize, nothrow: *const c_void) => plain(size);
    /// `operator new(std::size_t, std::align_val_t)`.
    _ZnwmSt11align_val_t: NewAligned(size: usize, align: usize) => aligned(size, align);
    /// `operator new[](std::size_t, std::align_val_t)`.
    _ZnamSt11align_val_t: NewAligned(size: usize, align: usize) => aligned(size, align);
    /// `operator new(std::size_t, std::align_val_t, const std::nothrow_t &)`.
    _ZnwmSt11align_val_tRKSt9nothrow_t: NewAlignedNothrow(
        size: usize, align: usize, nothrow: *const c_void
    ) => aligned(size, align);
    /// `operator new[](std::size_t, std::align_val_t, const std::nothrow_t &)`.
    _ZnamSt11align_val_tRKSt9nothrow_t: NewAlignedNothrow(
        size: usize, align: usize, nothrow: *const c_void
    ) => aligned(size, align);
}

macro_rules! delete_forms {
    ($($(#[$doc:meta])* $name:ident($($arg:ident: $t:ty),*);)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// `p` is null or a live block from this allocator (from any `new` form or the `malloc`
        /// family), not used afterwards.
        #[no_mangle]
        pub unsafe extern "C" fn $name(p: *mut c_void, $($arg: $t),*) {
            // SAFETY: forwarded from the caller.
            unsafe { cabi::free(p.cast()) }
        }
    )*};
}

delete_forms! {
    /// `operator delete(void *)`.
    _ZdlPv();
    /// `operator delete[](void *)`.
    _ZdaPv();
    /// `operator delete(void *, std::size_t)`.
    _ZdlPvm(_size: usize);
    /// `operator delete[](void *, std::size_t)`.
    _ZdaPvm(_size: usize);
    /// `operator delete(void *, const std::nothrow_t &)`.
    _ZdlPvRKSt9nothrow_t(_nothrow: *const c_void);
    /// `operator delete[](void *, const std::nothrow_t &)`.
    _ZdaPvRKSt9nothrow_t(_nothrow: *const c_void);
    /// `operator delete(void *, std::align_val_t)`.
    _ZdlPvSt11align_val_t(_align: usize);
    /// `operator delete[](void *, std::align_val_t)`.
    _ZdaPvSt11align_val_t(_align: usize);
    /// `operator delete(void *, std::size_t, std::align_val_t)`.
    _ZdlPvmSt11align_val_t(_size: usize, _align: usize);
    /// `operator delete[](void *, std::size_t, std::align_val_t)`.
    _ZdaPvmSt11align_val_t(_size: usize, _align: usize);
    /// `operator delete(void *, std::align_val_t, const std::nothrow_t &)`.
    _ZdlPvSt11align_val_tRKSt9nothrow_t(_align: usize, _nothrow: *const c_void);
    /// `operator delete[](void *, std::align_val_t, const std::nothrow_t &)`.
    _ZdaPvSt11align_val_tRKSt9nothrow_t(_align: usize, _nothrow: *const c_void);
}

/// Every operator above, for [`crate::KEEP`].
pub(crate) const FNS: [*const (); 20] = [
    _Znwm as *const (),
    _Znam as *const (),
    _ZnwmRKSt9nothrow_t as *const (),
    _ZnamRKSt9nothrow_t as *const (),
    _ZnwmSt11align_val_t as *const (),
    _ZnamSt11align_val_t as *const (),
    _ZnwmSt11align_val_tRKSt9nothrow_t as *const (),
    _ZnamSt11align_val_tRKSt9nothrow_t as *const (),
    _ZdlPv as *const (),
    _ZdaPv as *const (),
    _ZdlPvm as *const (),
    _ZdaPvm as *const (),
    _ZdlPvRKSt9nothrow_t as *const (),
    _ZdaPvRKSt9nothrow_t as *const (),
    _ZdlPvSt11align_val_t as *const (),
    _ZdaPvSt11align_val_t as *const (),
    _ZdlPvmSt11align_val_t as *const (),
    _ZdaPvmSt11align_val_t as *const (),
    _ZdlPvSt11align_val_tRKSt9nothrow_t as *const (),
    _ZdaPvSt11align_val_tRKSt9nothrow_t as *const (),
];
