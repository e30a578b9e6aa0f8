//! Large objects: everything above the small classes (32 KiB) or more aligned than a page.
//!
//! - *Medium* objects (up to [`MEDIUM_MAX`], at any alignment up to [`MEDIUM_ALIGN_MAX`]) are a
//!   page run of their own from the page heap, starting at a multiple of their alignment, found
//!   again from the pointer through the chunk's page map. A request aligned above the page
//!   costs about what its size costs (a run starts at the next aligned free page), not a
//!   mapping of its own.
//! - *Huge* objects (bigger, or more aligned) get their own mapping, with a one-page header just
//!   before the object. They grow and shrink with `mremap`, which moves pages without copying.
//!
//! Which kind a block is follows from its `Layout` alone, which Rust passes on every free.
//!
//! Out of memory: huge mappings are made with [`os::map_placed`] (accounted), so the kernel's overcommit
//! policy refuses what the machine cannot back (as glibc's `malloc` is refused) and the request
//! returns null. When the OS refuses a mapping, the freed mappings kept for reuse are given back
//! ([`release_cache`]) and the request is tried once more, so that a capped address space
//! (`RLIMIT_AS`) is not held by mappings nobody uses.

use core::ptr;
use core::sync::atomic::Ordering;

use crate::chunk::{self, span_of};
use crate::os::{self, OS_PAGE};
use crate::size_class::PAGE_SIZE;
use crate::span::{ListTag, STATE_LARGE};
use crate::stats;
use crate::stats::{HUGE_BYTES, IN_USE_BYTES};

mod cache;

use cache::{cache_has, cache_put, cache_take, cache_take_where, note_peak};
pub(crate) use cache::{cache_trim, release_cache, set_cache_percent, CACHE_BYTES, CACHE_LIMIT};

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

/// Magic of a live huge object's header.
const HUGE_LIVE: usize = 0x5350_4543_4855_4745; // "SPECHUGE"
/// Magic of a freed huge object's header (kept in the cache).
const HUGE_FREED: usize = 0x5350_4543_4652_4545; // "SPECFREE"

/// Header of a huge object, in the OS page just before it.
#[repr(C)]
struct HugeHeader {
    /// [`HUGE_LIVE`] while the object is live, [`HUGE_FREED`] after.
    magic: usize,
    /// Start of the mapping (the header's own page).
    base: usize,
    /// Length of the mapping.
    len: usize,
    /// The object's size as last requested (allocation or `realloc`), for the checked mode.
    size: usize,
    /// The object's alignment as requested, for the checked mode.
    align: usize,
}

