//! Large objects: everything above the small classes (32 KiB) or more aligned than a page.
//!
//! - *Medium* objects (up to [`MEDIUM_MAX`], at any alignment up to [`MEDIUM_ALIGN_MAX`]) are a
//!   page run of their own from the page heap, starting at a multiple of their alignment, found
//!   again from the pointer through the chunk's page map. A request aligned above the page
//!   costs about what its size costs (a run starts at the next aligned free page), not a
//!   mapping of its own.
//! - *Huge* objects (bigger, or more aligned) are a run of OS pages each, with a one-page header
//!   just before the object, carved from the free runs of the huge heap (`heap.rs`: freed huge
//!   objects, split and merged, decaying like the page heap's free pages) or, when none fits,
//!   from a new mapping (`huge.rs`). They grow into the free runs behind them, or move their
//!   pages with `mremap`, without copying.
//!
//! Which kind a block is follows from its `Layout` alone, which Rust passes on every free.
//!
//! Out of memory: huge mappings are made with [`crate::os::map_placed`] (accounted), so the kernel's
//! overcommit policy refuses what the machine cannot back (as glibc's `malloc` is refused) and
//! the request returns null. When the OS refuses a mapping, the huge heap's free runs are
//! unmapped ([`release_cache`]) and the request is tried once more, so that a capped address
//! space (`RLIMIT_AS`) is not held by memory nobody uses.

use core::ptr;
use core::sync::atomic::Ordering;

use crate::chunk::{self, span_of};
use crate::size_class::PAGE_SIZE;
use crate::span::{ListTag, STATE_LARGE};
use crate::stats;

mod decay;
mod heap;
mod huge;

pub(crate) use decay::{set_cache_percent, CACHE_BYTES, CACHE_LIMIT, CLEAN_BYTES, LAZY_BYTES};
pub(crate) use heap::{cache_trim, release_cache};
pub(crate) use huge::usable as huge_usable;
#[cfg(feature = "checked")]
pub(crate) use huge::{is_live as huge_is_live, layout as huge_layout};
#[cfg(feature = "profiling")]
pub(crate) use huge::{requested as huge_requested, set_requested as huge_set_requested};

/// Largest object served from the page heap (1 MiB); larger ones are mapped on their own.
pub(crate) const MEDIUM_MAX: usize = 1 << 20;

/// The largest alignment of a medium object (256 KiB): beyond it a chunk has few aligned
/// starts (seven at 512 KiB, three at 1 MiB), so that each such object would take most of a
/// chunk and the page heap would scan many for each; those take the huge path.
pub(crate) const MEDIUM_ALIGN_MAX: usize = 256 << 10;

/// Whether a non-small layout is medium (page heap) rather than huge (own mapping).
#[inline]
pub(crate) fn is_medium(size: usize, align: usize) -> bool {
    size <= MEDIUM_MAX && align <= MEDIUM_ALIGN_MAX
}

const _: () = assert!(MEDIUM_MAX <= chunk::MAX_ALIGN_PAGES * PAGE_SIZE);
const _: () = assert!(MEDIUM_ALIGN_MAX <= chunk::MAX_ALIGN_PAGES * PAGE_SIZE);

/// Pages of a medium object of `size` bytes: at least one, so that even a zero-sized object
/// (at an alignment above the small classes') has a run of its own.
#[inline]
pub(crate) fn medium_pages(size: usize) -> usize {
    size.div_ceil(PAGE_SIZE).max(1)
}

/// Allocates a large object. Null when the size is impossible or the OS refuses.
pub(crate) fn alloc_large(size: usize, align: usize, zero: bool) -> *mut u8 {
    #[cfg(feature = "profiling")]
    if crate::prof::draw_large(size) {
        return alloc_large_sampled(size, align, zero);
    }
    if is_medium(size, align) {
        alloc_medium(size, align, zero)
    } else {
        huge::alloc(size, align, align, zero)
    }
}

