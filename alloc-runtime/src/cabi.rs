//! Pointer-only operations, for C's `malloc` family (the `specalloc-capi` crate builds
//! `libspecalloc.so` and the facade's `override` feature on these).
//!
//! C frees and resizes a block knowing only its address, where Rust passes the `Layout` back.
//! The address is enough:
//!
//! - Blocks of a size class and medium objects (a page run, up to 1 MiB) live in a 4 MiB chunk,
//!   whose header starts the chunk: no block is ever at a chunk's first byte, and masking the
//!   address finds the header, whose page map gives the span (its class, or its page count).
//! - Huge objects made here (over 1 MiB, or aligned above 256 KiB) are aligned to the chunk size
//!   ([`CHUNK_SIZE`]): exactly the addresses no chunk-backed block has. Their header page, just
//!   before them, holds the length of their run of pages (carved from the huge heap's free runs,
//!   or mapped for them). A medium object aligned above a page is a page run
//!   starting at a multiple of its alignment, never at a chunk's first page (the header's).
//!
//! Alignment: every block is aligned to 16 bytes when the request is 16 bytes or more, to 8
//! below (as jemalloc and mimalloc give; C programs tag the low bits of pointers). A request
//! of 0 bytes gets a unique 8-byte block. The tiny class (4-byte blocks) is never used here;
//! a tiny block a Rust layout asked for can still be freed, resized and measured here.
//!
//! Size classes: a request of up to 32 KiB (the largest class) finds its class with one table
//! load (by 8 bytes up to 1 KiB, by 128 above) and takes the thread's fast path, as a Rust
//! allocation of a known layout does; larger ones take the general path (page runs, huge
//! objects).
//!
//! Nothing here allocates, panics or takes a lock the fast paths do not: these functions run
//! inside `malloc`. Failure is a null return. [`malloc`] and [`calloc`] also set `errno` to
//! `ENOMEM` then, themselves, so that every call their fast paths make is a tail call (no stack
//! frame to set up); for the others, setting `errno` is the caller's part. A call that returns a
//! block leaves `errno` as it found it, though a system call inside it failed first (a roomier
//! first try, a mapping refused until the freed huge blocks kept for reuse are given back): the
//! paths that can make one save and restore it; the fast paths make none.
//!
//! Huge objects from Rust's `GlobalAlloc` (aligned to a page, not to a chunk) must not be
//! passed here, nor blocks of any other allocator.

use core::alloc::Layout;
use core::ptr;
use core::sync::atomic::Ordering;

use crate::chunk::span_of;
use crate::heap::CACHE_SIZE;
use crate::large::{self, MEDIUM_ALIGN_MAX, MEDIUM_MAX};
use crate::os::KeepErrno;
use crate::size_class::{route, Route, CHUNK_SIZE, MAX_SMALL_SIZE, PAGE_SIZE};
use crate::span::{span_block_size, Span, STATE_LARGE, TINY_CLASS, TINY_SIZE};

/// The alignment every C block of `size` bytes gets: 16 from 16 bytes up, else 8.
#[inline(always)]
pub const fn default_align(size: usize) -> usize {
    if size >= 16 {
        16
    } else {
        8
    }
}

/// The largest request served: bigger ones fail (leaving room to round up to any alignment
/// without overflow).
const MAX_REQUEST: usize = isize::MAX as usize - 2 * CHUNK_SIZE;

/// Allocates `size` bytes (at least 1) aligned to `align` (a power of two, at least the
/// [`default_align`] of `size`); zeroed when `zero`. Null when the OS refuses memory or the
/// size is impossible.
#[inline(always)]
fn alloc_aligned(size: usize, align: usize, zero: bool) -> *mut u8 {
    debug_assert!(align.is_power_of_two() && align >= default_align(size));
    if size <= MEDIUM_MAX && align <= MEDIUM_ALIGN_MAX {
        // SAFETY: `align` is a power of two and `size` rounded up to it fits in `isize`.
        let layout = unsafe { Layout::from_size_align_unchecked(size, align) };
        return if zero {
            crate::alloc_zeroed(layout)
        } else {
            crate::alloc(layout)
        };
    }
    if size > MAX_REQUEST || align > MAX_REQUEST {
        return ptr::null_mut();
    }
    // A run of pages from the huge heap, aligned to a chunk so that `free` can tell it from a
    // block.
    large::alloc_huge_aligned(size, align.max(CHUNK_SIZE), zero)
}

