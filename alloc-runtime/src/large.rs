//! Large objects: everything above the small classes (32 KiB) or more aligned than a page.
//!
//! - *Medium* objects (up to [`MEDIUM_MAX`], alignment up to the 8 KiB page) are a page run of
//!   their own from the page heap, found again from the pointer through the chunk's page map.
//! - *Huge* objects (bigger, or more aligned) get their own mapping, with a one-page header just
//!   before the object. They grow and shrink with `mremap`, which moves pages without copying.
//!
//! Which kind a block is follows from its `Layout` alone, which Rust passes on every free.

use core::ptr;
use core::sync::atomic::Ordering;

use crate::chunk::{self, span_of};
use crate::os::{self, OS_PAGE};
use crate::size_class::PAGE_SIZE;
use crate::span::{ListTag, STATE_LARGE};
use crate::stats;

/// Largest object served from the page heap (1 MiB); larger ones are mapped on their own.
pub(crate) const MEDIUM_MAX: usize = 1 << 20;

/// Whether a non-small layout is medium (page heap) rather than huge (own mapping).
#[inline]
pub(crate) fn is_medium(size: usize, align: usize) -> bool {
    size <= MEDIUM_MAX && align <= PAGE_SIZE
}

/// Header of a huge object, in the OS page just before it.
#[repr(C)]
struct HugeHeader {
    /// Start of the mapping (the header's own page).
    base: usize,
    /// Length of the mapping.
    len: usize,
}

/// Allocates a large object. Null when the size is impossible or the OS refuses.
pub(crate) fn alloc_large(size: usize, align: usize, zero: bool) -> *mut u8 {
    if is_medium(size, align) {
        alloc_medium(size, zero)
    } else {
        alloc_huge(size, align)
    }
}

fn alloc_medium(size: usize, zero: bool) -> *mut u8 {
    let npages = size.div_ceil(PAGE_SIZE);
    let Some(run) = chunk::alloc_pages(npages) else {
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
    p
}

fn alloc_huge(size: usize, align: usize) -> *mut u8 {
    let align = align.max(OS_PAGE);
    let Some(body) = size.checked_next_multiple_of(OS_PAGE) else {
        return ptr::null_mut();
    };
    let Some(total) = body
        .checked_add(OS_PAGE)
        .and_then(|t| t.checked_add(align - OS_PAGE))
    else {
        return ptr::null_mut();
    };
    if total > isize::MAX as usize {
        return ptr::null_mut();
    }
    let Some(m) = os::map(total) else {
        return ptr::null_mut();
    };
    let base = m.as_ptr() as usize;
    let p = (base + OS_PAGE).next_multiple_of(align);
    let hdr = p - OS_PAGE;
    let end = p + body;
    if hdr > base {
        // SAFETY: [base, hdr) is unused slop of the mapping just made.
        unsafe { os::unmap(base as *mut u8, hdr - base) };
    }
    if base + total > end {
        // SAFETY: [end, base + total) is unused slop of the same mapping.
        unsafe { os::unmap(end as *mut u8, base + total - end) };
    }
    // SAFETY: the header page is ours and writable.
    unsafe {
        (hdr as *mut HugeHeader).write(HugeHeader {
            base: hdr,
            len: end - hdr,
        })
    };
    stats::large_alloc(end - hdr);
    p as *mut u8
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
    } else {
        // SAFETY: a huge object has its header in the page before it.
        let h = unsafe { ((p as usize - OS_PAGE) as *const HugeHeader).read() };
        stats::large_free(h.len);
        // SAFETY: the mapping holds only this object, which is dead.
        unsafe { os::unmap(h.base as *mut u8, h.len) };
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
        if old.div_ceil(PAGE_SIZE) == new.div_ceil(PAGE_SIZE) {
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
        .checked_next_multiple_of(OS_PAGE)?
        .checked_add(OS_PAGE)?;
    if new_len == h.len {
        return Some(p);
    }
    // SAFETY: the mapping [base, base + len) is this object's own.
    let m = unsafe { os::remap(h.base as *mut u8, h.len, new_len) }?.as_ptr() as usize;
    // SAFETY: the header page moved with the mapping and is ours.
    unsafe {
        (m as *mut HugeHeader).write(HugeHeader {
            base: m,
            len: new_len,
        })
    };
    stats::large_resize(h.len, new_len);
    Some((m + OS_PAGE) as *mut u8)
}