/// Allocates a large object. Null when the size is impossible or the OS refuses.
pub(crate) fn alloc_large(size: usize, align: usize, zero: bool) -> *mut u8 {
    if is_medium(size, align) {
        alloc_medium(size, align, zero)
    } else {
        alloc_huge(size, align, zero)
    }
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

fn alloc_huge(size: usize, req_align: usize, zero: bool) -> *mut u8 {
    let align = req_align.max(OS_PAGE);
    // At least one page, so that even a zero-sized object points into its own mapping.
    let Some(body) = size.max(1).checked_next_multiple_of(OS_PAGE) else {
        return ptr::null_mut();
    };
    if align == OS_PAGE {
        if let Some((base, len)) = cache_take(body + OS_PAGE) {
            // SAFETY: a cached mapping is ours, unused, and at least `body + OS_PAGE` long.
            return unsafe { reuse_cached(base, len, size, req_align, zero) };
        }
    }
    let Some(len) = body.checked_add(OS_PAGE) else {
        return ptr::null_mut();
    };
    if len > isize::MAX as usize - align {
        return ptr::null_mut();
    }
    // The header page, then the object at a multiple of `align`.
    let Some(m) = os::map_placed(len, align, OS_PAGE, true).or_else(|| {
        // Refused: give back the mappings kept for reuse (they may be what fills a capped
        // address space) and try once more.
        if release_cache() > 0 {
            os::map_placed(len, align, OS_PAGE, true)
        } else {
            None
        }
    }) else {
        return ptr::null_mut();
    };
    let hdr = m.as_ptr() as usize;
    // SAFETY: the header page is ours and writable.
    unsafe {
        (hdr as *mut HugeHeader).write(HugeHeader {
            magic: HUGE_LIVE,
            base: hdr,
            len,
            size,
            align: req_align,
        })
    };
    huge_in_use(len as isize);
    stats::large_alloc(len);
    (hdr + OS_PAGE) as *mut u8
}

/// Hands out the cached mapping `[base, base + len)` for a huge object of `size` bytes (asked at
/// `align`): the header in its first page, the object after it, cleared when `zero`.
///
/// # Safety
/// The mapping was taken from the cache (ours, unused) and is at least `size` rounded up to
/// the page, plus the header page, long.
unsafe fn reuse_cached(base: usize, len: usize, size: usize, align: usize, zero: bool) -> *mut u8 {
    // SAFETY: guaranteed by the caller: the header page and the object's pages are ours.
    unsafe {
        (base as *mut HugeHeader).write(HugeHeader {
            magic: HUGE_LIVE,
            base,
            len,
            size,
            align,
        });
        if zero {
            clear_reused((base + OS_PAGE) as *mut u8, size);
        }
    }
    huge_in_use(len as isize);
    stats::large_alloc(len);
    (base + OS_PAGE) as *mut u8
}

/// Records that a huge object of `old_len` bytes of mapping now lives in the mapping of
/// `new_len` bytes at `hdr` (moved or resized by `mremap`), at `size` bytes asked at `align`;
/// returns the object's address.
///
/// # Safety
/// `[hdr, hdr + new_len)` is the object's mapping, its first page the header's, ours.
unsafe fn remapped(
    hdr: usize,
    old_len: usize,
    new_len: usize,
    size: usize,
    align: usize,
) -> *mut u8 {
    // SAFETY: guaranteed by the caller: the header page moved with the mapping.
    unsafe {
        (hdr as *mut HugeHeader).write(HugeHeader {
            magic: HUGE_LIVE,
            base: hdr,
            len: new_len,
            size,
            align,
        })
    };
    stats::large_resize(old_len, new_len);
    huge_in_use(new_len as isize - old_len as isize);
    (hdr + OS_PAGE) as *mut u8
}

/// Makes the first `size` bytes of a reused huge mapping at `p` (page-aligned) read zero without
/// touching them: the pages are dropped (`MADV_DONTNEED`) and read zero when next touched, as a
/// fresh mapping's do, so a large zeroed allocation costs no time and no RSS until it is used
/// (clearing with stores faulted in every page of a 256 MiB `vec![0u8; N]` that reused a cached
/// mapping). Clears with stores if the kernel refuses.
///
/// # Safety
/// `[p, p + size)` is part of a huge mapping of ours that nothing else uses.
unsafe fn clear_reused(p: *mut u8, size: usize) {
    let len = size.next_multiple_of(OS_PAGE);
    // SAFETY: the caller guarantees the range is ours and unused; `len` stays inside the
    // mapping (a mapping covers its object rounded up to the page).
    if !unsafe { os::decommit(p, len) } {
        // SAFETY: as above.
        unsafe { ptr::write_bytes(p, 0, size) };
    }
}

fn huge_in_use(delta: isize) {
    if delta >= 0 {
        let huge = HUGE_BYTES.fetch_add(delta as usize, Ordering::Relaxed) + delta as usize;
        note_peak(huge + IN_USE_BYTES.load(Ordering::Relaxed));
        stats::note_in_use();
    } else {
        HUGE_BYTES.fetch_sub(delta.unsigned_abs(), Ordering::Relaxed);
    }
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
        // SAFETY: the run holds only this object, which is dead.
        unsafe { chunk::free_pages(s as *const _ as *mut _) };
        cache_trim();
    } else {
        // SAFETY: a huge object has its header in the page before it.
        let h = unsafe { ((p as usize - OS_PAGE) as *const HugeHeader).read() };
        debug_assert_eq!(h.magic, HUGE_LIVE);
        // SAFETY: the header page is ours; marking it freed lets the checked mode see a double
        // free of a mapping kept in the cache.
        unsafe { (*((p as usize - OS_PAGE) as *mut HugeHeader)).magic = HUGE_FREED };
        stats::large_free(h.len);
        huge_in_use(-(h.len as isize));
        cache_put(h.base, h.len);
    }
}

/// Resizes a large object without copying when it can: a medium object that keeps its page
/// count, or a huge object that stays huge (by `mremap`). `None` means the caller must move it.
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
        if medium_pages(old) == medium_pages(new) {
            // SAFETY: a medium object is a page run of its own.
            unsafe { (*span_of(p)).large_size.set(new) };
            return Some(p);
        }
        return None;
    }
    if old_medium || new_medium || align > OS_PAGE {
        // Moving a mapping can break alignments above the OS page; and medium <-> huge moves.
        return None;
    }
    // SAFETY: a huge object has its header in the page before it.
    let h = unsafe { ((p as usize - OS_PAGE) as *const HugeHeader).read() };
    let new_len = new
        .max(1)
        .checked_next_multiple_of(OS_PAGE)?
        .checked_add(OS_PAGE)?;
    if new_len <= h.len && new_len >= h.len / 2 {
        // Within the mapping (it may be larger than the object: a reused cached mapping), and
        // not so much smaller that the rest should go back.
        // SAFETY: the header page is ours.
        unsafe { (*((p as usize - OS_PAGE) as *mut HugeHeader)).size = new };
        return Some(p);
    }
    if new_len > h.len && cache_has(new_len) {
        // A freed mapping of the new size is resident: moving into it (the caller allocates,
        // copies and frees) costs a copy, where growing this one would fault fresh pages in.
        return None;
    }
    // SAFETY: the mapping [base, base + len) is this object's own.
    let m = unsafe { os::remap(h.base as *mut u8, h.len, new_len) }?.as_ptr() as usize;
    // SAFETY: the header page moved with the mapping, which is the object's.
    Some(unsafe { remapped(m, h.len, new_len, new, align) })
}