/// Requests up to this size (1 KiB) take [`C_CLASS`]: one table load to their size class.
const C_SMALL_MAX: usize = 1024;

/// The size class of a C request of 1 to 1,024 bytes at its [`default_align`], by
/// `(size + 7) / 8`: the class [`route`] gives every size of the bucket (checked below), so
/// that `malloc` skips the general router (the alignment, the tiny test, the two tables). The
/// entry points read it as `(size - 1) / 8 + 1`, reusing the `size - 1` of their range test
/// (the `+ 1` goes into the load's displacement).
const C_CLASS: [u8; C_SMALL_MAX / 8 + 1] = {
    let mut t = [0u8; C_SMALL_MAX / 8 + 1];
    let mut size = 1;
    while size <= C_SMALL_MAX {
        let Route::Small(class) = route(size, default_align(size)) else {
            panic!("a C request of at most 1 KiB is not small");
        };
        let i = size.div_ceil(8);
        assert!(
            t[i] == 0 || t[i] as usize == class,
            "a bucket spans two classes"
        );
        t[i] = class as u8;
        size += 1;
    }
    t
};

/// [`C_CLASS`] as the offsets of the classes' caches in a thread's heap (`class *`
/// [`CACHE_SIZE`]), which the fast path reads directly: the caches are not a power of two
/// apart, so the class would take two instructions more on every hit to become one.
static C_CACHE: [u16; C_SMALL_MAX / 8 + 1] = cache_offsets(C_CLASS);

/// A table of classes as the offsets of their caches, each checked to fit.
const fn cache_offsets<const N: usize>(classes: [u8; N]) -> [u16; N] {
    let mut t = [0u16; N];
    let mut i = 0;
    while i < N {
        let offset = classes[i] as usize * CACHE_SIZE;
        assert!(
            offset <= u16::MAX as usize,
            "a class cache's offset does not fit 16 bits"
        );
        t[i] = offset as u16;
        i += 1;
    }
    t
}

/// Requests of 1,025 bytes to [`MAX_SMALL_SIZE`] (32 KiB) take [`C_CLASS_MEDIUM`] by
/// `(size - 1,025) / 128`: the size classes there are 128-byte multiples.
const C_MEDIUM_STEP: usize = 128;

/// The least request [`C_CLASS_MEDIUM`] serves.
const C_MEDIUM_MIN: usize = C_SMALL_MAX + 1;

/// The size class of a C request of 1,025 bytes to [`MAX_SMALL_SIZE`] at its [`default_align`]:
/// the class [`route`] gives every size of the bucket (checked below), so that `malloc` and
/// `calloc` of these sizes take the fast path as smaller ones do, without the general router
/// (the alignment, the medium test, the tables) and without keeping `errno` around a hit,
/// which makes no system call.
const C_CLASS_MEDIUM: [u8; (MAX_SMALL_SIZE - C_MEDIUM_MIN) / C_MEDIUM_STEP + 1] = {
    let mut t = [0u8; (MAX_SMALL_SIZE - C_MEDIUM_MIN) / C_MEDIUM_STEP + 1];
    let mut size = C_MEDIUM_MIN;
    while size <= MAX_SMALL_SIZE {
        let Route::Small(class) = route(size, default_align(size)) else {
            panic!("a C request of at most 32 KiB is not small");
        };
        let i = (size - C_MEDIUM_MIN) / C_MEDIUM_STEP;
        assert!(
            t[i] == 0 || t[i] as usize == class,
            "a bucket spans two classes"
        );
        t[i] = class as u8;
        size += 1;
    }
    t
};

/// [`C_CLASS_MEDIUM`] as the offsets of the classes' caches (see [`C_CACHE`]).
static C_CACHE_MEDIUM: [u16; (MAX_SMALL_SIZE - C_MEDIUM_MIN) / C_MEDIUM_STEP + 1] =
    cache_offsets(C_CLASS_MEDIUM);

