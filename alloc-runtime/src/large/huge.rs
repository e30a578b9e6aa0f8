//! Huge objects: a run of OS pages each, its header in the first page, the object after it,
//! carved from the huge heap's free runs ([`super::heap`]) or, when none fits, from a new
//! mapping of the run's own size.

use core::ptr;
use core::sync::atomic::Ordering;

use super::decay::note_peak;
use super::heap::{self, release_cache};
use crate::os::{self, OS_PAGE};
use crate::stats;
use crate::stats::{HUGE_BYTES, IN_USE_BYTES};

/// Magic of a live huge object's header.
const HUGE_LIVE: usize = 0x5350_4543_4855_4745; // "SPECHUGE"
/// Magic of a freed huge object's header.
const HUGE_FREED: usize = 0x5350_4543_4652_4545; // "SPECFREE"

/// Header of a huge object, in the OS page just before it.
#[repr(C)]
struct HugeHeader {
    /// [`HUGE_LIVE`] while the object is live, [`HUGE_FREED`] after.
    magic: usize,
    /// Start of the object's run of pages (the header's own page).
    base: usize,
    /// Length of the run.
    len: usize,
    /// The object's size as last requested (allocation or `realloc`), for the checked mode.
    size: usize,
    /// The object's alignment as requested, for the checked mode.
    align: usize,
    /// The heap profiler's record when the object was sampled.
    #[cfg(feature = "profiling")]
    prof: crate::prof::Sampled,
}

/// The header of the huge object at `p`.
fn header(p: *mut u8) -> *mut HugeHeader {
    (p as usize - OS_PAGE) as *mut HugeHeader
}

/// The run length (header page included) of a huge object of `size` bytes.
fn run_len(size: usize) -> Option<usize> {
    size.max(1)
        .checked_next_multiple_of(OS_PAGE)?
        .checked_add(OS_PAGE)
}

/// Allocates a huge object of `size` bytes at a multiple of `align` (a power of two); null when
/// the size is impossible or the OS refuses. `req_align` is what the caller asked (recorded for
/// the checked mode).
pub(super) fn alloc(size: usize, align: usize, req_align: usize, zero: bool) -> *mut u8 {
    let align = align.max(OS_PAGE);
    let Some(len) = run_len(size) else {
        return ptr::null_mut();
    };
    if len > isize::MAX as usize - align {
        return ptr::null_mut();
    }
    let base = if let Some((base, fresh)) = heap::take(len, align, OS_PAGE) {
        if zero && !fresh {
            // SAFETY: the run was just taken from the free runs: ours, and nothing uses it.
            unsafe { clear_reused((base + OS_PAGE) as *mut u8, size) };
        }
        base
    } else {
        // The header page, then the object at a multiple of `align`.
        let Some(m) = os::map_placed(len, align, OS_PAGE, true).or_else(|| {
            // Refused: give back the free runs (they may be what fills a capped address
            // space) and try once more.
            if release_cache() > 0 {
                os::map_placed(len, align, OS_PAGE, true)
            } else {
                None
            }
        }) else {
            return ptr::null_mut();
        };
        m.as_ptr() as usize
    };
    // SAFETY: the run [base, base + len) is ours; its first page holds the header.
    unsafe { write_header(base, len, size, req_align) };
    huge_in_use(len as isize);
    stats::large_alloc(len);
    (base + OS_PAGE) as *mut u8
}

/// Writes a live header for a huge object in the run `[base, base + len)`.
///
/// # Safety
/// The run is a huge object's, ours; its first page is writable.
unsafe fn write_header(base: usize, len: usize, size: usize, align: usize) {
    // SAFETY: guaranteed by the caller.
    unsafe {
        (base as *mut HugeHeader).write(HugeHeader {
            magic: HUGE_LIVE,
            base,
            len,
            size,
            align,
            #[cfg(feature = "profiling")]
            prof: crate::prof::Sampled::none(),
        })
    };
}

/// The size last asked for the huge object at `p` (allocation or resize).
///
/// # Safety
/// `p` is a live huge object.
#[cfg(feature = "profiling")]
pub(crate) unsafe fn requested(p: *mut u8) -> usize {
    // SAFETY: a huge object has its header, ours, in the page before it.
    unsafe { (*header(p)).size }
}

