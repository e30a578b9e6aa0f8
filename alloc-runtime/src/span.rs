//! Span descriptors: a run of pages holding the blocks of one size class (or one large object).
//!
//! A span is *owned* by at most one thread heap. The owner pops and pushes the span's local free
//! list with plain loads and stores; every other thread hands blocks back through the span's
//! atomic remote list ([`crate::remote`]). A span nobody owns (abandoned by an exited thread) sits
//! in its class's central pool, and whoever holds that pool's lock acts as its owner.
//!
//! Descriptors live in the header of their chunk ([`crate::chunk`]), one per page, and start out
//! as all-zero bytes from the OS: every field's zero is its "unused" value.

use crate::raw;
use core::cell::Cell;
use core::sync::atomic::{AtomicU32, AtomicU8, AtomicUsize};

use crate::size_class::{class_pages, class_size, NUM_CLASSES};

/// Span class of the tiny allocator: 4-byte blocks for objects of 1 to 4 bytes (after Go's 67
/// classes). Its blocks link through 4-byte chunk offsets instead of pointers (see
/// [`Span::push_local`]); every other class links through pointers.
pub(crate) const TINY_CLASS: usize = NUM_CLASSES;
/// Span classes: Go's classes (index 0 unused) and the tiny class.
pub(crate) const SPAN_CLASSES: usize = NUM_CLASSES + 1;
/// Bytes per block of the tiny class.
pub(crate) const TINY_SIZE: usize = 4;

/// Block size of a span class.
#[inline(always)]
pub(crate) const fn span_block_size(class: usize) -> usize {
    if class == TINY_CLASS {
        TINY_SIZE
    } else {
        class_size(class)
    }
}

/// Pages per span of a span class.
#[inline(always)]
pub(crate) const fn span_pages(class: usize) -> usize {
    if class == TINY_CLASS {
        1
    } else {
        class_pages(class)
    }
}

/// Whole blocks in a span of a span class.
#[inline(always)]
pub(crate) const fn span_blocks(class: usize) -> usize {
    span_pages(class) * crate::size_class::PAGE_SIZE / span_block_size(class)
}

// A remote word counts its list's blocks in its bits from `remote::COUNT_SHIFT` up: every
// span's blocks must fit.
const _: () = {
    let mut c = 1;
    while c < SPAN_CLASSES {
        assert!(span_blocks(c) < 1 << (usize::BITS - crate::remote::COUNT_SHIFT));
        c += 1;
    }
};

/// Reads a narrow link (a tiny block's first four bytes): the chunk offset of the next block,
/// turned back into its address, or null.
///
/// # Safety
/// `b` is a free tiny block the caller owns.
#[inline(always)]
pub(crate) unsafe fn narrow_next(b: *mut Block) -> *mut Block {
    // SAFETY: guaranteed by the caller; the link is the same encoding as a remote list's.
    unsafe { crate::remote::link_of(b as usize) as *mut Block }
}

/// A free block: its first word links to the next free block.
#[repr(C)]
pub(crate) struct Block {
    pub(crate) next: *mut Block,
}

/// The span's pages are free in the page heap.
pub(crate) const STATE_FREE: u8 = 0;
/// The span serves a size class.
pub(crate) const STATE_SMALL: u8 = 1;
/// The span holds one large object.
pub(crate) const STATE_LARGE: u8 = 2;

/// Which list of its owner (or of the central pool) a span is on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub(crate) enum ListTag {
    /// On no list (being set up, or a large object).
    None = 0,
    /// The owner's current span for its class (pinned: `used` holds one extra count).
    Current = 1,
    /// On the owner's partial list: owned, not current, has free blocks (or, let go of as an
    /// unused class's current span, may have none until a refill looks at it).
    Partial = 2,
    /// On the owner's full list: owned, had no free block when it was parked.
    Full = 3,
    /// In the central pool of its class, owned by nobody.
    Central = 4,
    /// Empty and off every list, but still on its owner's delayed list: it goes back to the
    /// page heap when the owner takes it off that list.
    Releasing = 5,
}

/// Owner-word tag: the span is on its owner's full list, so a local free must take the slow path
/// (to move it back to the partial list).
pub(crate) const OWNER_FULL: usize = 1;