/// The offset of the class cache for `size` ([`C_CACHE_MEDIUM`]), or `None` outside 1,025
/// bytes to 32 KiB.
#[inline(always)]
fn c_medium_cache(size: usize) -> Option<usize> {
    let above = size.wrapping_sub(C_MEDIUM_MIN);
    // In bounds whenever the test holds, which the compiler sees: no check of its own.
    (above <= MAX_SMALL_SIZE - C_MEDIUM_MIN).then(|| C_CACHE_MEDIUM[above / C_MEDIUM_STEP] as usize)
}

/// `malloc(size)`: a block of at least `size` bytes (a unique one for 0), aligned to
/// [`default_align`]. Null, with `errno` set to `ENOMEM`, when the OS refuses memory or `size`
/// is impossible.
///
/// ```
/// let p = specalloc_runtime::cabi::malloc(24);
/// assert!(!p.is_null() && p as usize % 16 == 0);
/// // SAFETY: `p` came from `cabi::malloc` and is freed once.
/// unsafe {
///     assert!(specalloc_runtime::cabi::usable_size(p) >= 24);
///     specalloc_runtime::cabi::free(p);
/// }
/// ```
#[inline]
pub fn malloc(size: usize) -> *mut u8 {
    malloc_with(
        size,
        |class, size, zeroed| small_miss(size, class, zeroed),
        |size| alloc_big::<false>(size),
    )
}

/// [`malloc`] with its misses given, each called in tail position: `small(class, size,
/// zeroed)` where the small fast path finds no block, `big(size)` for the sizes past it (C++'s
/// `operator new` gives its own, `cabi_new`).
#[inline(always)]
pub(crate) fn malloc_with(
    size: usize,
    small: fn(usize, usize, bool) -> *mut u8,
    big: fn(usize) -> *mut u8,
) -> *mut u8 {
    let key = size.wrapping_sub(1);
    if key < C_SMALL_MAX {
        // SAFETY: the table holds the offsets of classes of 8 bytes or more.
        return unsafe {
            crate::heap::alloc_small_at::<false>(C_CACHE[(key >> 3) + 1] as usize, size, small)
        };
    }
    big(size)
}

/// The small fast path's miss for [`malloc`] and [`calloc`]: the heap's slow path, and
/// `ENOMEM` if the OS refuses memory. `extern "C"`, so that it cannot unwind, which lets the C
/// entry points (which cannot either) call it in tail position, with no frame of their own.
/// The size comes first, where the entry points have it (their first argument), so that the
/// hit moves no register to keep it for the miss.
#[cold]
#[inline(never)]
pub(crate) extern "C" fn small_miss(size: usize, class: usize, zeroed: bool) -> *mut u8 {
    let p = {
        let _errno = KeepErrno::new();
        crate::heap::alloc_slow(class, size, zeroed)
    };
    enomem_if_null(p)
}

/// [`malloc`] (or, when `ZEROED`, [`calloc`]) above the small fast path's sizes (and of 0
/// bytes): up to 32 KiB the same fast path, by [`C_CACHE_MEDIUM`].
#[inline(never)]
pub(crate) extern "C" fn alloc_big<const ZEROED: bool>(size: usize) -> *mut u8 {
    match c_medium_cache(size) {
        // SAFETY: the table holds the offsets of classes of 8 bytes or more.
        Some(cache) => unsafe {
            crate::heap::alloc_small_at::<ZEROED>(cache, size, |class, size, zeroed| {
                small_miss(size, class, zeroed)
            })
        },
        None => alloc_large::<ZEROED>(size),
    }
}

/// [`alloc_big`] of 0 bytes or over 32 KiB: the general path, which may make system calls, so
/// `errno` is kept around it.
#[inline(never)]
extern "C" fn alloc_large<const ZEROED: bool>(size: usize) -> *mut u8 {
    let size = size.max(1);
    let p = {
        let _errno = KeepErrno::new();
        alloc_aligned(size, default_align(size), ZEROED)
    };
    enomem_if_null(p)
}

/// Sets `errno` to `ENOMEM` when `p` is null; returns `p`.
#[inline(always)]
fn enomem_if_null(p: *mut u8) -> *mut u8 {
    if p.is_null() {
        // SAFETY: `__errno_location` returns this thread's `errno`, valid for writes.
        unsafe { *libc::__errno_location() = libc::ENOMEM };
    }
    p
}

