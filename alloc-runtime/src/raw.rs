//! The fast paths' loads and stores, written so that they stay single instructions in a build
//! without optimisation (cargo's `dev` profile, where the runtime is compiled at opt-level 0).
//!
//! There every method of std is a real call: `Cell::get`, `AtomicU64::load` (which calls
//! `atomic_load`, which matches on the ordering), `<[T]>::get_unchecked` (with its
//! precondition check). These helpers are `#[inline(always)]`, which rustc honours at every
//! opt-level, and use only casts, dereferences and, in `dev`-based builds on x86_64 and
//! aarch64, one instruction of inline assembly for a relaxed atomic load or store. Optimised
//! builds compile them to what the std calls they replace compile to.

use core::cell::{Cell, UnsafeCell};
#[cfg(not(all(
    specalloc_out_of_line,
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
use core::sync::atomic::Ordering;
use core::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize};

/// `c.get()`.
#[inline(always)]
pub(crate) fn get<T: Copy>(c: &Cell<T>) -> T {
    // A reference, not a raw pointer: a build with debug assertions checks every dereference
    // of a raw pointer for null and alignment, a dozen instructions each.
    // SAFETY: `Cell<T>` has the same layout as `T` (`repr(transparent)` over `UnsafeCell<T>`);
    // `Cell` is `!Sync`, so no other thread accesses it, and the value is read at once, while
    // nothing writes it.
    unsafe { *core::mem::transmute::<&Cell<T>, &T>(c) }
}

/// `c.set(v)` (for `Copy` values: nothing to drop).
#[inline(always)]
pub(crate) fn set<T: Copy>(c: &Cell<T>, v: T) {
    // SAFETY: as in `get`; the pointer comes from the `UnsafeCell` inside the `Cell`
    // (`raw_get`, `#[inline(always)]`), which permits mutation through a shared reference, as
    // `Cell::replace` mutates it (through a unique reference made from it, as here).
    unsafe {
        *as_mut(UnsafeCell::raw_get(
            c as *const Cell<T> as *const UnsafeCell<T>,
        )) = v
    }
}

