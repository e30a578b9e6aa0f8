//! The checked mode (cargo feature `checked`): misuse aborts at once with a message naming the
//! fault and the address, instead of corrupting the heap.
//!
//! - **Foreign pointer**: a small, tiny or medium free must point into one of our chunks (a
//!   bitmap of every 4 MiB chunk of the address space), a huge free at a mapped page holding a
//!   live huge header. The C `free` (no `Layout`) tells them apart by the address alone and
//!   reads nothing through it (span, header) before these checks pass.
//! - **Double free**: each chunk has a side bitmap with one bit per byte, set at the first byte
//!   of every live object; a free whose bit is clear frees something that is not a live object
//!   (freed before, or never handed out, or an interior pointer).
//! - **Wrong layout**: the size class the `Layout` maps to must be the class of the span holding
//!   the block (tiny, small class, or the medium object's page count); for a huge object, its
//!   page count must be that of the size in its header (the size last requested), and an
//!   alignment above a page must be the one requested.
//!
//! The bitmaps are atomic (frees come from any thread). Costs: two atomic bit operations and a
//! few loads per allocation and free; memory: 1/8 of each chunk for its side bitmap (virtual,
//! touched as the chunk is used) and 8 MiB of virtual address space for the chunk bitmap.

use core::sync::atomic::{AtomicU64, Ordering};

use crate::side::is_chunk;
use crate::size_class::CHUNK_SIZE;
use crate::span::{Span, STATE_FREE};

/// The word and bit of `p` in its chunk's side bitmap.
fn side_bit(p: usize) -> (&'static AtomicU64, u64) {
    let side = crate::chunk::side_of(p) as *const AtomicU64;
    let off = p & (CHUNK_SIZE - 1);
    // SAFETY: `p` is in a registered chunk, whose side bitmap has one bit per byte.
    (unsafe { &*side.add(off / 64) }, 1 << (off % 64))
}

/// Marks `p` as the start of a live object (every allocation from a chunk).
#[inline]
pub(crate) fn on_alloc(p: *mut u8) {
    if p.is_null() {
        return;
    }
    let (w, b) = side_bit(p as usize);
    let old = w.fetch_or(b, Ordering::Relaxed);
    debug_assert!(old & b == 0, "allocator handed out a live object twice");
}

/// What a free's `Layout` says the block is.
#[derive(Clone, Copy)]
pub(crate) enum Kind {
    /// 1 to 15 bytes.
    Tiny,
    /// A size class.
    Small(usize),
    /// A page run of the given pages.
    Medium(usize),
}

/// The span holding `p`, which must be in one of our chunks, in a page that holds a span;
/// aborts otherwise. Nothing is read through `p` before it is known to be in a chunk.
fn chunk_span(p: *mut u8, size: usize, align: usize) -> &'static Span {
    let a = p as usize;
    if !is_chunk(a) {
        fault(
            "free of a pointer this allocator never handed out",
            a,
            size,
            align,
        );
    }
    // SAFETY: `a` is in one of our chunks, so its page-map entry is readable (null when the page
    // holds no span).
    let span = unsafe { crate::chunk::span_of(p) };
    // SAFETY: a non-null page-map entry is a live descriptor (descriptors live in chunk
    // headers, which are never unmapped).
    match unsafe { span.as_ref() } {
        // A run a thread holds in reserve for its next spans has a descriptor and no block: its
        // state is still free.
        Some(s) if s.state.load(Ordering::Relaxed) != STATE_FREE => s,
        _ => fault(
            "free of a pointer into a free page or a run held in reserve (double free?)",
            a,
            size,
            align,
        ),
    }
}

/// Checks a free of a chunk-backed block and clears its live bit; aborts on misuse.
pub(crate) fn on_free(p: *mut u8, size: usize, align: usize, kind: Kind) {
    let a = p as usize;
    let s = chunk_span(p, size, align);
    // A small object the heap profiler sampled has a page run of its own.
    #[cfg(feature = "profiling")]
    let sampled_small = matches!(kind, Kind::Tiny | Kind::Small(_))
        && s.state.load(Ordering::Relaxed) == crate::span::STATE_LARGE
        && s.start.get() == p
        && s.prof.is_set();
    #[cfg(not(feature = "profiling"))]
    let sampled_small = false;
    let ok = sampled_small
        || match kind {
            Kind::Tiny => s.class.get() as usize == crate::span::TINY_CLASS,
            Kind::Small(c) => s.class.get() as usize == c,
            Kind::Medium(pages) => {
                s.state.load(Ordering::Relaxed) == crate::span::STATE_LARGE
                    && s.start.get() == p
                    && s.npages.get() as usize == pages
            }
        };
    if !ok {
        fault(
            "free with a Layout whose size class disagrees with the block's span",
            a,
            size,
            align,
        );
    }
    let (w, b) = side_bit(a);
    if w.fetch_and(!b, Ordering::Relaxed) & b == 0 {
        fault(
            "double free (or free of an address that is not a live block)",
            a,
            size,
            align,
        );
    }
}

