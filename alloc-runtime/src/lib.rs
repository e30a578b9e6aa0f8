//! The specalloc runtime: a thread-safe, general-purpose size-class allocator.
//!
//! Install it as the global allocator:
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
//!
//! let v: Vec<u64> = (0..1000).collect();
//! assert_eq!(v.iter().sum::<u64>(), 499_500);
//! ```
//!
//! # Design
//!
//! Memory flows one way: OS → page heap → central pools → thread heaps → routines → entry points.
//!
//! - **Size classes**: Go's 67 classes from 8 B to 32 KiB on 8 KiB pages, as a `const` table with
//!   a `const fn` lookup ([`size_class`]); spans are Go's scaled to at least 64 KiB.
//! - **Chunks**: 4 MiB mappings aligned to 4 MiB. Masking a pointer finds its chunk header, whose
//!   page map gives the span: O(1), no lock.
//! - **Thread heaps**: each thread allocates from its own current span per class, with no atomic
//!   and no lock on the fast path, and frees into spans it owns the same way.
//! - **Cross-thread frees** go to the span's atomic remote list and are collected by the owner on
//!   its slow path; a span parked full asks for a notification of its next remote free.
//! - **Thread exit**: a pthread-key destructor hands the thread's spans on: empty ones to the page
//!   heap, the others to their class's central pool, where refills adopt them.
//! - **Large objects**: up to 1 MiB a page run of the page heap; above, a mapping of their own,
//!   resized with `mremap`.
//! - **Statistics**: [`stats()`], per-thread counters merged on read.
//!
//! Every failure to get memory from the OS returns null; nothing already handed out is touched.
//!
//! # Platform support
//!
//! Linux on x86_64 and aarch64 only: the runtime maps memory with `mmap`, resizes huge objects
//! with the Linux-only `mremap`, and gives pages back with `madvise(MADV_FREE)` and
//! `madvise(MADV_DONTNEED)` (and marks small heaps `MADV_NOHUGEPAGE`). Any other target fails
//! to compile with a message saying so.
//!
//! # Operations
//!
//! - [`stats()`]: a snapshot of the allocator's counters; it prints human-readable
//!   (`Display`), and with the `serde` feature it serializes (to JSON, for example).
//! - [`collect()`]: returns the calling thread's empty spans, the page heap's free pages and
//!   the free pages of freed huge objects to the OS now, and says how much.
//! - [`set_large_cache_percent`]: the bound of the resident pages of freed huge objects.
//! - [`set_page_policy`]: how long freed memory stays resident before it goes back to the OS.
//!
//! # Cargo features
//!
//! | feature | effect |
//! | --- | --- |
//! | `checked` | double frees, foreign pointers and frees with the wrong `Layout` abort at once with a message naming the fault and the address |
//! | `no-size-specialized` | every size-specialised entry point ([`spec`], and the macros built on it) takes the generic path, like Go's `GOEXPERIMENT=nosizespecializedmalloc`; cargo unifies features, so it applies to the whole build |
//! | `serde` | `serde::Serialize` and `serde::Deserialize` for [`Stats`] and [`ClassStats`] |
//!
//! None is on by default. (`test-hooks` exists for this repository's fork tests only.)
//!
//! # Environment variables
//!
//! | variable | read | effect |
//! | --- | --- | --- |
//! | `SPECALLOC_LARGE_CACHE_PERCENT` | at the first huge (over 1 MiB) free or allocation | bound of the resident pages of freed huge objects kept for reuse, in percent of the bytes in use, at least 4 MiB or what the recent peak accounts for (default 100; 0 returns them at once); [`set_large_cache_percent`] overrides it |
//! | `SPECALLOC_PURGE_DELAY_MS` | at the first page-heap operation | ms a freed page stays resident and untouched before `MADV_FREE` (default 100; 0: at once); [`set_page_policy`] overrides it |
//! | `SPECALLOC_DECOMMIT_DELAY_MS` | at the first page-heap operation | ms a page stays advised with `MADV_FREE` before `MADV_DONTNEED`, and the window of the recent peak (default 1000; 0: `MADV_DONTNEED` at once) |
//! | `SPECALLOC_HUGE_PAGES` | at the first page-heap operation | `1`: `MADV_HUGEPAGE` for chunks mapped once the heap is over 64 MiB (default 0) |
//!
//! These are the only variables the allocator reads. See [`PagePolicy`] for the page-return
//! policy and its trade-off between RSS and page faults.
//!
//! # Debug builds
//!
//! In a build of cargo's `dev` profile (or any profile that inherits from it, like `test`), the
//! runtime is compiled without optimisation too. On x86_64 Linux the hits of the allocation and
//! free fast paths (`GlobalAlloc::alloc` and `dealloc`, and the size-specialised entry points'
//! pop) are then written in assembly, the same instructions at every optimisation level: an
//! alloc+free pair costs fewer instructions than glibc's `malloc` and `free` with no change to
//! the user's profiles. Everything else (refills, frees into other threads' spans, large
//! objects, `realloc`, `alloc_zeroed`, the C entry points) is the Rust code compiled at the
//! runtime's level; these lines in the user's `Cargo.toml` make it all faster (the fast paths
//! are then the optimised Rust ones, shorter still):
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

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
compile_error!(
    "specalloc supports Linux on x86_64 and aarch64 only (it relies on mmap, mremap and \
     madvise(MADV_DONTNEED/MADV_NOHUGEPAGE)); this target is not supported"
);