/// Records `size` as the size last asked for the huge object at `p` (a resize that kept it as
/// it was).
///
/// # Safety
/// `p` is a live huge object.
#[cfg(feature = "profiling")]
pub(crate) unsafe fn set_requested(p: *mut u8, size: usize) {
    // SAFETY: a huge object has its header, ours, in the page before it.
    unsafe { (*header(p)).size = size };
}

/// The heap profiler's record of the huge object at `p`.
///
/// # Safety
/// `p` is a live huge object.
#[cfg(feature = "profiling")]
pub(super) unsafe fn sampled<'a>(p: *mut u8) -> &'a crate::prof::Sampled {
    // SAFETY: a huge object has its header, ours, in the page before it.
    unsafe { &(*header(p)).prof }
}

/// Makes the first `size` bytes of a reused run at `p` (page-aligned) read zero, at any size:
/// a resident page that holds a byte that is not zero is cleared with stores, a page that is
/// not resident is dropped (`MADV_DONTNEED`), and a resident page that reads zero is left as it
/// is ([`clear_pages`]).
///
/// Stores rather than dropping every page: the free runs taken are the most resident ones, and
/// a program that asks for zeroed memory goes on to use it, which after `MADV_DONTNEED` faults
/// every page in again (a fault and the kernel's clearing per 4 KiB page), twice when it reads
/// before it writes: `calloc` of 8 to 9 MiB written whole, 500 times, took 1,088,039 faults
/// dropped against 11,467 with glibc, which reuses and clears. The stores are bounded by the
/// pages that are resident, which the run's last object wrote (and faulted in) itself; the
/// pages it never touched stay out of memory, so a zeroed 256 MiB block on a run that held a
/// 16 MiB buffer writes 16 MiB at most.
///
/// # Safety
/// `p` is page-aligned, and `[p, p + size)` rounded up to the page is part of a huge object's
/// run of ours that nothing else uses (whole pages past `size` may be dropped).
unsafe fn clear_reused(p: *mut u8, size: usize) {
    // SAFETY: the caller guarantees the range is ours and unused, and `p` is page-aligned.
    unsafe { clear_pages(p, size) };
}

/// Makes `[p, p + size)` (`p` page-aligned) read zero, touching as few pages as it can. A
/// resident page is read and written only when it holds a byte that is not zero. A page that
/// is not resident (never touched since the run was mapped or returned, or taken back by the
/// kernel) is dropped with `MADV_DONTNEED`, a run of them at a time, which faults nothing in
/// (a page whose contents went to swap reads zero after it too). So a program that uses a
/// tenth of each zeroed buffer keeps a tenth of it resident: clearing every page with stores
/// made such a program's peak RSS 40 MB against 5 MB (`calloc` of 1.5 to 6 MiB with a tenth
/// used, 2,000 times), and reading the pages that were not resident to check them faulted each
/// in twice (the read maps the zero page, the program's write then copies it).
///
/// # Safety
/// `[p, p + size)` is part of a huge object's run of ours (which covers it rounded up to the
/// page) that nothing else uses, and `p` is page-aligned.
unsafe fn clear_pages(p: *mut u8, size: usize) {
    /// Pages asked about per `mincore` call.
    const BATCH: usize = 256;
    // (A successful allocation leaves `errno` as it found it.)
    let _errno = os::KeepErrno::new();
    let pages = size.div_ceil(OS_PAGE);
    let mut vec = [0u8; BATCH];
    let mut first = 0;
    while first < pages {
        let count = (pages - first).min(BATCH);
        let base = p as usize + first * OS_PAGE;
        let known = os::residency(base as *const u8, count * OS_PAGE, &mut vec[..count]);
        let resident = |i: usize| !known || vec[i] & 1 == 1;
        let mut i = 0;
        while i < count {
            let mut j = i + 1;
            while j < count && resident(j) == resident(i) {
                j += 1;
            }
            let at = base + i * OS_PAGE;
            let end = (base + j * OS_PAGE).min(p as usize + size);
            // (Not dropped while the kernel refuses to drop locked pages: stores then.)
            let dropped = !resident(i)
                && !os::pages_locked()
                // SAFETY: `[at, end)` is inside the caller's range (its pages inside the run),
                // ours and unused.
                && unsafe { os::decommit(at as *mut u8, (j - i) * OS_PAGE) };
            if !dropped {
                // SAFETY: as above; `at` is page-aligned.
                unsafe { clear_resident(at as *mut u8, end - at) };
            }
            i = j;
        }
        first += count;
    }
}