/// `calloc(n, size)`: `n * size` zeroed bytes; null, with `errno` set to `ENOMEM`, when the
/// product overflows or memory is refused.
///
/// ```
/// let p = specalloc_runtime::cabi::calloc(10, 100);
/// // SAFETY: the block is live and 1,000 bytes long.
/// assert!(unsafe { core::slice::from_raw_parts(p, 1000) }.iter().all(|&b| b == 0));
/// assert!(specalloc_runtime::cabi::calloc(usize::MAX, 2).is_null());
/// // SAFETY: `p` came from `cabi::calloc` and is freed once.
/// unsafe { specalloc_runtime::cabi::free(p) };
/// ```
#[inline]
pub fn calloc(n: usize, size: usize) -> *mut u8 {
    let Some(total) = n.checked_mul(size) else {
        return enomem_if_null(ptr::null_mut());
    };
    let key = total.wrapping_sub(1);
    if key < C_SMALL_MAX {
        // SAFETY: the table holds the offsets of classes of 8 bytes or more.
        return unsafe {
            crate::heap::alloc_small_at::<true>(
                C_CACHE[(key >> 3) + 1] as usize,
                total,
                |class, size, zeroed| small_miss(size, class, zeroed),
            )
        };
    }
    alloc_big::<true>(total)
}

/// `aligned_alloc(align, size)`: a block of at least `size` bytes aligned to `align`, which the
/// caller has checked is a power of two. Null when memory is refused; `errno` is left as it was
/// either way.
///
/// ```
/// let p = specalloc_runtime::cabi::memalign(4096, 100);
/// assert!(!p.is_null() && p as usize % 4096 == 0);
/// // SAFETY: `p` came from `cabi::memalign` and is freed once.
/// unsafe { specalloc_runtime::cabi::free(p) };
/// ```
#[inline]
pub fn memalign(align: usize, size: usize) -> *mut u8 {
    debug_assert!(align.is_power_of_two());
    let _errno = KeepErrno::new();
    let size = size.max(1);
    alloc_aligned(size, align.max(default_align(size)), false)
}