pub mod cabi;
pub mod cabi_new;
#[cfg(feature = "checked")]
mod checked;
mod chunk;
mod generic;
mod heap;
#[cfg(feature = "test-hooks")]
mod hooks;
mod large;
mod lock;
mod mark;
#[cfg(not(specalloc_link_mark))]
#[doc(hidden)]
pub use mark::__declare_global_allocator;
mod os;
mod policy;
#[cfg(feature = "profiling")]
mod prof;
#[cfg(feature = "profiling")]
pub mod profile;
mod purge;
mod raw;
mod remote;
pub mod routines;
#[cfg(feature = "checked")]
mod side;
pub mod size_class;
mod snapshot;
mod span;
pub mod spec;
mod stats;
/// Test hooks for the fork, heap-footprint, outbox and shared-heap tests (cargo feature
/// `test-hooks`; never in a normal build).
#[cfg(feature = "test-hooks")]
#[doc(hidden)]
pub mod test_hooks {
    pub use crate::heap::{
        hold_lock, thread_heap, DIRECT_FREES, HEAPLESS_FIRST, SHARED_FIRST, SHARED_FROM_THREADS,
    };
    pub use crate::hooks::*;
}

use core::alloc::{GlobalAlloc, Layout};
use core::ptr;

#[cfg(feature = "checked")]
use generic::check_free;
use generic::{alloc_generic, alloc_other, dealloc_generic};
use size_class::{
    class_of_key, class_of_key_medium, class_size, is_tiny, route, route_key, Route, KEY_SMALL_MAX,
    MAX_SMALL_SIZE, TINY_MAX,
};
pub use snapshot::{stats, ClassStats, Stats};

/// The allocator, for `#[global_allocator]`.
///
/// ```
/// use std::alloc::{GlobalAlloc, Layout};
/// let a = specalloc_runtime::SpecAlloc;
/// let layout = Layout::from_size_align(100, 8).unwrap();
/// // SAFETY: the layout is valid and non-zero-sized; the block is freed with it.
/// unsafe {
///     let p = a.alloc_zeroed(layout);
///     assert!(!p.is_null());
///     assert_eq!(*p.add(99), 0);
///     a.dealloc(p, layout);
/// }
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct SpecAlloc;