/// [`alloc_large`] of an allocation the heap profiler samples.
#[cfg(feature = "profiling")]
#[cold]
#[inline(never)]
fn alloc_large_sampled(size: usize, align: usize, zero: bool) -> *mut u8 {
    let medium = is_medium(size, align);
    let p = if medium {
        alloc_medium(size, align, zero)
    } else {
        huge::alloc(size, align, align, zero)
    };
    if p.is_null() {
        return p;
    }
    if let Some(r) = crate::prof::sample(size, size) {
        if medium {
            // SAFETY: a live medium object's run.
            unsafe { &*span_of(p) }.prof.set(r);
        } else {
            // SAFETY: a live huge object.
            unsafe { huge::sampled(p) }.set(r);
        }
    }
    p
}

/// After a resize in place of the large object at `p` (medium when `medium`) from `old` to
/// `new` bytes: its record follows the new size (see [`crate::prof::Sampled::resized`]).
/// While profiling is off, one load and a branch.
#[cfg(feature = "profiling")]
#[inline(always)]
pub(crate) fn resampled(p: *mut u8, old: usize, new: usize, medium: bool) {
    if crate::prof::rate() != 0 {
        resampled_on(p, old, new, medium);
    }
}

/// [`resampled`] while profiling is on.
#[cfg(feature = "profiling")]
#[cold]
#[inline(never)]
fn resampled_on(p: *mut u8, old: usize, new: usize, medium: bool) {
    let record = if medium {
        // SAFETY: a live medium object's run.
        &unsafe { &*span_of(p) }.prof
    } else {
        // SAFETY: a live huge object.
        unsafe { huge::sampled(p) }
    };
    record.resized(old, new);
}

/// A small allocation of `size` bytes the heap profiler sampled (`r`): a page run of its own,
/// whose descriptor holds the record, so that its free (which takes the small path, and finds
/// a large span) knows it without looking anything up. Null, with the record dropped, when
/// the page heap has no run.
#[cfg(feature = "profiling")]
///
/// Skipped (null) while any thread holds the page heap's lock or the huge heap's, which the
/// run's allocation and its free take: the thread may be this one, a signal handler's
/// allocation having interrupted it there, which must not wait for itself (and the handler's
/// free of what it allocated finds them free too, its thread being stopped). Samples skipped
/// because another thread was there at that moment make the estimates a little low under
/// contention.
pub(crate) fn alloc_sampled(size: usize, zero: bool, r: crate::prof::Record) -> *mut u8 {
    if chunk::page_heap_busy() || heap::busy() {
        r.forget();
        return ptr::null_mut();
    }
    let p = alloc_medium(size, PAGE_SIZE, zero);
    if p.is_null() {
        r.forget();
        return p;
    }
    // SAFETY: a live medium object's run.
    unsafe { &*span_of(p) }.prof.set(r);
    p
}

/// A medium object: a page run of its own, starting at a multiple of `align`.
fn alloc_medium(size: usize, align: usize, zero: bool) -> *mut u8 {
    let npages = medium_pages(size);
    let align_pages = align.div_ceil(PAGE_SIZE);
    let Some(run) = chunk::alloc_pages(npages, align_pages, release_cache) else {
        return ptr::null_mut();
    };
    // SAFETY: the page heap handed us this descriptor and its pages.
    let s = unsafe { &*run.span };
    s.class.set(0);
    s.set_tag(ListTag::None);
    s.owner.store(0, Ordering::Relaxed);
    s.large_size.set(size);
    s.state.store(STATE_LARGE, Ordering::Relaxed);
    let p = s.start.get();
    if zero && !run.zero {
        // SAFETY: the run is ours and at least `size` bytes long.
        unsafe { ptr::write_bytes(p, 0, size) };
    }
    stats::large_alloc(npages * PAGE_SIZE);
    #[cfg(feature = "checked")]
    crate::checked::on_alloc(p);
    p
}

/// Grows the medium object of span `s` in place to `npages` pages, taking the free pages right
/// after its run (see [`chunk::extend_pages`]); `false`, with nothing changed, when it has as
/// many already or they are not free.
pub(crate) fn grow_medium(s: &crate::span::Span, npages: usize) -> bool {
    let have = s.npages.get() as usize;
    if npages <= have {
        return false;
    }
    // SAFETY: `s` is a live medium object's run (the caller's), owned by the caller.
    if !unsafe { chunk::extend_pages(s as *const _ as *mut _, npages - have) } {
        return false;
    }
    stats::large_resize(have * PAGE_SIZE, npages * PAGE_SIZE);
    true
}