/// Makes `[p, p + size)` (`p` page-aligned) read zero with stores, writing only the pages that
/// hold a byte that is not zero: each run of such pages (up to [`CLEAR_RUN`] bytes) with one
/// `memset`, which clears a long run faster than a call per page.
///
/// # Safety
/// `[p, p + size)` is memory of ours that nothing else uses, and `p` is page-aligned.
unsafe fn clear_resident(p: *mut u8, size: usize) {
    /// The most bytes cleared by one `memset`: a run of pages found not zero is cleared while
    /// the lines its check read are still in the cache.
    const CLEAR_RUN: usize = 64 * OS_PAGE;
    // Whether the page at `off` holds a byte that is not zero.
    let dirty = |off: usize| {
        // SAFETY: the page at `off` (to the range's end at most) is inside the caller's range,
        // ours to read, and page-aligned.
        !unsafe { reads_zero(p.add(off), (size - off).min(OS_PAGE)) }
    };
    let mut off = 0;
    while off < size {
        if !dirty(off) {
            off += OS_PAGE;
            continue;
        }
        let start = off;
        off += OS_PAGE;
        while off < size && off - start < CLEAR_RUN && dirty(off) {
            off += OS_PAGE;
        }
        // SAFETY: `[p + start, p + min(off, size))` is inside the caller's range; nothing
        // else uses it.
        unsafe { ptr::write_bytes(p.add(start), 0, off.min(size) - start) };
    }
}