// SAFETY: every method forwards to the functions below, which return blocks of at least the
// requested size and alignment, never hand out a block twice, and return null on failure.
//
// In `dev`-based builds (`cfg(specalloc_out_of_line)`, build.rs) the methods are compiled here,
// at this crate's opt-level (see "Debug builds" in the crate docs); release builds inline them.
// Where `alloc` and `dealloc` start with the fast paths in assembly (`cfg(specalloc_asm_fast)`,
// `generic/asm.rs`), they are three calls, inlined into the allocator shims at every level.
unsafe impl GlobalAlloc for SpecAlloc {
    #[cfg_attr(all(specalloc_out_of_line, not(specalloc_asm_fast)), inline(never))]
    #[cfg_attr(specalloc_asm_fast, inline(always))]
    #[cfg_attr(not(specalloc_out_of_line), inline)]
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        #[cfg(specalloc_asm_fast)]
        return generic::asm::global_alloc(layout);
        #[cfg(not(specalloc_asm_fast))]
        alloc_generic::<false>(layout) // `alloc`'s body: one call fewer at opt-level 0
    }

    #[cfg_attr(all(specalloc_out_of_line, not(specalloc_asm_fast)), inline(never))]
    #[cfg_attr(specalloc_asm_fast, inline(always))]
    #[cfg_attr(not(specalloc_out_of_line), inline)]
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded from the caller.
        #[cfg(specalloc_asm_fast)]
        unsafe {
            generic::asm::dealloc(ptr, layout.size(), layout.align())
        }
        // SAFETY: forwarded from the caller.
        #[cfg(not(specalloc_asm_fast))]
        unsafe {
            dealloc_generic(ptr, layout)
        }
    }

    #[cfg_attr(specalloc_out_of_line, inline(never))]
    #[cfg_attr(not(specalloc_out_of_line), inline)]
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        alloc_zeroed(layout)
    }

    #[cfg_attr(specalloc_out_of_line, inline(never))]
    #[cfg_attr(not(specalloc_out_of_line), inline)]
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded from the caller.
        unsafe { realloc(ptr, layout, new_size) }
    }
}

/// Allocates a block for `layout` through the generic path (the size class is computed at run
/// time). Returns null when the OS refuses memory. A zero-sized layout gets a real (16-byte)
/// block, which must be freed like any other.
///
/// ```
/// use core::alloc::Layout;
/// let layout = Layout::new::<[u32; 10]>();
/// let p = specalloc_runtime::alloc(layout);
/// assert!(!p.is_null() && p as usize % 4 == 0);
/// // SAFETY: allocated above with this layout, freed once.
/// unsafe { specalloc_runtime::dealloc(p, layout) };
/// ```
#[inline]
pub fn alloc(layout: Layout) -> *mut u8 {
    alloc_generic::<false>(layout)
}

/// Like [`alloc`], but the block reads zero. Memory known to be zero (fresh from the OS) is not
/// cleared again.
///
/// ```
/// use core::alloc::Layout;
/// let layout = Layout::new::<[u64; 64]>();
/// let p = specalloc_runtime::alloc_zeroed(layout);
/// // SAFETY: the block is live and that many bytes long.
/// assert!(unsafe { core::slice::from_raw_parts(p, 512) }.iter().all(|&b| b == 0));
/// // SAFETY: allocated above with this layout, freed once.
/// unsafe { specalloc_runtime::dealloc(p, layout) };
/// ```
#[inline]
pub fn alloc_zeroed(layout: Layout) -> *mut u8 {
    alloc_generic::<true>(layout)
}

/// The generic path fully inlined: like [`alloc`], but the size-class lookup uses `const`
/// tables, so at a call site with a constant layout the compiler folds the lookup and the
/// tiny/small/large dispatch away and inlines the allocation fast path. Faster than the
/// out-of-line call, larger at every call site; the size sweep measures both against the
/// size-specialised routines.
///
/// ```
/// use core::alloc::Layout;
/// let layout = Layout::new::<[u64; 5]>();
/// let p = specalloc_runtime::alloc_inline(layout);
/// assert!(!p.is_null());
/// // SAFETY: allocated above with this layout, freed once.
/// unsafe { specalloc_runtime::dealloc(p, layout) };
/// ```
#[inline(always)]
pub fn alloc_inline(layout: Layout) -> *mut u8 {
    alloc_inline_generic::<false>(layout)
}

