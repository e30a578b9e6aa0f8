//! The operating-system layer: anonymous mappings, and nothing else.
//!
//! Every byte the allocator hands out comes from here. Failures are reported as `None`; nothing
//! here panics or aborts, so an exhausted address space turns into a null return to the caller.

use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};

/// The OS page size assumed for `madvise`/`mremap` granularity (checked at first use).
pub const OS_PAGE: usize = 4096;

/// Bytes currently mapped from the OS by this allocator.
pub(crate) static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// Maps `size` bytes (a multiple of [`OS_PAGE`]) of fresh, zeroed, read-write memory.
pub(crate) fn map(size: usize) -> Option<NonNull<u8>> {
    debug_assert!(size.is_multiple_of(OS_PAGE) && size > 0);
    // SAFETY: an anonymous private mapping with no address hint touches no existing memory;
    // the result is checked for MAP_FAILED before use.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    MAPPED.fetch_add(size, Ordering::Relaxed);
    NonNull::new(p.cast())
}

/// Maps `size` bytes aligned to `align` (a power of two, at least [`OS_PAGE`]), by mapping
/// `size + align` and unmapping the slop on both sides.
pub(crate) fn map_aligned(size: usize, align: usize) -> Option<NonNull<u8>> {
    debug_assert!(align.is_power_of_two() && align >= OS_PAGE);
    let total = size.checked_add(align)?;
    let base = map(total)?.as_ptr() as usize;
    let start = (base + align - 1) & !(align - 1);
    let head = start - base;
    let tail = total - head - size;
    if head > 0 {
        // SAFETY: [base, start) is part of the mapping just made and nothing points into it.
        unsafe { unmap(base as *mut u8, head) };
    }
    if tail > 0 {
        // SAFETY: [start + size, base + total) is the unused end of the same mapping.
        unsafe { unmap((start + size) as *mut u8, tail) };
    }
    NonNull::new(start as *mut u8)
}

/// Unmaps `[ptr, ptr + size)`.
///
/// # Safety
/// The range must be a page-aligned part of a mapping made by [`map`] that nothing uses any more.
pub(crate) unsafe fn unmap(ptr: *mut u8, size: usize) {
    // SAFETY: the caller guarantees the range is ours and unused.
    let r = unsafe { libc::munmap(ptr.cast(), size) };
    debug_assert_eq!(r, 0, "munmap failed");
    if r == 0 {
        MAPPED.fetch_sub(size, Ordering::Relaxed);
    }
}

/// Tells the OS that `[ptr, ptr + size)` is no longer needed: its pages are dropped and read
/// back as zero on next touch. Returns whether the advice was taken.
///
/// # Safety
/// The range must be page-aligned, inside one of our mappings, and hold nothing live.
pub(crate) unsafe fn decommit(ptr: *mut u8, size: usize) -> bool {
    // SAFETY: the caller guarantees the range is ours and holds nothing live; MADV_DONTNEED on
    // a private anonymous mapping only discards contents.
    unsafe { libc::madvise(ptr.cast(), size, libc::MADV_DONTNEED) == 0 }
}

/// Asks the OS not to back `[ptr, ptr + size)` with transparent huge pages.
///
/// # Safety
/// The range must be page-aligned and inside one of our mappings.
pub(crate) unsafe fn no_huge_pages(ptr: *mut u8, size: usize) {
    // SAFETY: advice on our own mapping; failure (e.g. a kernel without THP) is harmless.
    unsafe { libc::madvise(ptr.cast(), size, libc::MADV_NOHUGEPAGE) };
}

/// Grows or shrinks the mapping `[ptr, ptr + old)` to `new` bytes, moving it if needed.
///
/// # Safety
/// `[ptr, ptr + old)` must be a whole mapping made by [`map`]/[`map_aligned`]; on success the
/// old range must not be used any more.
pub(crate) unsafe fn remap(ptr: *mut u8, old: usize, new: usize) -> Option<NonNull<u8>> {
    // SAFETY: the caller guarantees the mapping is ours; MREMAP_MAYMOVE lets the kernel move the
    // pages without copying, and the result is checked for MAP_FAILED.
    let p = unsafe { libc::mremap(ptr.cast(), old, new, libc::MREMAP_MAYMOVE) };
    if p == libc::MAP_FAILED {
        return None;
    }
    if new >= old {
        MAPPED.fetch_add(new - old, Ordering::Relaxed);
    } else {
        MAPPED.fetch_sub(old - new, Ordering::Relaxed);
    }
    NonNull::new(p.cast())
}