/// Whether the `n` bytes at `p` (8-aligned) are all zero; stops at the first 64 bytes that are
/// not.
///
/// # Safety
/// `[p, p + n)` is readable and `p` is 8-aligned.
unsafe fn reads_zero(p: *const u8, n: usize) -> bool {
    let words = p.cast::<u64>();
    let mut i = 0;
    while i + 8 <= n / 8 {
        let mut any = 0u64;
        for k in 0..8 {
            // SAFETY: word `i + k` is inside the range (`i + 8 <= n / 8`), and aligned.
            any |= unsafe { words.add(i + k).read() };
        }
        if any != 0 {
            return false;
        }
        i += 8;
    }
    // The rest, a byte at a time (under 64 bytes).
    // SAFETY: the bytes from word `i` to `n` are inside the range.
    (i * 8..n).all(|b| unsafe { p.add(b).read() } == 0)
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

/// Frees the huge object at `p`: its run goes to the huge heap's free runs.
///
/// # Safety
/// `p` is a live huge object, not used any more.
pub(super) unsafe fn free(p: *mut u8) {
    // SAFETY: a huge object has its header in the page before it.
    let h = unsafe { header(p).read() };
    debug_assert_eq!(h.magic, HUGE_LIVE);
    // SAFETY: the header page is ours; marking it freed lets the checked mode see a double
    // free while the page is still a free run's.
    unsafe { (*header(p)).magic = HUGE_FREED };
    #[cfg(feature = "profiling")]
    // SAFETY: the header page is still ours.
    unsafe {
        (*header(p)).prof.free()
    };
    stats::large_free(h.len);
    huge_in_use(-(h.len as isize));
    heap::put(h.base, h.len);
}

/// Records the new run length of the huge object at `p` (`base` its run's start, possibly
/// moved) after a resize from `old_len`; returns the object's address.
///
/// # Safety
/// `[base, base + new_len)` is the object's run, ours, its first page the header's.
unsafe fn resized(
    base: usize,
    old_len: usize,
    new_len: usize,
    size: usize,
    align: usize,
) -> *mut u8 {
    // The record moved with the header's page: kept across the rewrite.
    #[cfg(feature = "profiling")]
    // SAFETY: the header page is the object's (the caller's guarantee); a bitwise copy, put
    // back below.
    let prof = unsafe { ptr::read(&(*(base as *const HugeHeader)).prof) };
    // SAFETY: guaranteed by the caller.
    unsafe { write_header(base, new_len, size, align) };
    #[cfg(feature = "profiling")]
    // SAFETY: as above.
    unsafe {
        (*(base as *mut HugeHeader)).prof = prof
    };
    stats::large_resize(old_len, new_len);
    huge_in_use(new_len as isize - old_len as isize);
    (base + OS_PAGE) as *mut u8
}

/// Resizes the huge object at `p`, which sits at a multiple of `align`, to `new` bytes without
/// copying when it can: in place when its run already fits (a run more than twice as long as
/// needed gives its tail back), by taking the free runs right behind it, or by moving its
/// pages with `mremap` to a new place at a multiple of `align` (no copy). `None` (the object
/// untouched) when the caller must move it.
///
/// # Safety
/// `p` is a live huge object at a multiple of `align`; on `Some` only the result is used.
pub(super) unsafe fn resize(p: *mut u8, new: usize, align: usize) -> Option<*mut u8> {
    // SAFETY: a huge object has its header in the page before it.
    let h = unsafe { header(p).read() };
    debug_assert_eq!(h.magic, HUGE_LIVE);
    let new_len = run_len(new)?;
    if new_len <= h.len {
        let len = if new_len >= h.len / 2 {
            h.len
        } else {
            // SAFETY: the tail of the run is the object's and nothing uses it any more.
            heap::put(h.base + new_len, h.len - new_len);
            new_len
        };
        // SAFETY: the run [base, base + len) is the object's.
        return Some(unsafe { resized(h.base, h.len, len, new, h.align) });
    }
    if heap::extend(h.base + h.len, new_len - h.len) {
        // SAFETY: the object's run now reaches `new_len`.
        return Some(unsafe { resized(h.base, h.len, new_len, new, h.align) });
    }
    // SAFETY: the run is the object's, at a multiple of `align` (and it asked for at most
    // `align`, or the caller's `align` is the chunk's).
    let base = unsafe { remap_aligned(h.base, h.len, new_len, align.max(OS_PAGE)) }?;
    // SAFETY: the run moved whole to `base`, header page first.
    Some(unsafe { resized(base, h.len, new_len, new, h.align) })
}

/// Moves the run `[base, base + len)` to a new place of `new_len` bytes whose second page is a
/// multiple of `align`, by moving its pages (`mremap`, no copy): a reservation is mapped there
/// first, and the move replaces it. `None` when the OS refuses (a run made of pieces of
/// several mappings cannot move as one, for one); the run is then untouched.
///
/// # Safety
/// The run is a live huge object's, ours; on `Some` the old range must not be used any more.
unsafe fn remap_aligned(base: usize, len: usize, new_len: usize, align: usize) -> Option<usize> {
    if align == OS_PAGE {
        // Anywhere will do: the kernel grows it in place or moves it.
        // SAFETY: the run is the object's, ours; on success only the new range is used.
        return Some(unsafe { os::remap(base as *mut u8, len, new_len) }?.as_ptr() as usize);
    }
    if new_len > isize::MAX as usize - align {
        return None;
    }
    let hdr = os::map_placed(new_len, align, OS_PAGE, false)?.as_ptr() as usize;
    // SAFETY: [base, base + len) is the object's run, and [hdr, hdr + new_len) our
    // reservation, which MREMAP_FIXED replaces; the result is checked for MAP_FAILED.
    let m = unsafe {
        libc::mremap(
            base as *mut libc::c_void,
            len,
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
    // The reservation's bytes are now the object's, and its old range is unmapped.
    os::MAPPED.fetch_sub(len, Ordering::Relaxed);
    Some(hdr)
}

/// Whether the huge object at `p` has a live header (checked mode; the caller made sure the
/// header page is mapped).
#[cfg(feature = "checked")]
pub(crate) fn is_live(p: *mut u8) -> bool {
    // SAFETY: the caller checked that the header page is mapped.
    unsafe { header(p).read().magic == HUGE_LIVE }
}

/// The (size, alignment) last requested for the live huge object at `p` (checked mode; the
/// caller made sure the object is live, see [`is_live`]).
#[cfg(feature = "checked")]
pub(crate) fn layout(p: *mut u8) -> (usize, usize) {
    // SAFETY: the caller checked that the header page is mapped and holds a live header.
    let h = unsafe { header(p).read() };
    (h.size, h.align)
}

/// Usable bytes of the live huge object at `p`: its run less the header page.
///
/// # Safety
/// `p` is a live huge object.
pub(crate) unsafe fn usable(p: *mut u8) -> usize {
    // SAFETY: a huge object has its header in the page before it (the caller's guarantee).
    let h = unsafe { header(p).read() };
    debug_assert_eq!(h.magic, HUGE_LIVE);
    h.len - OS_PAGE
}