/// Zeroing variant of [`alloc_inline`].
///
/// ```
/// use core::alloc::Layout;
/// let layout = Layout::new::<[u64; 5]>();
/// let p = specalloc_runtime::alloc_zeroed_inline(layout);
/// // SAFETY: the block is live and that many bytes long.
/// assert!(unsafe { core::slice::from_raw_parts(p, 40) }.iter().all(|&b| b == 0));
/// // SAFETY: allocated above with this layout, freed once.
/// unsafe { specalloc_runtime::dealloc(p, layout) };
/// ```
#[inline(always)]
pub fn alloc_zeroed_inline(layout: Layout) -> *mut u8 {
    alloc_inline_generic::<true>(layout)
}

#[inline(always)]
fn alloc_inline_generic<const ZEROED: bool>(layout: Layout) -> *mut u8 {
    let (size, align) = (layout.size(), layout.align());
    if is_tiny(size, align) {
        return heap::alloc_tiny::<ZEROED>();
    }
    if size <= MAX_SMALL_SIZE && align <= 16 {
        return heap::alloc_small::<ZEROED>(size_class::class_of_inline(size, align), size);
    }
    alloc_other(size, align, ZEROED)
}

///
/// # Safety
/// `ptr` must have been returned by this allocator for `layout` (or resized to it by
/// [`realloc`]) and not freed since.
#[inline]
pub unsafe fn dealloc(ptr: *mut u8, layout: Layout) {
    // SAFETY: forwarded from the caller.
    unsafe { dealloc_generic(ptr, layout) }
}

/// Resizes a block, in place when the new size stays on the same route (the tiny class, the
/// same size class, or, for large objects, the same page count or a remapping), else by moving
/// it. On failure returns null and leaves the old block untouched.
///
/// # Safety
/// As for [`dealloc`]; `new_size` rounded up to `layout.align()` must not exceed `isize::MAX`.
pub unsafe fn realloc(ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
    let (old, align) = (layout.size(), layout.align());
    #[cfg(feature = "checked")]
    check_free(ptr, old, align, true);
    if align <= 16 && old <= MAX_SMALL_SIZE && new_size <= MAX_SMALL_SIZE {
        // SAFETY: forwarded from the caller; both sizes are small at this alignment.
        return unsafe { realloc_small(ptr, old, align, new_size) };
    }
    let from = route(old, align);
    match from {
        Route::Tiny | Route::Small(_) => {
            if route(new_size, align) == from {
                return ptr;
            }
        }
        Route::Large => {
            if route(new_size, align) == Route::Large {
                // SAFETY: `ptr` is a large object of `layout`.
                if let Some(p) = unsafe { large::realloc_large(ptr, old, align, new_size) } {
                    return p;
                }
            }
        }
    }
    // SAFETY: the caller guarantees the new size is a valid layout size for this alignment.
    let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, align) };
    let q = alloc(new_layout);
    if q.is_null() {
        return q;
    }
    // SAFETY: both blocks are live, distinct, and at least `min(old, new_size)` bytes long.
    unsafe {
        ptr::copy_nonoverlapping(ptr, q, old.min(new_size));
        dealloc(ptr, layout);
    }
    q
}