/// A span's count of used blocks: written by its owner only, with plain stores (release, which
/// costs nothing on x86_64), and read by a trimmer holding the owner's heap's trim lock (see
/// `trim_proto.rs`), so an atomic rather than a `Cell`. The fast paths change it with one
/// instruction to memory: [`Count::add_current`] where nobody else reads it, [`Span::drop_used`]
/// where the trimmer may.
#[repr(transparent)]
pub(crate) struct Count(AtomicU32);

impl Count {
    /// The count (owner, or the trim lock's holder).
    #[inline(always)]
    pub(crate) fn get(&self) -> u32 {
        crate::raw::load_u32(&self.0)
    }

    /// Sets the count (owner, or the trim lock's holder).
    #[inline(always)]
    pub(crate) fn set(&self, v: u32) {
        crate::raw::store_u32_release(&self.0, v)
    }

    /// Adds one block handed out from the owner's **current** span: a plain increment (one
    /// `add` to memory on x86_64).
    ///
    /// # Safety
    /// The caller owns the span and it is its current span for its class. Nobody but the owner
    /// reads a current span's count (the trimmer reads only listed spans', under the trim lock,
    /// and a span becomes or stops being current only in the owner's slow paths, which hold that
    /// lock), so this non-atomic access races with nothing.
    #[inline(always)]
    pub(crate) unsafe fn add_current(&self) {
        // SAFETY: no concurrent access (above); the pointer is the live, aligned atomic's.
        unsafe { *self.0.as_ptr() += 1 }
    }

    /// The atomic, for the trim protocol's reads.
    #[inline(always)]
    pub(crate) fn atomic(&self) -> &AtomicU32 {
        &self.0
    }
}

const _: () = assert!(core::mem::size_of::<Count>() == 4);

/// A span descriptor: two cache lines, one for what every thread reads or a remote free writes,
/// one for what the owner's fast paths write, so that an owner allocating and freeing in a
/// span does not take the line away from threads freeing into it, nor they from the owner.
#[repr(C, align(64))]
pub(crate) struct Span {
    // ---- shared: read by every free, written by remote frees and on rare changes ----
    /// The owning heap's address, tagged with [`OWNER_FULL`]; 0 when nobody owns the span.
    pub(crate) owner: AtomicUsize,
    /// Remote-free list head and notification state; see [`crate::remote`].
    pub(crate) remote: AtomicUsize,
    /// Link of the owner's delayed list while the span is on it (see [`crate::remote`]).
    pub(crate) delayed_next: AtomicUsize,
    /// First byte of the span.
    pub(crate) start: Cell<*mut u8>,
    /// Requested bytes of a large object.
    pub(crate) large_size: Cell<usize>,
    /// Pages in the span.
    pub(crate) npages: Cell<u32>,
    /// Size class (0 for a large object).
    pub(crate) class: Cell<u8>,
    /// [`STATE_FREE`], [`STATE_SMALL`] or [`STATE_LARGE`].
    pub(crate) state: AtomicU8,
    /// Up to the owner's line.
    #[cfg(not(feature = "profiling"))]
    _pad: [u8; 18],
    /// Up to the profiler's fields.
    #[cfg(feature = "profiling")]
    _pad: [u8; 2],
    /// A sampled large object's (or sampled small object's page run's) record in the heap
    /// profiler's table of stacks (`prof`); 0 for every other span.
    #[cfg(feature = "profiling")]
    pub(crate) prof: crate::prof::Sampled,
    /// Up to the owner's line.
    #[cfg(feature = "profiling")]
    _pad2: [u8; 4],
    // ---- the owner's: touched by its fast paths ----
    /// Owner-local free list.
    pub(crate) free: Cell<*mut Block>,
    /// Blocks handed out and not yet freed locally, plus one while the span is current.
    pub(crate) used: Count,
    /// Every block on `free` reads zero past its first word.
    pub(crate) free_zero: Cell<bool>,
    /// Which list the span is on; see [`ListTag`].
    pub(crate) list: Cell<u8>,
    /// The never-used tail `[bump, end)` reads zero (its pages were fresh when the span was made).
    pub(crate) bump_zero: Cell<bool>,
    /// Next never-used block.
    pub(crate) bump: Cell<*mut u8>,
    /// End of the last whole block.
    pub(crate) end: Cell<*mut u8>,
    /// List links (owner's partial/full lists, or the central pool).
    pub(crate) next: Cell<*mut Span>,
    pub(crate) prev: Cell<*mut Span>,
}

const _: () = assert!(core::mem::size_of::<Span>() == 128);
const _: () = assert!(core::mem::offset_of!(Span, free) == 64);