/// Frees a large object.
///
/// # Safety
/// `p` was returned by [`alloc_large`] (or grown by [`realloc_large`]) for the same size and
/// alignment, and is not used any more.
pub(crate) unsafe fn free_large(p: *mut u8, size: usize, align: usize) {
    if is_medium(size, align) {
        // SAFETY: a medium object is a page run of its own.
        let s = unsafe { &*span_of(p) };
        debug_assert_eq!(s.state.load(Ordering::Relaxed), STATE_LARGE);
        debug_assert_eq!(s.start.get(), p);
        stats::large_free(s.npages.get() as usize * PAGE_SIZE);
        #[cfg(feature = "profiling")]
        s.prof.free();
        // SAFETY: the run holds only this object, which is dead.
        unsafe { chunk::free_pages(s as *const _ as *mut _) };
        cache_trim();
    } else {
        // SAFETY: a huge object, dead (the caller's guarantee).
        unsafe { huge::free(p) };
    }
}

/// Resizes a large object without copying when it can: a medium object that keeps its page
/// count, or a huge object that stays huge (in place, into the free runs behind it, or by
/// moving its pages with `mremap`). `None` means the caller must move it.
///
/// # Safety
/// As for [`free_large`]; on `Some`, the old pointer must not be used any more.
pub(crate) unsafe fn realloc_large(
    p: *mut u8,
    old: usize,
    align: usize,
    new: usize,
) -> Option<*mut u8> {
    let old_medium = is_medium(old, align);
    let new_medium = is_medium(new, align);
    if old_medium && new_medium {
        // SAFETY: a medium object is a page run of its own.
        let s = unsafe { &*span_of(p) };
        if medium_pages(old) == medium_pages(new) || grow_medium(s, medium_pages(new)) {
            s.large_size.set(new);
            #[cfg(feature = "profiling")]
            resampled(p, old, new, true);
            return Some(p);
        }
        return None;
    }
    if old_medium || new_medium {
        return None;
    }
    // SAFETY: a live huge object, placed at a multiple of `align` (the caller's guarantee).
    let q = unsafe { huge::resize(p, new, align) };
    #[cfg(feature = "profiling")]
    if let Some(q) = q {
        resampled(q, old, new, false);
    }
    q
}

/// Holds or releases the huge heap's lock around `fork` (see `heap::fork_*`), and the heap
/// profiler's, which large objects' frees take.
pub(crate) fn fork_lock(take: bool) {
    heap::fork_lock(take);
    #[cfg(feature = "profiling")]
    crate::prof::fork_lock(take);
}

/// For the C API (`cabi.rs`): allocates a huge object at an address that is a multiple of
/// `align` (a power of two, at least the chunk size, so that `free` tells it from a
/// chunk-backed block by its address alone).
pub(crate) fn alloc_huge_aligned(size: usize, align: usize, zero: bool) -> *mut u8 {
    debug_assert!(align.is_power_of_two() && align > PAGE_SIZE);
    let p = huge::alloc(size, align, align, zero);
    #[cfg(feature = "profiling")]
    if !p.is_null() && crate::prof::draw_large(size) {
        if let Some(r) = crate::prof::sample(size, size) {
            // SAFETY: a live huge object.
            unsafe { huge::sampled(p) }.set(r);
        }
    }
    p
}

/// For the C API (`cabi.rs`): resizes the huge object at `p`, which [`alloc_huge_aligned`]
/// placed at a multiple of `align`, to `new` bytes without copying (in place, into the free
/// runs behind it, or by moving its pages to a new multiple of `align`). `None` when it must
/// be copied (the object is then untouched).
///
/// # Safety
/// `p` is a live huge object from [`alloc_huge_aligned`] with this `align`; on `Some` it must
/// not be used any more.
pub(crate) unsafe fn resize_huge_aligned(p: *mut u8, new: usize, align: usize) -> Option<*mut u8> {
    debug_assert!(align.is_power_of_two() && align > PAGE_SIZE);
    #[cfg(feature = "profiling")]
    // SAFETY: a live huge object (the caller's guarantee).
    let old = unsafe { huge::requested(p) };
    // SAFETY: the caller's guarantee.
    let q = unsafe { huge::resize(p, new, align) };
    #[cfg(feature = "profiling")]
    if let Some(q) = q {
        resampled(q, old, new, false);
    }
    q
}