/// [`realloc`] with both sizes small at `align <= 16`, one copy between the class paths; out of
/// line in `dev` builds, where its locals would sit in `realloc`'s frame, above its refills.
///
/// # Safety
/// As for [`realloc`], with both sizes small.
#[cfg_attr(not(specalloc_out_of_line), inline(always))]
#[cfg_attr(specalloc_out_of_line, inline(never))]
unsafe fn realloc_small(ptr: *mut u8, old: usize, align: usize, new_size: usize) -> *mut u8 {
    let (from, to) = (span_class_of(old, align), span_class_of(new_size, align));
    if from == to {
        return ptr;
    }
    let q = if to == span::TINY_CLASS {
        heap::alloc_tiny::<false>()
    } else {
        heap::alloc_small::<false>(to, new_size)
    };
    if q.is_null() {
        return q;
    }
    // SAFETY: both blocks are live and distinct, at least `min(old, new_size)` bytes long;
    // `ptr` is a block of class `from` (the caller's layout says so), freed once.
    unsafe {
        ptr::copy_nonoverlapping(ptr, q, old.min(new_size));
        #[cfg(feature = "checked")]
        check_free(ptr, old, align, false);
        if from == span::TINY_CLASS {
            heap::free_tiny(ptr);
        } else {
            heap::free_small(ptr);
        }
    }
    q
}

/// The span class serving `size` bytes at `align` (`align <= 16`, `size <= MAX_SMALL_SIZE`): the
/// tiny class or a size class, as [`route`] would say.
#[inline(always)]
fn span_class_of(size: usize, align: usize) -> usize {
    let key = route_key(size, align);
    if key < TINY_MAX {
        span::TINY_CLASS
    } else if key < KEY_SMALL_MAX {
        class_of_key(key)
    } else {
        class_of_key_medium(key)
    }
}

/// Sets the bound of the resident pages of freed huge objects (over 1 MiB) kept for reuse, in
/// percent of the bytes in use (they may always hold 4 MiB, or what the recent peak of the
/// bytes in use accounts for); past it they go back to the OS at once (`MADV_DONTNEED`), and 0
/// returns them as they are freed. The default is 100, or the value of the environment variable
/// `SPECALLOC_LARGE_CACHE_PERCENT` when set. A lower bound trades page faults for RSS when a
/// program replaces large buffers of varying sizes.
///
/// ```
/// specalloc_runtime::set_large_cache_percent(10);
/// specalloc_runtime::set_large_cache_percent(100);
/// ```
pub fn set_large_cache_percent(percent: usize) {
    large::set_cache_percent(percent);
}

pub use policy::PagePolicy;
pub use purge::{background_purge, set_background_purge};

/// The page-return policy in force: how long free pages stay resident before they are advised
/// with `MADV_FREE` and then returned with `MADV_DONTNEED`, and whether chunks of a large heap
/// ask for huge pages (see [`PagePolicy`]).
///
/// ```
/// let p = specalloc_runtime::page_policy();
/// assert!(p.decommit_delay_ms > 0 || std::env::var_os("SPECALLOC_DECOMMIT_DELAY_MS").is_some());
/// ```
pub fn page_policy() -> PagePolicy {
    policy::policy()
}

/// Sets the page-return policy, overriding the environment variables
/// `SPECALLOC_PURGE_DELAY_MS`, `SPECALLOC_DECOMMIT_DELAY_MS` and `SPECALLOC_HUGE_PAGES`. Takes
/// effect at the next page-heap operation (`huge_pages`: for chunks mapped from then on).
///
/// The trade-off: longer delays keep freed memory resident (it counts in the RSS) so that a
/// program that frees and allocates again reuses it without page faults; shorter ones give it
/// back sooner and fault it in again when it is reused. Zero delays return free pages at once,
/// as a strict-RSS setting. Whatever the delays, free memory never stays resident beyond the
/// program's recent peak, and [`collect()`] returns it all at once.
///
/// ```
/// use specalloc_runtime::{page_policy, set_page_policy, PagePolicy};
/// let saved = page_policy();
/// set_page_policy(PagePolicy { purge_delay_ms: 0, decommit_delay_ms: 0, huge_pages: false });
/// assert_eq!(page_policy().decommit_delay_ms, 0);
/// set_page_policy(saved);
/// ```
pub fn set_page_policy(policy: PagePolicy) {
    policy::set_policy(policy);
}