/// What a block is, found from its address alone.
enum Kind<'a> {
    /// A block of a size class (or the tiny class) in this span.
    Small(&'a Span),
    /// A medium object: the whole page run of this span.
    Medium(&'a Span),
    /// A huge object (a run of pages of the huge heap).
    Huge,
}

/// Finds what `p` is.
///
/// # Safety
/// `p` is a live block from this module, or a live chunk-backed block from the `GlobalAlloc`
/// entry points.
#[inline(always)]
unsafe fn kind_of<'a>(p: *mut u8) -> Kind<'a> {
    if (p as usize).is_multiple_of(CHUNK_SIZE) {
        return Kind::Huge;
    }
    // SAFETY: a block not at a chunk boundary is chunk-backed (module docs), so its span
    // descriptor is valid while it lives.
    let s = unsafe { &*span_of(p) };
    // A medium object's span has class 0, a size class's never: the class byte, which the free
    // reads anyway, tells them apart (the state byte would be one more load, on a line of its
    // own).
    if s.class.get() == 0 {
        debug_assert_eq!(s.state.load(Ordering::Relaxed), STATE_LARGE);
        Kind::Medium(s)
    } else {
        Kind::Small(s)
    }
}

/// Checked mode: validates a free (foreign pointers, double frees and interior pointers abort
/// with the checked mode's report) before [`free`] reads anything through `p`: its span only
/// once `p` is known to be in one of our chunks, a huge object's header only once its page is
/// known to be mapped.
#[cfg(feature = "checked")]
fn check_free(p: *mut u8) {
    crate::checked::on_c_free(p, || large::huge_is_live(p));
}

/// Checked mode: validates the block `realloc` or `malloc_usable_size` is given, as
/// [`check_free`] does, before anything is read through it; the block stays live.
#[cfg(feature = "checked")]
fn check_use(p: *mut u8) {
    crate::checked::on_c_use(p, || large::huge_is_live(p));
}

/// `free(p)`: frees a block; null does nothing.
///
/// # Safety
/// `p` is null, or a live block from [`malloc`], [`calloc`], [`memalign`] or [`realloc`] (or a
/// live chunk-backed block from the `GlobalAlloc` entry points: anything but a huge object),
/// not used after this call.
///
/// Out of line in builds without optimisation (`dev`), where inlining it into `realloc` and the
/// other entry points would only add its locals to their stack frames.
#[cfg_attr(not(specalloc_out_of_line), inline(always))]
#[cfg_attr(specalloc_out_of_line, inline(never))]
pub unsafe fn free(p: *mut u8) {
    #[cfg(feature = "checked")]
    if !p.is_null() {
        check_free(p);
    }
    // `kind_of`, with the common case tested first: a class of 8 bytes or more. Null is at a
    // chunk boundary too, so that one test sends both off the path of the blocks of spans.
    if (p as usize).is_multiple_of(CHUNK_SIZE) {
        if p.is_null() {
            return;
        }
        // SAFETY: a huge object (module docs), freed once.
        return unsafe { free_big(p, MEDIUM_MAX + 1, CHUNK_SIZE) };
    }
    // SAFETY: a block not at a chunk boundary is chunk-backed (module docs), so its span
    // descriptor is valid while it lives.
    let s = unsafe { &*span_of(p) };
    let class = s.class.get() as usize;
    // SAFETY: the class says what `p` is; each path frees a block of that kind once.
    unsafe {
        if class.wrapping_sub(1) < TINY_CLASS - 1 {
            crate::heap::free_small(p)
        } else if class == 0 {
            free_big(p, s.large_size.get(), PAGE_SIZE)
        } else {
            crate::heap::free_tiny(p)
        }
    }
}

/// [`free`] of a medium or huge object: `extern "C"` (it cannot unwind), so that `free` calls
/// it in tail position, with no frame of its own.
///
/// # Safety
/// As for [`large::free_large`].
#[inline(never)]
unsafe extern "C" fn free_big(p: *mut u8, size: usize, align: usize) {
    // SAFETY: forwarded.
    unsafe { large::free_large(p, size, align) }
}

/// `malloc_usable_size(p)`: the bytes of the block at `p`, all usable (at least what was
/// asked); 0 for null.
///
/// # Safety
/// As for [`free`], except that the block stays live.
#[inline]
pub unsafe fn usable_size(p: *mut u8) -> usize {
    if p.is_null() {
        return 0;
    }
    #[cfg(feature = "checked")]
    check_use(p);
    // SAFETY: the caller's guarantee.
    match unsafe { kind_of(p) } {
        Kind::Small(s) => span_block_size(s.class.get() as usize),
        Kind::Medium(s) => s.npages.get() as usize * PAGE_SIZE,
        // SAFETY: a live huge object.
        Kind::Huge => unsafe { large::huge_usable(p) },
    }
}

/// `realloc(p, size)` for a live `p` and `size > 0`: resizes in place when the block stays in
/// its size class, or is a page run or a huge object at most twice as big as needed; a huge
/// object that stays huge grows into the free pages behind it, or moves its pages (`mremap`),
/// not its bytes; anything else is copied to a new block. A page run or a huge object that
/// grows gets room for half as much again (a
/// buffer grown by small appends, as readers of input of unknown length grow theirs, then moves
/// a logarithmic number of times instead of once per page; the room costs address space, not
/// memory, until it is written). Null when memory is refused, with `p` untouched and still
/// live; `errno` is left as it was either way (a roomier first try that was refused included).
///
/// ```
/// let p = specalloc_runtime::cabi::malloc(10);
/// // SAFETY: `p` is live; after `realloc` only the result is used, and freed once.
/// unsafe {
///     p.write_bytes(7, 10);
///     let q = specalloc_runtime::cabi::realloc(p, 100_000);
///     assert_eq!(*q.add(9), 7);
///     specalloc_runtime::cabi::free(q);
/// }
/// ```
///
/// # Safety
/// As for [`free`]; on success the old pointer must not be used any more (unless it was
/// returned).
pub unsafe fn realloc(p: *mut u8, size: usize) -> *mut u8 {
    debug_assert!(!p.is_null() && size > 0);
    #[cfg(feature = "checked")]
    check_use(p);
    // (The paths below that can make a system call keep `errno`: a successful call leaves it
    // as it was, though a roomier first try failed.)
    // SAFETY: the caller's guarantee.
    let old = match unsafe { kind_of(p) } {
        Kind::Small(s) => {
            let class = s.class.get() as usize;
            if class == TINY_CLASS {
                if size <= TINY_SIZE {
                    return p;
                }
            } else if size <= MAX_SMALL_SIZE
                && route(size, default_align(size)) == Route::Small(class)
            {
                return p;
            }
            span_block_size(class)
        }
        Kind::Medium(s) => match medium_in_place(p, s, size) {
            Ok(q) => return q,
            Err(bytes) => bytes,
        },
        // SAFETY: a live huge object (the caller's guarantee).
        Kind::Huge => match unsafe { huge_in_place(p, size) } {
            Ok(q) => return q,
            Err(body) => body,
        },
    };
    let mut q = ptr::null_mut();
    if size > old && size > MAX_SMALL_SIZE {
        let roomy = size.max(old.saturating_add(old / 2));
        if roomy <= MAX_REQUEST {
            // (Its `ENOMEM` is not this call's when the exact size is granted below; `malloc`
            // keeps `errno` when it succeeds.)
            let _errno = KeepErrno::new();
            q = malloc(roomy);
        }
    }
    if q.is_null() {
        q = malloc(size);
    }
    if q.is_null() {
        return q;
    }
    // SAFETY: both blocks are live and distinct, `old` and at least `size` bytes long; `p` is
    // freed once, after the copy.
    unsafe {
        ptr::copy_nonoverlapping(p, q, old.min(size));
        free(p);
    }
    q
}

/// [`realloc`] of a medium object (a page run): `Ok` with the block when it stays in place (or
/// grows into the free pages after it), else `Err` with its bytes, to be copied. Out of line, so
/// that its locals are not in `realloc`'s frame when it serves another kind (a debug build keeps
/// every local of a function in its frame).
#[inline(never)]
fn medium_in_place(p: *mut u8, s: &Span, size: usize) -> Result<*mut u8, usize> {
    let bytes = s.npages.get() as usize * PAGE_SIZE;
    #[cfg(feature = "profiling")]
    let old = s.large_size.get();
    if size > MAX_SMALL_SIZE && size <= bytes && size > bytes / 2 {
        s.large_size.set(size);
        #[cfg(feature = "profiling")]
        large::resampled(p, old, size, true);
        return Ok(p);
    }
    // Growing within the page runs: into the free pages right after it, with room for
    // half as much again when they are free (as `realloc` gives a moved block), else just
    // enough.
    if size > bytes && size <= MEDIUM_MAX {
        let _errno = KeepErrno::new();
        let roomy = size.max(bytes + bytes / 2).min(MEDIUM_MAX);
        if large::grow_medium(s, large::medium_pages(roomy))
            || large::grow_medium(s, large::medium_pages(size))
        {
            s.large_size.set(size);
            #[cfg(feature = "profiling")]
            large::resampled(p, old, size, true);
            return Ok(p);
        }
    }
    Err(bytes)
}

/// [`realloc`] of a huge object: `Ok` with the block when it stays, is resized in place or had
/// its pages moved, else `Err` with its usable bytes, to be copied. Out of line, as
/// [`medium_in_place`].
///
/// # Safety
/// `p` is a live huge object of this allocator; on `Ok` only the result is used.
#[inline(never)]
unsafe fn huge_in_place(p: *mut u8, size: usize) -> Result<*mut u8, usize> {
    // SAFETY: a live huge object.
    let body = unsafe { large::huge_usable(p) };
    // (Also below the huge sizes: a buffer that grew past them with room to spare, and
    // is asked for a little more, stays; copying it back to a page run just below
    // would move it at each step.)
    if size <= body && size > body / 2 {
        #[cfg(feature = "profiling")]
        // SAFETY: a live huge object; its header records the size last asked.
        unsafe {
            large::resampled(p, large::huge_requested(p), size, false);
            large::huge_set_requested(p, size);
        }
        return Ok(p);
    }
    if size > MEDIUM_MAX {
        let _errno = KeepErrno::new();
        // In place, into the free runs behind it, or by moving its pages, not its
        // bytes (with room to grow, when growing).
        let roomy = if size > body {
            size.max(body.saturating_add(body / 2))
        } else {
            size
        };
        for want in [roomy, size] {
            if want <= MAX_REQUEST {
                // SAFETY: a live huge object from `alloc_aligned`, chunk-aligned; on
                // success only the result is used.
                if let Some(q) = unsafe { large::resize_huge_aligned(p, want, CHUNK_SIZE) } {
                    return Ok(q);
                }
            }
        }
    }
    Err(body)
}