/// Checks a C `free` of `p` (not null; no `Layout`: the block's kind comes from its span, read
/// only once `p` is known to be in one of our chunks) and clears its live bit; aborts on
/// misuse. A pointer at a chunk boundary must be a live huge object (`huge_live` reads its
/// header, once that page is known to be mapped).
pub(crate) fn on_c_free(p: *mut u8, huge_live: impl FnOnce() -> bool) {
    let a = p as usize;
    if a.is_multiple_of(CHUNK_SIZE) {
        check_huge_live(p, 0, 0, huge_live);
        return;
    }
    let s = chunk_span(p, 0, 0);
    let kind = match s.class.get() as usize {
        // A medium object's span has class 0, a size class's never.
        0 => Kind::Medium(s.npages.get() as usize),
        crate::span::TINY_CLASS => Kind::Tiny,
        class => Kind::Small(class),
    };
    on_free(p, 0, 0, kind);
}

/// Checks that `p`, passed to C `realloc` or `malloc_usable_size`, is a live block of ours,
/// reading nothing through it before it is known to be in one of our chunks (or a mapped huge
/// object's header): aborts with the report otherwise, as [`on_c_free`] does. The block stays
/// live.
pub(crate) fn on_c_use(p: *mut u8, huge_live: impl FnOnce() -> bool) {
    on_c_free(p, huge_live);
    if !(p as usize).is_multiple_of(CHUNK_SIZE) {
        // `on_c_free` took a chunk-backed block's live bit: it is still the caller's.
        on_alloc(p);
    }
}

/// Checks that `p` is a live chunk-backed block (for `realloc` in place).
pub(crate) fn check_live(p: *mut u8, size: usize, align: usize, kind: Kind) {
    on_free(p, size, align, kind);
    on_alloc(p);
}

/// Checks that the huge object at `p` is live: its header page is mapped and carries the live
/// magic. Aborts otherwise.
pub(crate) fn check_huge(
    p: *mut u8,
    size: usize,
    align: usize,
    magic_ok: impl FnOnce() -> bool,
    layout: impl FnOnce() -> (usize, usize),
) {
    check_huge_live(p, size, align, magic_ok);
    let a = p as usize;
    let (have_size, have_align) = layout();
    let pages = |n: usize| n.max(1).div_ceil(crate::os::OS_PAGE);
    let page_align = |n: usize| n.max(crate::os::OS_PAGE);
    if pages(size) != pages(have_size) || page_align(align) != page_align(have_align) {
        fault_with(
            "free of a huge object with a Layout whose size or alignment disagrees with the object's",
            a,
            size,
            align,
            Some((have_size, have_align)),
        );
    }
}

/// The liveness half of [`check_huge`]: `p` is page-aligned, outside our chunks, and its
/// header page is mapped and carries the live magic (`magic_ok`, called only then).
fn check_huge_live(p: *mut u8, size: usize, align: usize, magic_ok: impl FnOnce() -> bool) {
    let a = p as usize;
    let hdr = a.wrapping_sub(crate::os::OS_PAGE);
    if !a.is_multiple_of(crate::os::OS_PAGE) || is_chunk(a) {
        fault(
            "free of a pointer this allocator never handed out",
            a,
            size,
            align,
        );
    }
    if !crate::os::is_mapped(hdr) || !magic_ok() {
        fault(
            "double free (or free of a pointer this allocator never handed out)",
            a,
            size,
            align,
        );
    }
}

/// Writes the fault to stderr without allocating, and aborts.
#[cold]
#[inline(never)]
pub(crate) fn fault(what: &str, addr: usize, size: usize, align: usize) -> ! {
    fault_with(what, addr, size, align, None)
}

/// [`fault`], also naming the block's real layout when known.
#[cold]
#[inline(never)]
fn fault_with(
    what: &str,
    addr: usize,
    size: usize,
    align: usize,
    block: Option<(usize, usize)>,
) -> ! {
    let mut buf = [0u8; 512];
    let mut n = 0;
    let mut put = |s: &[u8]| {
        for &c in s {
            if n < buf.len() {
                buf[n] = c;
                n += 1;
            }
        }
    };
    put(b"specalloc (checked mode): ");
    put(what.as_bytes());
    put(b": address 0x");
    let mut hex = [0u8; 16];
    for (i, h) in hex.iter_mut().enumerate() {
        let d = (addr >> ((15 - i) * 4)) & 0xf;
        *h = b"0123456789abcdef"[d];
    }
    put(&hex);
    put(b", layout size ");
    put_dec(&mut put, size);
    put(b" align ");
    put_dec(&mut put, align);
    if let Some((size, align)) = block {
        put(b"; the object was allocated with size ");
        put_dec(&mut put, size);
        put(b" align ");
        put_dec(&mut put, align);
    }
    put(b"\n");
    crate::os::write_stderr(&buf[..n]);
    crate::os::abort()
}

fn put_dec(put: &mut impl FnMut(&[u8]), mut v: usize) {
    let mut d = [0u8; 20];
    let mut i = d.len();
    loop {
        i -= 1;
        d[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    put(&d[i..]);
}