/// What [`collect()`] gave back, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Collected {
    /// Bytes of the calling thread's empty spans, and of the runs of pages it held for its next
    /// spans, handed back to the page heap.
    pub thread_spans: usize,
    /// Bytes of spans that exited threads left with live blocks, all freed since, handed back
    /// to the page heap.
    pub abandoned_spans: usize,
    /// Bytes of free pages of the page heap returned to the OS (`madvise(MADV_DONTNEED)`),
    /// including those of the thread's spans just handed back (and any that other threads'
    /// frees returned meanwhile).
    pub free_pages: usize,
    /// Bytes of the huge heap's free runs (freed huge objects' pages) unmapped.
    pub huge_cache: usize,
}

impl Collected {
    /// Bytes returned to the OS: the free pages plus the unmapped free runs of the huge heap.
    ///
    /// ```
    /// let c = specalloc_runtime::Collected {
    ///     thread_spans: 8192,
    ///     abandoned_spans: 0,
    ///     free_pages: 16384,
    ///     huge_cache: 4096,
    /// };
    /// assert_eq!(c.returned_to_os(), 20480);
    /// ```
    pub fn returned_to_os(&self) -> usize {
        self.free_pages + self.huge_cache
    }
}

/// Returns free memory to the OS now, and says how much: the calling thread's empty spans
/// (kept for reuse, up to 2 MiB per thread, or emptied by other threads' frees), the runs of
/// pages it took for its next spans (up to 256 KiB), and the spans of
/// exited threads whose blocks have all been freed go back to the page heap, every free page of the page heap still resident is released with
/// `madvise(MADV_DONTNEED)`, and the free runs of freed huge objects are unmapped.
///
/// The calling thread's frees into other threads' spans, which it hands over a batch at a time,
/// are handed over first, and every other thread is asked to hand its own over at its next
/// refill or its next free into another span (a thread's exit hands them over too). Until then a
/// batch of at most 4 KiB keeps its span in use: a thread that stops allocating and freeing
/// keeps at most four spans per size class from going back.
///
/// Other threads' heaps are not touched (each thread owns its heap; call `collect()` on each
/// thread that should trim its own). Live objects are never moved or touched. The cost is a scan
/// of the thread's partial spans and of the page heap's bitmaps under its lock, plus the system
/// calls: meant for quiet moments (after a phase, before idling), not for hot loops.
///
/// ```
/// #[global_allocator]
/// static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
///
/// let v: Vec<Box<[u8; 1024]>> = (0..4096).map(|_| Box::new([1u8; 1024])).collect();
/// drop(v);
/// let c = specalloc_runtime::collect();
/// assert_eq!(specalloc_runtime::stats().free_resident, 0);
/// println!("returned {} bytes to the OS", c.returned_to_os());
/// ```
pub fn collect() -> Collected {
    use core::sync::atomic::Ordering::Relaxed;
    let returned = chunk::RETURNED_BYTES.load(Relaxed);
    let thread_spans = heap::trim_thread();
    let abandoned_spans = heap::sweep_abandoned();
    // Handing the spans back may already have returned pages (the page heap's own bound).
    chunk::return_free_pages();
    let free_pages = (chunk::RETURNED_BYTES.load(Relaxed) - returned) as usize;
    let huge_cache = large::release_cache();
    Collected {
        thread_spans,
        abandoned_spans,
        free_pages,
        huge_cache,
    }
}

/// Bytes usable in a block allocated for `layout`: its class size for a size class (4 for the
/// tiny class), the requested size for large ones.
///
/// ```
/// use core::alloc::Layout;
/// assert_eq!(specalloc_runtime::usable_size(Layout::from_size_align(20, 8).unwrap()), 24);
/// assert_eq!(specalloc_runtime::usable_size(Layout::from_size_align(3, 1).unwrap()), 4);
/// assert_eq!(specalloc_runtime::usable_size(Layout::from_size_align(12, 4).unwrap()), 16);
/// ```
pub fn usable_size(layout: Layout) -> usize {
    match route(layout.size(), layout.align()) {
        Route::Tiny => size_class::TINY_MAX,
        Route::Small(class) => class_size(class),
        Route::Large => layout.size(),
    }
}