impl Span {
    /// Takes one block off `used` for a local free and says whether it reached zero: on x86_64
    /// one `sub` to memory and a jump on its flags.
    ///
    /// The span may be listed, so a trimmer holding the trim lock may read the count at the same
    /// time: the subtraction is a load and a release store of the aligned word (the owner is its
    /// only writer, so the two need not be one atomic step), which is what `trim_proto.rs`
    /// requires of it.
    ///
    /// # Safety
    /// The caller owns the span.
    #[inline(always)]
    pub(crate) unsafe fn drop_used(&self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            // The asm is a compiler barrier for memory (no `nomem`): the caller's earlier stores
            // (the freed block's link) are not moved past it, and x86_64 orders them before it.
            // SAFETY: the owner alone writes the count; an aligned 4-byte `sub` is single-copy
            // atomic (readers see the old or the new count) and a release store on x86_64.
            unsafe {
                core::arch::asm!(
                    "sub dword ptr [{s} + {used}], 1",
                    "jnz {more}",
                    s = in(reg) self as *const Span,
                    used = const core::mem::offset_of!(Span, used),
                    more = label { return false; },
                    options(nostack),
                );
            }
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let used = self.used.get() - 1;
            self.used.set(used);
            used == 0
        }
    }

    /// An all-zero descriptor (the same as fresh OS memory).
    pub(crate) const fn zeroed() -> Span {
        Span {
            free: Cell::new(core::ptr::null_mut()),
            used: Count(AtomicU32::new(0)),
            free_zero: Cell::new(false),
            class: Cell::new(0),
            list: Cell::new(0),
            bump_zero: Cell::new(false),
            owner: AtomicUsize::new(0),
            remote: AtomicUsize::new(0),
            bump: Cell::new(core::ptr::null_mut()),
            end: Cell::new(core::ptr::null_mut()),
            next: Cell::new(core::ptr::null_mut()),
            prev: Cell::new(core::ptr::null_mut()),
            start: Cell::new(core::ptr::null_mut()),
            npages: Cell::new(0),
            state: AtomicU8::new(STATE_FREE),
            large_size: Cell::new(0),
            delayed_next: AtomicUsize::new(0),
            #[cfg(not(feature = "profiling"))]
            _pad: [0; 18],
            #[cfg(feature = "profiling")]
            _pad: [0; 2],
            #[cfg(feature = "profiling")]
            prof: crate::prof::Sampled::none(),
            #[cfg(feature = "profiling")]
            _pad2: [0; 4],
        }
    }

    /// The list tag.
    #[inline]
    pub(crate) fn tag(&self) -> ListTag {
        match self.list.get() {
            1 => ListTag::Current,
            2 => ListTag::Partial,
            3 => ListTag::Full,
            4 => ListTag::Central,
            5 => ListTag::Releasing,
            _ => ListTag::None,
        }
    }

    /// Sets the list tag.
    #[inline]
    pub(crate) fn set_tag(&self, t: ListTag) {
        self.list.set(t as u8);
    }

    /// Whether the span has a block to hand out without collecting remote frees.
    #[inline]
    pub(crate) fn has_local_free(&self) -> bool {
        !self.free.get().is_null() || self.bump.get() < self.end.get()
    }

    /// Whether the span's blocks link through narrow (4-byte) links: the tiny class.
    #[inline(always)]
    pub(crate) fn is_narrow(&self) -> bool {
        self.class.get() as usize == TINY_CLASS
    }

    /// Pushes `b` on the local free list of a span of any class (the caller owns the span).
    ///
    /// # Safety
    /// `b` must be a block of this span that is not on any list, and the caller must own the span.
    #[inline(always)]
    pub(crate) unsafe fn push_local(&self, b: *mut Block) {
        if self.is_narrow() {
            // SAFETY: forwarded.
            unsafe { self.push_narrow(b) }
        } else {
            // SAFETY: forwarded.
            unsafe { self.push_wide(b) }
        }
    }

    /// [`Span::push_local`] for a class of 8 bytes or more: the link is a pointer.
    ///
    /// # Safety
    /// As for [`Span::push_local`], and the span is not of the tiny class.
    #[inline(always)]
    pub(crate) unsafe fn push_wide(&self, b: *mut Block) {
        // SAFETY: the caller guarantees `b` is a free block of this span, at least 8 bytes.
        unsafe { raw::as_mut(b).next = raw::get(&self.free) };
        raw::set(&self.free, b);
        raw::set(&self.free_zero, false);
    }

    /// [`Span::push_local`] for the tiny class: the link is the next block's chunk offset.
    ///
    /// # Safety
    /// As for [`Span::push_local`], and the span is of the tiny class.
    #[inline(always)]
    pub(crate) unsafe fn push_narrow(&self, b: *mut Block) {
        // SAFETY: the caller guarantees `b` is a free 4-byte block of this span; the list's
        // blocks are in the same chunk.
        unsafe { crate::remote::set_link(b as usize, raw::get(&self.free) as usize) };
        raw::set(&self.free, b);
        raw::set(&self.free_zero, false);
    }

    /// Pops a block off the local free list, of a span of any class (slow paths; the fast paths
    /// inline their class's half). Returns null when the list is empty.
    ///
    /// # Safety
    /// The caller owns the span.
    #[inline]
    pub(crate) unsafe fn pop_local(&self) -> *mut Block {
        let b = self.free.get();
        if b.is_null() {
            return b;
        }
        // SAFETY: `b` heads our free list, so it is a free block of this span.
        let next = unsafe {
            if self.is_narrow() {
                narrow_next(b)
            } else {
                (*b).next
            }
        };
        self.free.set(next);
        b
    }

    /// Links up to a page's worth of never-used blocks onto the (empty) free list.
    /// Returns whether any block was added.
    ///
    /// # Safety
    /// The caller owns the span and its free list is empty.
    pub(crate) unsafe fn extend(&self) -> bool {
        debug_assert!(self.free.get().is_null());
        let bump = self.bump.get();
        let end = self.end.get();
        if bump >= end {
            return false;
        }
        let size = span_block_size(self.class.get() as usize);
        // At least one block, otherwise as many as fit in 4 KiB, so fresh pages are touched
        // only as they are needed.
        let n = core::cmp::max(1, 4096 / size).min((end as usize - bump as usize) / size);
        let narrow = self.is_narrow();
        let mut p = bump;
        for i in 0..n {
            // SAFETY: `p` stays within [bump, end), which belongs to this span and holds no live
            // block; each block is at least 4 bytes (8 for wide links) and aligned for its link.
            unsafe {
                let nextp = p.add(size);
                let next = if i + 1 == n {
                    core::ptr::null_mut()
                } else {
                    nextp
                };
                if narrow {
                    crate::remote::set_link(p as usize, next as usize);
                } else {
                    (*(p as *mut Block)).next = next.cast();
                }
                p = nextp;
            }
        }
        self.free.set(bump as *mut Block);
        self.free_zero.set(self.bump_zero.get());
        self.bump.set(p);
        true
    }

    /// Reads the owner word.
    #[inline(always)]
    pub(crate) fn owner_word(&self) -> usize {
        raw::load_usize(&self.owner)
    }

    /// Whether the owner word is exactly `owner` (a relaxed load and a comparison): on x86_64
    /// one `cmp` with memory and a jump on its flags, where the compiler loads an atomic into a
    /// register first.
    #[inline(always)]
    pub(crate) fn owner_is(&self, owner: usize) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: reads the aligned owner word of a live descriptor, which an aligned 8-byte
            // `cmp` does single-copy atomically, as a relaxed load; writes nothing.
            unsafe {
                core::arch::asm!(
                    "cmp qword ptr [{s} + {off}], {o}",
                    "jne {other}",
                    s = in(reg) self as *const Span,
                    o = in(reg) owner,
                    off = const core::mem::offset_of!(Span, owner),
                    other = label { return false; },
                    options(readonly, nostack),
                );
            }
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            raw::load_usize(&self.owner) == owner
        }
    }
}

/// A span descriptor that may live in a `static` (the never-allocating sentinel).
#[repr(transparent)]
pub(crate) struct SyncSpan(pub(crate) Span);
// SAFETY: the sentinel span is never written: its free list is null and its bump region empty,
// so every path that would write to it takes the slow path first, which never touches it.
unsafe impl Sync for SyncSpan {}

/// The sentinel every empty class slot points at: allocation from it always misses.
pub(crate) static EMPTY_SPAN: SyncSpan = SyncSpan(Span::zeroed());

/// Address of [`EMPTY_SPAN`].
#[inline(always)]
pub(crate) fn empty_span() -> *mut Span {
    &EMPTY_SPAN.0 as *const Span as *mut Span
}