/// Holds or releases the cache lock around `fork` (see `heap::fork_*`).
pub(crate) fn fork_lock(take: bool) {
    cache::fork_lock(take);
}

/// Whether the huge object at `p` has a live header (checked mode; the caller made sure the
/// header page is mapped).
#[cfg(feature = "checked")]
pub(crate) fn huge_is_live(p: *mut u8) -> bool {
    // SAFETY: the caller checked that the header page is mapped.
    unsafe { ((p as usize - OS_PAGE) as *const HugeHeader).read().magic == HUGE_LIVE }
}

/// The (size, alignment) last requested for the live huge object at `p` (checked mode; the
/// caller made sure the object is live, see [`huge_is_live`]).
#[cfg(feature = "checked")]
pub(crate) fn huge_layout(p: *mut u8) -> (usize, usize) {
    // SAFETY: the caller checked that the header page is mapped and holds a live header.
    let h = unsafe { ((p as usize - OS_PAGE) as *const HugeHeader).read() };
    (h.size, h.align)
}

/// Usable bytes of the live huge object at `p`: its mapping less the header page (for the C
/// API's `malloc_usable_size` and `realloc`, which know only the pointer; see `cabi.rs`).
///
/// # Safety
/// `p` was returned by [`alloc_large`] for a huge object that is still live.
pub(crate) unsafe fn huge_usable(p: *mut u8) -> usize {
    // SAFETY: a huge object has its header in the page before it (the caller's guarantee).
    let h = unsafe { ((p as usize - OS_PAGE) as *const HugeHeader).read() };
    debug_assert_eq!(h.magic, HUGE_LIVE);
    h.len - OS_PAGE
}

/// For the C API (`cabi.rs`): allocates a huge object at an address that is a multiple of
/// `align` (a power of two, at least the chunk size), from a cached mapping whose object is so
/// aligned when one fits (the C API's freed mappings are), else from a new mapping. Like
/// [`alloc_huge`], whose cache only serves page-aligned requests.
pub(crate) fn alloc_huge_aligned(size: usize, align: usize, zero: bool) -> *mut u8 {
    debug_assert!(align.is_power_of_two() && align > PAGE_SIZE);
    let Some(need) = size
        .max(1)
        .checked_next_multiple_of(OS_PAGE)
        .and_then(|b| b.checked_add(OS_PAGE))
    else {
        return ptr::null_mut();
    };
    {
        let taken = cache_take_where(need, need / 4, |base| {
            (base + OS_PAGE).is_multiple_of(align)
        });
        if let Some((base, len)) = taken {
            // SAFETY: a cached mapping is ours, unused, and at least `need` bytes long.
            return unsafe { reuse_cached(base, len, size, align, zero) };
        }
    }
    alloc_huge(size, align, zero)
}

/// For the C API (`cabi.rs`): resizes the huge object at `p`, which [`alloc_huge_aligned`]
/// placed at a multiple of `align`, to `new` bytes by moving its pages (`mremap`, no copy) into
/// a new place at a multiple of `align` again: a reservation is mapped there first, and the
/// move replaces it. `None` when the OS refuses (the object is then untouched).
///
/// # Safety
/// `p` is a live huge object from [`alloc_huge_aligned`] with this `align`; on `Some` it must
/// not be used any more.
pub(crate) unsafe fn remap_huge_aligned(p: *mut u8, new: usize, align: usize) -> Option<*mut u8> {
    debug_assert!(align.is_power_of_two() && align > PAGE_SIZE);
    // SAFETY: a huge object has its header in the page before it.
    let h = unsafe { ((p as usize - OS_PAGE) as *const HugeHeader).read() };
    debug_assert_eq!(h.magic, HUGE_LIVE);
    let new_len = new
        .max(1)
        .checked_next_multiple_of(OS_PAGE)?
        .checked_add(OS_PAGE)?;
    // The reservation: `new_len` bytes whose second page is a multiple of `align`.
    if new_len > isize::MAX as usize - align {
        return None;
    }
    let hdr = os::map_placed(new_len, align, OS_PAGE, false)?.as_ptr() as usize;
    // SAFETY: [h.base, h.base + h.len) is this object's whole mapping, and
    // [hdr, hdr + new_len) our reservation, which MREMAP_FIXED replaces; the result is checked for MAP_FAILED.
    let m = unsafe {
        libc::mremap(
            h.base as *mut libc::c_void,
            h.len,
            new_len,
            libc::MREMAP_MAYMOVE | libc::MREMAP_FIXED,
            hdr as *mut libc::c_void,
        )
    };
    if m == libc::MAP_FAILED {
        // SAFETY: the reservation is a whole mapping of ours and holds nothing.
        unsafe { os::release(hdr as *mut u8, new_len) };
        return None;
    }
    debug_assert_eq!(m as usize, hdr);
    // The reservation's bytes are now the object's, and its old mapping is gone.
    os::MAPPED.fetch_sub(h.len, Ordering::Relaxed);
    // SAFETY: the header page moved with the mapping, which is the object's.
    Some(unsafe { remapped(hdr, h.len, new_len, new, align) })
}