/// `&*p`, without the null and alignment checks a build with debug assertions puts on every
/// dereference of a raw pointer (a dozen instructions each, on paths of a few dozen).
///
/// # Safety
/// As for `&*p`: `p` is non-null, aligned and points to a valid `T` that nothing writes while
/// the reference lives (but through `UnsafeCell`s inside it).
#[inline(always)]
// `&*p` is what this avoids.
#[allow(clippy::transmute_ptr_to_ref)]
pub(crate) unsafe fn as_ref<'a, T>(p: *const T) -> &'a T {
    // SAFETY: the caller's contract is that of `&*p`, which this is.
    unsafe { core::mem::transmute::<*const T, &'a T>(p) }
}

/// `&mut *p`, without the checks (see [`as_ref`]).
///
/// # Safety
/// As for `&mut *p`: `p` is non-null, aligned, points to a valid `T`, and nothing else accesses
/// it while the reference lives.
#[inline(always)]
#[allow(clippy::transmute_ptr_to_ref)]
pub(crate) unsafe fn as_mut<'a, T>(p: *mut T) -> &'a mut T {
    // SAFETY: the caller's contract is that of `&mut *p`, which this is.
    unsafe { core::mem::transmute::<*mut T, &'a mut T>(p) }
}

/// `&a[i]`, without the bounds check in optimised builds.
///
/// # Safety
/// `i < N`.
#[inline(always)]
pub(crate) unsafe fn at<T, const N: usize>(a: &[T; N], i: usize) -> &T {
    // Without optimisation, indexing is a compare and a branch in line, where
    // `get_unchecked` is a call (and its precondition check another).
    #[cfg(specalloc_out_of_line)]
    return &a[i];
    // SAFETY: `i < N` (the caller's contract), so the element is inside the array.
    #[cfg(not(specalloc_out_of_line))]
    unsafe {
        a.get_unchecked(i)
    }
}

/// A relaxed 64-bit atomic load or store, one `mov` (x86_64) or `ldr`/`str` (aarch64), both
/// single-copy atomic for an aligned word: the assembly does the atomic access itself, as a
/// call to a foreign function could, so it takes part in the memory model as a relaxed one.
#[cfg(all(specalloc_out_of_line, target_arch = "x86_64"))]
macro_rules! word_access {
    (load, $p:expr) => {{
        let v: u64;
        // SAFETY: `$p` points to a live, aligned 8-byte atomic (see above).
        unsafe {
            core::arch::asm!("mov {v}, qword ptr [{p}]", p = in(reg) $p, v = out(reg) v,
                options(nostack, preserves_flags, readonly))
        };
        v
    }};
    (store, $p:expr, $v:expr) => {
        // SAFETY: as above.
        unsafe {
            core::arch::asm!("mov qword ptr [{p}], {v}", p = in(reg) $p, v = in(reg) $v,
                options(nostack, preserves_flags))
        }
    };
}

#[cfg(all(specalloc_out_of_line, target_arch = "aarch64"))]
macro_rules! word_access {
    (load, $p:expr) => {{
        let v: u64;
        // SAFETY: `$p` points to a live, aligned 8-byte atomic (see above).
        unsafe {
            core::arch::asm!("ldr {v}, [{p}]", p = in(reg) $p, v = out(reg) v,
                options(nostack, preserves_flags, readonly))
        };
        v
    }};
    (store, $p:expr, $v:expr) => {
        // SAFETY: as above.
        unsafe {
            core::arch::asm!("str {v}, [{p}]", p = in(reg) $p, v = in(reg) $v,
                options(nostack, preserves_flags))
        }
    };
}

/// `a.load(Relaxed)`.
#[inline(always)]
pub(crate) fn load_u64(a: &AtomicU64) -> u64 {
    #[cfg(all(
        specalloc_out_of_line,
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    return word_access!(load, a as *const AtomicU64);
    #[cfg(not(all(
        specalloc_out_of_line,
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    a.load(Ordering::Relaxed)
}

/// `a.store(v, Relaxed)`.
#[inline(always)]
pub(crate) fn store_u64(a: &AtomicU64, v: u64) {
    #[cfg(all(
        specalloc_out_of_line,
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    word_access!(store, a as *const AtomicU64, v);
    #[cfg(not(all(
        specalloc_out_of_line,
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    a.store(v, Ordering::Relaxed)
}

/// `a.load(Relaxed)`.
#[inline(always)]
pub(crate) fn load_usize(a: &AtomicUsize) -> usize {
    const _: () = assert!(core::mem::size_of::<usize>() == 8);
    #[cfg(all(
        specalloc_out_of_line,
        any(target_arch = "x86_64", target_arch = "aarch64")
    ))]
    return word_access!(load, a as *const AtomicUsize) as usize;
    #[cfg(not(all(
        specalloc_out_of_line,
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    a.load(Ordering::Relaxed)
}

/// `a.load(Relaxed)` for a 32-bit count: one `mov` (x86_64) or `ldr` (aarch64) in `dev`-based
/// builds, as [`load_u64`].
#[inline(always)]
pub(crate) fn load_u32(a: &AtomicU32) -> u32 {
    #[cfg(all(specalloc_out_of_line, target_arch = "x86_64"))]
    {
        let v: u32;
        // SAFETY: `a` is a live, aligned 4-byte atomic; an aligned `mov` is single-copy atomic.
        unsafe {
            core::arch::asm!("mov {v:e}, dword ptr [{p}]", p = in(reg) a as *const AtomicU32,
                v = out(reg) v, options(nostack, preserves_flags, readonly))
        };
        v
    }
    #[cfg(not(all(specalloc_out_of_line, target_arch = "x86_64")))]
    a.load(core::sync::atomic::Ordering::Relaxed)
}

/// `a.store(v, Release)` for a 32-bit count: one `mov` on x86_64 (whose stores are ordered
/// after earlier ones), in every build.
#[inline(always)]
pub(crate) fn store_u32_release(a: &AtomicU32, v: u32) {
    #[cfg(all(specalloc_out_of_line, target_arch = "x86_64"))]
    // SAFETY: `a` is a live, aligned 4-byte atomic; an aligned `mov` is single-copy atomic and,
    // on x86_64, a release store.
    unsafe {
        core::arch::asm!("mov dword ptr [{p}], {v:e}", p = in(reg) a as *const AtomicU32,
            v = in(reg) v, options(nostack, preserves_flags))
    };
    #[cfg(not(all(specalloc_out_of_line, target_arch = "x86_64")))]
    a.store(v, core::sync::atomic::Ordering::Release)
}
