//! Thread heaps: the per-thread cache in front of the central pools and the page heap.
//!
//! Each thread allocates from its own *current* span per class: the fast path is a thread-local
//! load, two dependent loads and a branch, with no atomic and no lock. Frees of blocks whose span
//! this thread owns are a push on that span's free list, again without atomics. Everything else
//! (refilling, collecting remote frees, moving spans between lists, thread exit) is on the slow
//! path, out of line.
//!
//! Span lists of a heap, per class:
//! - *current*: the span allocated from; pinned (`used` holds one extra count) so it is never
//!   given back while current, which keeps an alloc/free loop from thrashing the page heap;
//! - *partial*: owned spans with free blocks;
//! - *full* (one list for all classes): owned spans parked with no free block. Their owner word
//!   carries [`OWNER_FULL`], so a local free goes to the slow path to move them back to partial,
//!   and they ask for a notification of their next remote free (see [`crate::remote`]).
//!
//! A span whose last block is freed goes back to the page heap. When a thread exits, its spans
//! that still hold live blocks go to the central pool of their class, owned by nobody; a later
//! refill of that class adopts them. Remote frees keep working throughout: they only touch the
//! span's atomic remote list.

use core::cell::Cell;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use crate::chunk::{self, span_of};
use crate::lock::SpinLock;
use crate::remote;
use crate::span::{
    empty_span, span_block_size, span_first, span_pages, Block, ListTag, Span, EMPTY_SPAN,
    OWNER_FULL, SPAN_CLASSES, STATE_SMALL, TINY_CLASS,
};
use crate::stats;

/// Per-class state of a heap, laid out so the fast path touches one cache line.
#[repr(C)]
pub(crate) struct ClassCache {
    /// The span allocated from ([`empty_span`] when none).
    pub(crate) current: Cell<*mut Span>,
    /// Allocations of this class by this heap (owner writes, anyone reads).
    pub(crate) allocs: AtomicU64,
    /// Frees of this class by this heap, local and remote.
    pub(crate) frees: AtomicU64,
    /// Head of the partial list.
    partial: Cell<*mut Span>,
}

/// A thread heap.
#[repr(C)]
pub(crate) struct Heap {
    pub(crate) classes: [ClassCache; SPAN_CLASSES],
    /// The current tiny block (null when none).
    tiny_ptr: Cell<*mut u8>,
    /// Bytes used in the current tiny block; [`TINY_BLOCK`] when there is none, so nothing fits.
    tiny_off: Cell<usize>,
    /// Tiny objects allocated by this heap.
    pub(crate) tiny_allocs: AtomicU64,
    /// `tiny_allocs` when the current tiny block became current.
    tiny_base: Cell<u64>,
    /// Tiny objects freed by this heap's thread.
    pub(crate) tiny_frees: AtomicU64,
    /// This thread's frees of objects of its current tiny block.
    tiny_cur_frees: Cell<u8>,
    /// Bytes of empty spans kept on the partial lists (at most [`EMPTY_KEEP`]).
    empty_kept: Cell<usize>,
    /// Head of the full list (all classes).
    full: Cell<*mut Span>,
    /// Blocks other threads delivered because their span was parked full (see `remote`).
    pub(crate) delayed: AtomicUsize,
    /// Blocks this heap's thread freed into spans it does not own.
    pub(crate) remote_frees: AtomicU64,
    /// Next heap in the registry of all heaps (written once, before publication).
    all_next: Cell<*mut Heap>,
    /// Next heap in the pool of unused heaps.
    pool_next: Cell<*mut Heap>,
    /// A thread is using this heap.
    pub(crate) active: AtomicBool,
}

impl Heap {
    const fn new(empty: *mut Span) -> Heap {
        Heap {
            classes: [const {
                ClassCache {
                    current: Cell::new(ptr::null_mut()),
                    allocs: AtomicU64::new(0),
                    frees: AtomicU64::new(0),
                    partial: Cell::new(ptr::null_mut()),
                }
            }; SPAN_CLASSES],
            tiny_ptr: Cell::new(ptr::null_mut()),
            tiny_off: Cell::new(TINY_BLOCK),
            tiny_allocs: AtomicU64::new(0),
            tiny_base: Cell::new(0),
            tiny_frees: AtomicU64::new(0),
            tiny_cur_frees: Cell::new(0),
            empty_kept: Cell::new(0),
            full: Cell::new(ptr::null_mut()),
            delayed: AtomicUsize::new(0),
            remote_frees: AtomicU64::new(0),
            all_next: Cell::new(ptr::null_mut()),
            pool_next: Cell::new(ptr::null_mut()),
            active: AtomicBool::new(false),
        }
        .with_current(empty)
    }

    /// Points every class at the sentinel span.
    const fn with_current(mut self, empty: *mut Span) -> Heap {
        let mut j = 0;
        while j < SPAN_CLASSES {
            self.classes[j].current = Cell::new(empty);
            j += 1;
        }
        self
    }
}

/// Bytes of empty spans a heap keeps for reuse before it gives them back to the page heap.
const EMPTY_KEEP: usize = 2 << 20;

/// A heap that may live in a `static`.
#[repr(transparent)]
struct SyncHeap(Heap);
// SAFETY: the sentinel heap is never written: every class's current span is the sentinel span,
// whose free list is empty, so allocation leaves the fast path before writing, and no span's
// owner word ever holds the sentinel's address, so frees never treat it as their owner.
unsafe impl Sync for SyncHeap {}

/// The heap of threads that have not allocated yet (or have exited).
static EMPTY_HEAP: SyncHeap = SyncHeap(Heap::new(&EMPTY_SPAN.0 as *const Span as *mut Span));

#[inline(always)]
fn empty_heap() -> *mut Heap {
    &EMPTY_HEAP.0 as *const Heap as *mut Heap
}

thread_local! {
    /// This thread's heap; the sentinel until the first slow-path allocation.
    static HEAP: Cell<*mut Heap> = const { Cell::new(&EMPTY_HEAP.0 as *const Heap as *mut Heap) };
}

thread_local! {
    /// This thread's heap as seen by the size-specialised routines: the sentinel until the first
    /// such routine has checked that this allocator is the global allocator.
    static SPEC_HEAP: Cell<*mut Heap> = const { Cell::new(&EMPTY_HEAP.0 as *const Heap as *mut Heap) };
}

/// This thread's heap (the sentinel if it has none).
#[inline(always)]
pub(crate) fn current_heap() -> *mut Heap {
    HEAP.with(|h| h.get())
}

/// This thread's heap for the size-specialised routines (see [`ensure_spec_heap`]).
#[inline(always)]
fn spec_heap() -> *mut Heap {
    SPEC_HEAP.with(|h| h.get())
}

/// Whether this allocator is the program's global allocator: 0 not checked yet, 1 yes, 2 no.
static GLOBAL_CHECK: core::sync::atomic::AtomicU8 = core::sync::atomic::AtomicU8::new(0);

/// Makes the size-specialised routines usable on this thread: gives it a heap, and checks (once
/// per process) that this allocator is the global allocator. Blocks from these routines are
/// handed to `Box`/`Vec`, which free them through the global allocator: with another one
/// installed that would corrupt memory, so it panics instead, naming the fix.
#[cold]
#[inline(never)]
fn ensure_spec_heap() -> bool {
    let mut heap = current_heap();
    if heap == empty_heap() {
        heap = match init_heap() {
            Some(h) => h,
            None => return false,
        };
    }
    if GLOBAL_CHECK.load(Ordering::Acquire) != 1 {
        check_global_allocator();
    }
    SPEC_HEAP.with(|c| c.set(heap));
    true
}

#[cold]
fn check_global_allocator() {
    let layout = core::alloc::Layout::from_size_align(24, 8).expect("valid layout");
    // SAFETY: a non-zero-sized layout; the block is freed right below with the same layout.
    let p = unsafe { std::alloc::alloc(layout) };
    let ours = !p.is_null() && chunk::owns(p);
    if !p.is_null() {
        // SAFETY: allocated just above by the global allocator with `layout`.
        unsafe { std::alloc::dealloc(p, layout) };
    }
    if ours {
        GLOBAL_CHECK.store(1, Ordering::Release);
        return;
    }
    GLOBAL_CHECK.store(2, Ordering::Release);
    panic!(
        "specalloc: a size-specialised allocation routine was called, but specalloc is not the \
         global allocator, so the Box or Vec it built would be freed by another allocator. \
         Install it in your binary: `#[global_allocator] static GLOBAL: specalloc::SpecAlloc = \
         specalloc::SpecAlloc;` (or build with the `no-size-specialized` feature, which sends \
         every specialised entry point to the global allocator)."
    );
}

/// `x += 1` on a counter only this thread writes: a plain load and store, no atomic RMW.
#[inline(always)]
fn inc(c: &AtomicU64) {
    c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

// ---------------------------------------------------------------------------------------------
// Fast paths
// ---------------------------------------------------------------------------------------------

/// Pops a block of `class` from `heap`'s current span; null when the span has none.
///
/// # Safety
/// `heap` is this thread's heap or the sentinel.
#[inline(always)]
unsafe fn pop(heap: *mut Heap, class: usize) -> (*mut u8, bool) {
    // SAFETY: `heap` is this thread's heap or the sentinel; both are valid for reads, and we
    // write only after finding a block, which the sentinel never has. The current span is owned
    // by this heap (or is the sentinel), so its free list is ours to pop.
    unsafe {
        let cc = (*heap).classes.get_unchecked(class);
        let span = &*cc.current.get();
        let b = span.free.get();
        if b.is_null() {
            return (b.cast(), false);
        }
        let fresh = span.free_zero.get();
        span.free.set((*b).next);
        span.used.set(span.used.get() + 1);
        inc(&cc.allocs);
        #[cfg(feature = "checked")]
        if class != TINY_CLASS {
            crate::checked::on_alloc(b.cast());
        }
        (b.cast(), fresh)
    }
}

/// Allocates a block of `class` (not zeroed). Null only when the OS refuses memory.
#[inline(always)]
pub(crate) fn alloc_small(class: usize) -> *mut u8 {
    // SAFETY: the current heap is this thread's heap or the sentinel.
    let (b, _) = unsafe { pop(current_heap(), class) };
    if b.is_null() {
        // SAFETY: any thread may take the slow path.
        return unsafe { alloc_slow(class, None) };
    }
    b
}

/// Allocates a block of `class` whose first `size` bytes read zero.
#[inline(always)]
pub(crate) fn alloc_small_zeroed(class: usize, size: usize) -> *mut u8 {
    // SAFETY: the current heap is this thread's heap or the sentinel.
    let (b, fresh) = unsafe { pop(current_heap(), class) };
    if b.is_null() {
        // SAFETY: any thread may take the slow path.
        return unsafe { alloc_slow(class, Some(size)) };
    }
    // SAFETY: the block is ours and at least `size` bytes long.
    unsafe { clear_block(b, size, fresh) };
    b
}

/// The size-specialised routines' fast path: like [`alloc_small`] but through [`spec_heap`],
/// so that the first call on a thread checks that this allocator is the global one.
#[inline(always)]
pub(crate) fn alloc_small_spec(class: usize) -> *mut u8 {
    // SAFETY: the spec heap is this thread's heap or the sentinel.
    let (b, _) = unsafe { pop(spec_heap(), class) };
    if b.is_null() {
        return alloc_slow_spec(class, None);
    }
    b
}

/// Zeroing variant of [`alloc_small_spec`].
#[inline(always)]
pub(crate) fn alloc_small_zeroed_spec(class: usize, size: usize) -> *mut u8 {
    // SAFETY: the spec heap is this thread's heap or the sentinel.
    let (b, fresh) = unsafe { pop(spec_heap(), class) };
    if b.is_null() {
        return alloc_slow_spec(class, Some(size));
    }
    // SAFETY: the block is ours and at least `size` bytes long.
    unsafe { clear_block(b, size, fresh) };
    b
}

#[cold]
#[inline(never)]
fn alloc_slow_spec(class: usize, zero: Option<usize>) -> *mut u8 {
    if !ensure_spec_heap() {
        return ptr::null_mut();
    }
    // SAFETY: any thread may take the slow path.
    unsafe { alloc_slow(class, zero) }
}

/// Clears the first `size` bytes of a block just taken from a free list; a block from a fresh
/// span only has its link word to clear.
///
/// # Safety
/// `p` is a block of at least `size` bytes (and at least 8) that the caller owns.
#[inline(always)]
unsafe fn clear_block(p: *mut u8, size: usize, fresh: bool) {
    if fresh {
        // SAFETY: the block is ours and at least one word long.
        unsafe { (p as *mut usize).write(0) };
    } else if size >= 128 {
        // From 128 bytes up libc's memset (vectorised for the CPU at load time) beats the
        // baseline-x86-64 stores the compiler inlines for a constant size.
        // SAFETY: the block is ours and at least `size` bytes long.
        unsafe { libc::memset(p.cast(), 0, size) };
    } else {
        // SAFETY: the block is ours and at least `size` bytes long.
        unsafe { ptr::write_bytes(p, 0, size) };
    }
}

/// Frees a small block.
///
/// # Safety
/// `p` must be a live block returned by a small-class allocation of this allocator.
#[inline(always)]
pub(crate) unsafe fn free_small(p: *mut u8) {
    let heap = current_heap();
    // SAFETY: `p` is a live small block, so its span descriptor is valid.
    let span = unsafe { &*span_of(p) };
    if span.owner_word() != heap as usize {
        // SAFETY: forwarded from our caller.
        return unsafe { free_slow(heap, span, p) };
    }
    // SAFETY: this heap owns the span (owner word, untagged), so its free list and counters are
    // ours; `p` is one of its blocks and is no longer in use.
    unsafe {
        span.push_local(p.cast());
        let used = span.used.get() - 1;
        span.used.set(used);
        inc(&(*heap)
            .classes
            .get_unchecked(span.class.get() as usize)
            .frees);
        if used == 0 {
            span_emptied(&*heap, span);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The tiny allocator
// ---------------------------------------------------------------------------------------------
//
// Objects of 1 to 15 bytes are carved, Go-style, from the thread's current 16-byte tiny block at
// an offset aligned by their size. Unlike Go, they are freed one by one, from any thread, so each
// block has live counts in the header of its tiny span (a one-page span whose first
// `TINY_HEADER` bytes hold them), found from a pointer by arithmetic. The protocol is in
// `tiny_proto.rs` (shared with the loom model `tests/loom_tiny.rs`); in short:
//
// - carving from the current block touches no count (the heap counts what it carved);
// - the owner's frees of the current block only bump a heap counter; its frees of other blocks
//   are a plain store of the block's local count and a load of its word: no atomic RMW;
// - other threads add one to the block's remote count (one atomic); if that does not settle
//   whether the block died, they mark it dirty in the span header and hand the span's *token*
//   (an address in the header, never a block) to the owner through the span's remote-free list,
//   and the owner re-checks the dirty blocks when it collects that list;
// - whoever finds a block dead claims it with one compare-and-swap and frees the 16-byte block
//   like any small block; 1-byte objects never need a link word.
//
// A thread freeing remotely holds the span's `tiny_inflight` count while it touches the span
// header, and a span is not given back to the page heap while that count is non-zero.

/// Size of a tiny block.
pub(crate) const TINY_BLOCK: usize = 16;

/// The liveness protocol of tiny blocks (shared with the loom model `tests/loom_tiny.rs`).
mod tiny_proto {
    #![allow(dead_code)]
    use core::sync::atomic::{AtomicU16, AtomicU8, Ordering};

    include!("tiny_proto.rs");
}

/// Tiny span header: the token's link word.
const TINY_TOKEN: usize = 0;
/// Tiny span header: whether the token is on its way to the owner (AtomicU8).
const TINY_TOKEN_SENT: usize = 8;
/// Tiny span header: one dirty bit per 16-byte slot of the page (64 bytes).
const TINY_DIRTY: usize = 64;
/// Tiny span header: one word (u16) per slot.
const TINY_WORDS: usize = 128;
/// Tiny span header: one owner-free count (u8) per slot.
const TINY_LOCALS: usize = TINY_WORDS + 2 * (crate::size_class::PAGE_SIZE / 16);
const _: () = assert!(TINY_LOCALS + crate::size_class::PAGE_SIZE / 16 <= crate::span::TINY_HEADER);

#[inline(always)]
fn page_of(p: usize) -> usize {
    p & !(crate::size_class::PAGE_SIZE - 1)
}

#[inline(always)]
fn slot_of(p: usize) -> usize {
    (p & (crate::size_class::PAGE_SIZE - 1)) >> 4
}

/// The word of the tiny block holding `p`.
#[inline(always)]
fn tiny_word(p: usize) -> &'static AtomicU16 {
    // SAFETY: `p` is in a live tiny block, whose span page starts with the header.
    unsafe { &*((page_of(p) + TINY_WORDS + 2 * slot_of(p)) as *const AtomicU16) }
}

/// The owner-free count of the tiny block holding `p`.
#[inline(always)]
fn tiny_local(p: usize) -> &'static AtomicU8 {
    // SAFETY: as in `tiny_word`.
    unsafe { &*((page_of(p) + TINY_LOCALS + slot_of(p)) as *const AtomicU8) }
}

/// Go's alignment of a tiny object's offset, from its size alone.
#[inline(always)]
pub(crate) const fn tiny_align(size: usize) -> usize {
    if size & 7 == 0 {
        8
    } else if size & 3 == 0 {
        4
    } else if size & 1 == 0 {
        2
    } else {
        1
    }
}

/// Whether a layout is served by the tiny allocator.
#[inline(always)]
pub(crate) const fn is_tiny(size: usize, align: usize) -> bool {
    size.wrapping_sub(1) < TINY_BLOCK - 1 && align <= 8
}

/// Allocates a tiny object of `size` bytes (1 to 15) at alignment `align` (at most 8). Tiny
/// objects always read zero: their blocks are cleared when taken and never reused piecemeal.
#[inline(always)]
pub(crate) fn alloc_tiny(size: usize, align: usize) -> *mut u8 {
    alloc_tiny_in(current_heap(), size, align, false)
}

/// The tiny size-specialised routines' fast path (see [`alloc_small_spec`]).
#[inline(always)]
pub(crate) fn alloc_tiny_spec(size: usize, align: usize) -> *mut u8 {
    alloc_tiny_in(spec_heap(), size, align, true)
}

#[inline(always)]
fn alloc_tiny_in(heap: *mut Heap, size: usize, align: usize, spec: bool) -> *mut u8 {
    debug_assert!(is_tiny(size, align));
    let a = if align > tiny_align(size) {
        align
    } else {
        tiny_align(size)
    };
    // SAFETY: `heap` is this thread's heap or the sentinel, whose `tiny_off` is TINY_BLOCK so
    // nothing fits and it is never written. A current block is 16 bytes owned by this heap.
    unsafe {
        let h = &*heap;
        let off = (h.tiny_off.get() + a - 1) & !(a - 1);
        if off + size <= TINY_BLOCK {
            h.tiny_off.set(off + size);
            inc(&h.tiny_allocs);
            let p = h.tiny_ptr.get().add(off);
            #[cfg(feature = "checked")]
            crate::checked::on_alloc(p);
            return p;
        }
        tiny_refill(size, spec)
    }
}

/// Takes a new tiny block for an object of `size` bytes; keeps whichever of the old and new
/// blocks has more room as the current one.
#[inline(never)]
unsafe fn tiny_refill(size: usize, spec: bool) -> *mut u8 {
    if spec && spec_heap() == empty_heap() && !ensure_spec_heap() {
        return ptr::null_mut();
    }
    let b = alloc_small(TINY_CLASS);
    if b.is_null() {
        return b;
    }
    // SAFETY: `alloc_small` succeeded, so this thread has a live heap; `b` is a 16-byte block of
    // a tiny span that we own.
    unsafe {
        let h = &*current_heap();
        (b as *mut [u64; 2]).write([0, 0]);
        let (word, local) = (tiny_word(b as usize), tiny_local(b as usize));
        let old = h.tiny_ptr.get();
        if old.is_null() || size < h.tiny_off.get() {
            if !old.is_null() {
                retire_tiny(h);
            }
            tiny_proto::start(word, local, 0);
            h.tiny_base.set(h.tiny_allocs.load(Ordering::Relaxed));
            h.tiny_cur_frees.set(0);
            h.tiny_ptr.set(b);
            h.tiny_off.set(size);
        } else {
            // A block of its own: not carved from the current block, so keep it out of the
            // current block's carved count.
            tiny_proto::start(word, local, 1);
            h.tiny_base.set(h.tiny_base.get() + 1);
        }
        inc(&h.tiny_allocs);
        #[cfg(feature = "checked")]
        crate::checked::on_alloc(b);
        b
    }
}

/// Stops carving from the current tiny block: publishes how many objects it holds.
///
/// # Safety
/// `h` is this thread's heap and has a current tiny block.
unsafe fn retire_tiny(h: &Heap) {
    let b = h.tiny_ptr.get();
    let carved = (h.tiny_allocs.load(Ordering::Relaxed) - h.tiny_base.get()) as u8;
    debug_assert!(carved <= 16);
    let freed = h.tiny_cur_frees.get();
    h.tiny_ptr.set(ptr::null_mut());
    h.tiny_off.set(TINY_BLOCK);
    h.tiny_cur_frees.set(0);
    if freed == carved {
        // Every object was freed by this thread, so no other thread holds a piece of it.
        // SAFETY: the block is dead and ours.
        unsafe { free_small(b) };
        return;
    }
    tiny_local(b as usize).store(freed, Ordering::Release);
    if tiny_proto::retire(tiny_word(b as usize), freed, carved) {
        // SAFETY: every object of the block was already freed and we claimed it.
        unsafe { free_small(b) };
    }
}

/// Frees a tiny object.
///
/// # Safety
/// `p` is a live tiny object from [`alloc_tiny`].
#[inline(always)]
pub(crate) unsafe fn free_tiny(p: *mut u8) {
    let heap = current_heap();
    let block = p as usize & !(TINY_BLOCK - 1);
    // SAFETY: `heap` is this thread's heap or the sentinel (whose current block is null).
    let h = unsafe { &*heap };
    if block == h.tiny_ptr.get() as usize {
        // Our current block: just count it (the block cannot die while current).
        inc(&h.tiny_frees);
        let freed = h.tiny_cur_frees.get() + 1;
        let allocs = h.tiny_allocs.load(Ordering::Relaxed);
        if allocs - h.tiny_base.get() == freed as u64 {
            // Everything carved from it was freed here (so no other thread can hold a piece):
            // start the block over instead of moving on to a new one.
            // SAFETY: the block is ours and holds no live object.
            unsafe { (block as *mut [u64; 2]).write([0, 0]) };
            h.tiny_off.set(0);
            h.tiny_base.set(allocs);
            h.tiny_cur_frees.set(0);
        } else {
            h.tiny_cur_frees.set(freed);
        }
        return;
    }
    // SAFETY: `p` is in a live tiny block, so its span descriptor is valid.
    let span = unsafe { &*span_of(p) };
    if span.owner_word() & !OWNER_FULL == heap as usize {
        // The span is ours: a plain store of the owner-free count.
        inc(&h.tiny_frees);
        let local = tiny_local(block);
        let n = local.load(Ordering::Relaxed).wrapping_add(1);
        // Release: a remote thread that reads this count and claims the block must see our
        // last use of the object first.
        local.store(n, Ordering::Release);
        if tiny_proto::owner_free(tiny_word(block), n) {
            // SAFETY: the block is dead and claimed by us.
            unsafe { free_small(block as *mut u8) };
        }
        return;
    }
    // SAFETY: forwarded.
    unsafe { free_tiny_remote(heap, span, block) };
}

/// Frees a tiny object of a block whose span this thread does not own.
///
/// # Safety
/// `block` is a live tiny block of `span` holding the object being freed.
#[inline(never)]
unsafe fn free_tiny_remote(heap: *mut Heap, span: &Span, block: usize) {
    if heap != empty_heap() {
        // SAFETY: this thread's live heap.
        inc(unsafe { &(*heap).tiny_frees });
    } else {
        stats::ORPHAN_TINY_FREES.fetch_add(1, Ordering::Relaxed);
    }
    // Keep the span header alive while we touch it (see `release_span`).
    span.tiny_inflight.fetch_add(1, Ordering::Acquire);
    match tiny_proto::remote_free(tiny_word(block), tiny_local(block)) {
        Some(true) => {
            // Done with the header; the claimed block keeps the span alive until it is freed.
            span.tiny_inflight.fetch_sub(1, Ordering::Release);
            // SAFETY: the block is dead and claimed by us.
            unsafe { free_small(block as *mut u8) };
            return;
        }
        Some(false) => {}
        None => {
            // The owner must re-check this block: mark it and send the span's token.
            let page = page_of(block);
            let slot = slot_of(block);
            // SAFETY: the span header of a live tiny span.
            let dirty = unsafe { &*((page + TINY_DIRTY + 8 * (slot / 64)) as *const AtomicU64) };
            dirty.fetch_or(1 << (slot % 64), Ordering::Release);
            // SAFETY: as above.
            let sent = unsafe { &*((page + TINY_TOKEN_SENT) as *const AtomicU8) };
            if sent.swap(1, Ordering::AcqRel) == 0 {
                // SAFETY: the token word is ours until the owner takes it from a list; the owner
                // keeps its heap alive while the span is NOTIFYING.
                unsafe {
                    remote::free_remote(&span.remote, &span.owner, page + TINY_TOKEN, |hp| {
                        &(*(hp as *const Heap)).delayed
                    });
                }
            }
        }
    }
    span.tiny_inflight.fetch_sub(1, Ordering::Release);
}

/// Whether an entry taken from a remote or delayed list is a tiny span's token.
#[inline]
fn is_token(entry: usize) -> bool {
    entry & (crate::size_class::PAGE_SIZE - 1) == TINY_TOKEN && {
        // SAFETY: every list entry is a block or a token, inside a live span.
        let s = unsafe { &*span_of(entry as *const u8) };
        s.class.get() as usize == TINY_CLASS
    }
}

/// The owner (or the central-lock holder) takes a tiny span's token: re-checks its dirty blocks
/// and frees the dead ones onto the span's free list. Returns how many blocks died.
fn take_token(s: &Span, token: usize) -> u32 {
    let page = page_of(token);
    // SAFETY: the span header of a live tiny span we own.
    let sent = unsafe { &*((page + TINY_TOKEN_SENT) as *const AtomicU8) };
    sent.store(0, Ordering::Release);
    let mut died = 0;
    for w in 0..crate::size_class::PAGE_SIZE / 16 / 64 {
        // SAFETY: as above.
        let dirty = unsafe { &*((page + TINY_DIRTY + 8 * w) as *const AtomicU64) };
        let mut bits = dirty.swap(0, Ordering::Acquire);
        while bits != 0 {
            let slot = w * 64 + bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let block = page + slot * TINY_BLOCK;
            let local = tiny_local(block).load(Ordering::Relaxed);
            if tiny_proto::owner_free(tiny_word(block), local) {
                // SAFETY: a dead block of our span, claimed by us.
                unsafe { s.push_local(block as *mut Block) };
                died += 1;
            }
        }
    }
    if died > 0 {
        // These 16-byte blocks are freed here rather than through `free_small`: count them.
        stats::ORPHAN_FREES[TINY_CLASS].fetch_add(died as u64, Ordering::Relaxed);
    }
    died
}

// ---------------------------------------------------------------------------------------------
// Slow paths
// ---------------------------------------------------------------------------------------------

/// Refills `class` and allocates from it; `zero` carries the byte count to clear, if any.
#[cold]
#[inline(never)]
unsafe fn alloc_slow(class: usize, zero: Option<usize>) -> *mut u8 {
    let mut heap = current_heap();
    if heap == empty_heap() {
        heap = match init_heap() {
            Some(h) => h,
            None => return ptr::null_mut(),
        };
    }
    // SAFETY: `heap` is this thread's live heap.
    let h = unsafe { &*heap };
    // SAFETY: `h` is this thread's heap.
    unsafe { process_delayed(h) };
    let Some(span) = (unsafe { refill(h, class) }) else {
        return ptr::null_mut();
    };
    // SAFETY: `refill` made `span` current with a block on its free list.
    unsafe {
        let s = &*span;
        let b = s.free.get();
        debug_assert!(!b.is_null());
        let fresh = s.free_zero.get();
        s.free.set((*b).next);
        s.used.set(s.used.get() + 1);
        inc(&h.classes[class].allocs);
        #[cfg(feature = "checked")]
        if class != TINY_CLASS {
            crate::checked::on_alloc(b.cast());
        }
        if let Some(size) = zero {
            clear_block(b.cast(), size, fresh);
        }
        b.cast()
    }
}

/// Makes sure `class` has a current span with a free block, and returns it.
///
/// # Safety
/// `h` is this thread's heap.
unsafe fn refill(h: &Heap, class: usize) -> Option<*mut Span> {
    let cc = &h.classes[class];
    let cur = cc.current.get();
    if cur != empty_span() {
        // SAFETY: the current span is owned by `h`.
        let s = unsafe { &*cur };
        if s.free.get().is_null() {
            collect_remote(s);
        }
        // SAFETY: we own `s` and its free list is empty when `extend` runs.
        if !s.free.get().is_null() || unsafe { s.extend() } {
            return Some(cur);
        }
        // SAFETY: `s` is `h`'s current span.
        unsafe { retire_current(h, class, s) };
    }
    // Owned partial spans first.
    loop {
        let p = cc.partial.get();
        if p.is_null() {
            break;
        }
        // SAFETY: spans on our partial list are owned by `h`.
        let s = unsafe { &*p };
        unlink(&cc.partial, s);
        if s.used.get() == 0 {
            let bytes = s.npages.get() as usize * crate::size_class::PAGE_SIZE;
            h.empty_kept.set(h.empty_kept.get().saturating_sub(bytes));
        }
        make_current(h, class, s);
        if s.free.get().is_null() {
            collect_remote(s);
        }
        // SAFETY: we own `s`; `extend` runs only with an empty free list.
        if !s.free.get().is_null() || unsafe { s.extend() } {
            return Some(p);
        }
        // SAFETY: `s` is current.
        unsafe { retire_current(h, class, s) };
    }
    // Spans abandoned by exited threads.
    for _ in 0..8 {
        let Some(p) = central_pop(class) else { break };
        // SAFETY: popped from the central pool, the span is now ours alone.
        let s = unsafe { &*p };
        s.owner.store(h as *const Heap as usize, Ordering::Relaxed);
        collect_remote(s);
        make_current(h, class, s);
        if s.has_local_free() {
            if s.free.get().is_null() {
                // SAFETY: we own `s` and its free list is empty.
                unsafe { s.extend() };
            }
            return Some(p);
        }
        // SAFETY: `s` is current.
        unsafe { retire_current(h, class, s) };
    }
    // A new span from the page heap.
    let run = chunk::alloc_pages(span_pages(class))?;
    // SAFETY: the page heap gave us this descriptor and its pages.
    let s = unsafe { &*run.span };
    setup_small(s, class, run.zero);
    s.owner.store(h as *const Heap as usize, Ordering::Relaxed);
    make_current(h, class, s);
    // SAFETY: a fresh span has an empty free list and a non-empty bump region.
    let ok = unsafe { s.extend() };
    debug_assert!(ok);
    Some(run.span)
}

/// Initialises a descriptor for a fresh span of `class`.
fn setup_small(s: &Span, class: usize, zero: bool) {
    let size = span_block_size(class);
    // SAFETY: the first block offset is inside the span.
    let start = unsafe { s.start.get().add(span_first(class)) };
    let n = (s.npages.get() as usize * crate::size_class::PAGE_SIZE - span_first(class)) / size;
    s.free.set(ptr::null_mut());
    s.used.set(0);
    s.free_zero.set(false);
    s.class.set(class as u8);
    s.set_tag(ListTag::None);
    s.bump_zero.set(zero);
    s.remote.store(0, Ordering::Relaxed);
    if class == TINY_CLASS {
        // A clean token, token flag and dirty bitmap (the words and counts are set per block).
        // SAFETY: the header bytes of the span's page, which we own.
        unsafe { ptr::write_bytes(s.start.get(), 0, TINY_WORDS) };
    }
    s.bump.set(start);
    // SAFETY: `n` whole blocks fit in the span.
    s.end.set(unsafe { start.add(n * size) });
    s.next.set(ptr::null_mut());
    s.prev.set(ptr::null_mut());
    s.large_size.set(0);
    s.state.store(STATE_SMALL, Ordering::Relaxed);
    stats::SPANS[class].fetch_add(1, Ordering::Relaxed);
}

fn make_current(h: &Heap, class: usize, s: &Span) {
    debug_assert_eq!(s.class.get() as usize, class);
    s.owner.store(h as *const Heap as usize, Ordering::Relaxed);
    s.set_tag(ListTag::Current);
    s.used.set(s.used.get() + 1); // pin
    h.classes[class].current.set(s as *const Span as *mut Span);
}

/// Stops allocating from `h`'s current span of `class`, which has no free block.
///
/// # Safety
/// `s` is `h`'s current span of `class`, with an empty free list.
unsafe fn retire_current(h: &Heap, class: usize, s: &Span) {
    h.classes[class].current.set(empty_span());
    s.set_tag(ListTag::None);
    let used = s.used.get() - 1; // unpin
    s.used.set(used);
    if used == 0 {
        // SAFETY: no live block, on no list.
        unsafe { release_span(s) };
        return;
    }
    park_full(h, s);
}

/// Puts an owned span with no free block on the full list and asks for a remote-free
/// notification.
fn park_full(h: &Heap, s: &Span) {
    debug_assert!(s.free.get().is_null());
    s.owner
        .store(h as *const Heap as usize | OWNER_FULL, Ordering::Relaxed);
    s.set_tag(ListTag::Full);
    push_front(&h.full, s);
    // A notification of an earlier parking may still be on its way (its block will reach our
    // delayed list): let it finish before asking for the next one.
    remote::quiesce(&s.remote);
    remote::set_notify(&s.remote);
    // A remote free that landed before the request would otherwise wait for the next one.
    if s.remote.load(Ordering::Acquire) & !remote::STATE_MASK != 0 {
        unpark(h, s);
        collect_remote(s);
    }
}

/// Moves a span from the full list to the partial list.
fn unpark(h: &Heap, s: &Span) {
    debug_assert_eq!(s.tag(), ListTag::Full);
    remote::clear_notify(&s.remote);
    unlink(&h.full, s);
    s.owner.store(h as *const Heap as usize, Ordering::Relaxed);
    s.set_tag(ListTag::Partial);
    push_front(&h.classes[s.class.get() as usize].partial, s);
}

/// Takes the span's remote list onto its local free list. Returns how many blocks came.
fn collect_remote(s: &Span) -> u32 {
    let head = remote::take_remote(&s.remote);
    if head == 0 {
        return 0;
    }
    if s.class.get() as usize == TINY_CLASS {
        return collect_remote_tiny(s, head);
    }
    let mut n = 1u32;
    let mut tail = head;
    loop {
        // SAFETY: the list was published with Release and taken with Acquire; its blocks are
        // free blocks of `s`, now ours.
        let next = unsafe { remote::link_of(tail) };
        if next == 0 {
            break;
        }
        tail = next;
        n += 1;
    }
    // SAFETY: `tail` is a block we own.
    unsafe { (*(tail as *mut Block)).next = s.free.get() };
    s.free.set(head as *mut Block);
    s.free_zero.set(false);
    debug_assert!(s.used.get() >= n);
    s.used.set(s.used.get() - n);
    n
}

/// [`collect_remote`] for a tiny span, whose list may hold its token among its blocks.
fn collect_remote_tiny(s: &Span, head: usize) -> u32 {
    let mut n = 0;
    let mut e = head;
    while e != 0 {
        // SAFETY: entries of a taken list are ours: blocks of `s`, or its token.
        let next = unsafe { remote::link_of(e) };
        if e & (crate::size_class::PAGE_SIZE - 1) == TINY_TOKEN {
            n += take_token(s, e);
        } else {
            // SAFETY: a free block of `s`.
            unsafe { s.push_local(e as *mut Block) };
            n += 1;
        }
        e = next;
    }
    s.free_zero.set(false);
    debug_assert!(s.used.get() >= n);
    s.used.set(s.used.get() - n);
    n
}

/// A free brought an owned, non-current span's count of used blocks to zero.
#[cold]
#[inline(never)]
unsafe fn span_emptied(h: &Heap, s: &Span) {
    let bytes = s.npages.get() as usize * crate::size_class::PAGE_SIZE;
    if s.tag() == ListTag::Partial && h.empty_kept.get() + bytes <= EMPTY_KEEP {
        // Keep it on the partial list for the next refill of its class: a program that frees
        // a batch and allocates it again does not go through the page heap (and the OS) each
        // time.
        h.empty_kept.set(h.empty_kept.get() + bytes);
        return;
    }
    match s.tag() {
        ListTag::Partial => unlink(&h.classes[s.class.get() as usize].partial, s),
        ListTag::Full => unlink(&h.full, s),
        t => {
            debug_assert!(false, "emptied span on list {t:?}");
            return;
        }
    }
    s.set_tag(ListTag::None);
    // SAFETY: no live block, and we just took it off its list.
    unsafe { release_span(s) };
}

/// Gives an empty span's pages back to the page heap.
///
/// # Safety
/// The caller owns `s`, which holds no live block and is on no list.
unsafe fn release_span(s: &Span) {
    debug_assert_eq!(s.used.get(), 0);
    // A thread may still be finishing a notification of this span (its block already arrived),
    // or a remote tiny free may still be touching its header; wait for them, so that they do not
    // touch the span after reuse.
    remote::quiesce(&s.remote);
    while s.tiny_inflight.load(Ordering::Acquire) != 0 {
        core::hint::spin_loop();
    }
    debug_assert_eq!(s.remote.load(Ordering::Relaxed), 0);
    s.owner.store(0, Ordering::Relaxed);
    stats::SPANS[s.class.get() as usize].fetch_sub(1, Ordering::Relaxed);
    // SAFETY: guaranteed by the caller.
    unsafe { chunk::free_pages(s as *const Span as *mut Span) };
}

/// Frees `p` into a span whose owner word is not exactly `heap`.
///
/// # Safety
/// `p` is a live small block of `span`.
#[cold]
#[inline(never)]
unsafe fn free_slow(heap: *mut Heap, span: &Span, p: *mut u8) {
    let class = span.class.get() as usize;
    if heap != empty_heap() && span.owner_word() == heap as usize | OWNER_FULL {
        // SAFETY: `heap` is this thread's live heap and owns the span.
        let h = unsafe { &*heap };
        unpark(h, span);
        // SAFETY: we own the span; `p` is one of its blocks.
        unsafe { span.push_local(p.cast()) };
        let used = span.used.get() - 1;
        span.used.set(used);
        inc(&h.classes[class].frees);
        if used == 0 {
            // SAFETY: as above.
            unsafe { span_emptied(h, span) };
        }
        return;
    }
    // SAFETY: `p` is a live small block of `span`.
    let done = span.owner_word() == 0 && unsafe { free_to_central(class, span, p) };
    // SAFETY: `p` is a live block of `span`, freed once; the owner (if any) keeps its heap alive
    // while the span is NOTIFYING (it quiesces before leaving).
    if !done {
        unsafe {
            remote::free_remote(&span.remote, &span.owner, p as usize, |hp| {
                &(*(hp as *const Heap)).delayed
            });
        }
    }
    if heap != empty_heap() {
        // SAFETY: `heap` is this thread's live heap.
        let h = unsafe { &*heap };
        inc(&h.remote_frees);
        inc(&h.classes[class].frees);
    } else {
        stats::ORPHAN_FREES[class].fetch_add(1, Ordering::Relaxed);
        stats::ORPHAN_REMOTE.fetch_add(1, Ordering::Relaxed);
    }
}

/// Takes back the blocks other threads delivered to `h` (see `remote`).
///
/// # Safety
/// `h` is this thread's heap.
unsafe fn process_delayed(h: &Heap) {
    let mut b = remote::take_delayed(&h.delayed);
    while b != 0 {
        // SAFETY: the delayed list was published with Release and taken with Acquire; its
        // blocks are free blocks of spans `h` owns (a notification is only claimed while the
        // span is parked on `h`'s full list, and `h` does not give spans away before it
        // quiesces them).
        unsafe {
            let next = remote::link_of(b);
            let s = &*span_of(b as *const u8);
            let died = if is_token(b) {
                take_token(s, b)
            } else {
                s.push_local(b as *mut Block);
                1
            };
            if s.tag() == ListTag::Full {
                if died > 0 {
                    unpark(h, s);
                } else {
                    // A token without a dead block: the span stays parked, so ask again to be
                    // told of its next remote free.
                    remote::quiesce(&s.remote);
                    remote::set_notify(&s.remote);
                    if s.remote.load(Ordering::Acquire) & !remote::STATE_MASK != 0 {
                        unpark(h, s);
                        collect_remote(s);
                    }
                }
            }
            if died > 0 {
                let used = s.used.get() - died;
                s.used.set(used);
                if used == 0 {
                    span_emptied(h, s);
                }
            }
            b = next;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lists
// ---------------------------------------------------------------------------------------------

fn push_front(head: &Cell<*mut Span>, s: &Span) {
    let sp = s as *const Span as *mut Span;
    let old = head.get();
    s.prev.set(ptr::null_mut());
    s.next.set(old);
    if !old.is_null() {
        // SAFETY: list members are live descriptors owned by the list's owner (us).
        unsafe { (*old).prev.set(sp) };
    }
    head.set(sp);
}

fn unlink(head: &Cell<*mut Span>, s: &Span) {
    let prev = s.prev.get();
    let next = s.next.get();
    if prev.is_null() {
        debug_assert_eq!(head.get(), s as *const Span as *mut Span);
        head.set(next);
    } else {
        // SAFETY: list members are live descriptors owned by the list's owner (us).
        unsafe { (*prev).next.set(next) };
    }
    if !next.is_null() {
        // SAFETY: as above.
        unsafe { (*next).prev.set(prev) };
    }
    s.next.set(ptr::null_mut());
    s.prev.set(ptr::null_mut());
}

// ---------------------------------------------------------------------------------------------
// Central pools
// ---------------------------------------------------------------------------------------------

struct Central {
    head: Cell<*mut Span>,
    len: usize,
}
// SAFETY: the list is only touched under its lock.
unsafe impl Send for Central {}

static CENTRAL: [SpinLock<Central>; SPAN_CLASSES] = [const {
    SpinLock::new(Central {
        head: Cell::new(ptr::null_mut()),
        len: 0,
    })
}; SPAN_CLASSES];

/// Frees `p` into an abandoned span, acting as its owner under the central lock, so that spans
/// of exited threads go back to the page heap as soon as their last block is freed. Returns
/// false (and does nothing) if the span has been adopted meanwhile.
///
/// # Safety
/// `p` is a live small block of `s`, of class `class`.
unsafe fn free_to_central(class: usize, s: &Span, p: *mut u8) -> bool {
    let mut c = CENTRAL[class].lock();
    if s.tag() != ListTag::Central {
        return false;
    }
    // SAFETY: a span in the central pool is owned by whoever holds its lock: us.
    unsafe { s.push_local(p.cast()) };
    s.used.set(s.used.get() - 1);
    collect_remote(s);
    if s.used.get() == 0 {
        unlink(&c.head, s);
        c.len -= 1;
        drop(c);
        s.set_tag(ListTag::None);
        // SAFETY: no live block, off every list, and nobody else can reach it.
        unsafe { release_span(s) };
    }
    true
}

fn central_push(class: usize, s: &Span) {
    let mut c = CENTRAL[class].lock();
    // Under the lock: a thread that sees owner 0 and frees into the span through
    // `free_to_central` must find it on the pool list, after everything we did to it.
    s.owner.store(0, Ordering::Relaxed);
    s.set_tag(ListTag::Central);
    push_front(&c.head, s);
    c.len += 1;
}

fn central_pop(class: usize) -> Option<*mut Span> {
    let mut c = CENTRAL[class].lock();
    let p = c.head.get();
    if p.is_null() {
        return None;
    }
    // SAFETY: central members are live descriptors protected by the lock.
    let s = unsafe { &*p };
    unlink(&c.head, s);
    s.set_tag(ListTag::None);
    c.len -= 1;
    Some(p)
}

/// Spans in the central pool of each class.
pub(crate) fn central_lens() -> [usize; SPAN_CLASSES] {
    core::array::from_fn(|c| CENTRAL[c].lock().len)
}

// ---------------------------------------------------------------------------------------------
// Heap lifecycle
// ---------------------------------------------------------------------------------------------

struct HeapPool {
    /// Unused heaps.
    free: *mut Heap,
    /// Every heap ever made (linked through `all_next`).
    all: *mut Heap,
    /// Unused space of the current metadata mapping.
    arena: usize,
    arena_end: usize,
}
// SAFETY: only touched under its lock.
unsafe impl Send for HeapPool {}

static HEAPS: SpinLock<HeapPool> = SpinLock::new(HeapPool {
    free: ptr::null_mut(),
    all: ptr::null_mut(),
    arena: 0,
    arena_end: 0,
});

/// Every heap ever made: the head of the registry (members are never freed).
pub(crate) fn all_heaps() -> *mut Heap {
    HEAPS.lock().all
}

/// The next heap of the registry.
///
/// # Safety
/// `h` is a heap from [`all_heaps`] or this function.
pub(crate) unsafe fn next_heap(h: *mut Heap) -> *mut Heap {
    // SAFETY: registry members are never freed and `all_next` is written before publication.
    unsafe { (*h).all_next.get() }
}

const HEAP_ARENA: usize = 256 * 1024;

fn new_heap() -> Option<*mut Heap> {
    let mut pool = HEAPS.lock();
    if !pool.free.is_null() {
        let h = pool.free;
        // SAFETY: pooled heaps are live and protected by the lock.
        pool.free = unsafe { (*h).pool_next.get() };
        return Some(h);
    }
    let size = core::mem::size_of::<Heap>().next_multiple_of(64);
    if pool.arena + size > pool.arena_end {
        let m = crate::os::map(HEAP_ARENA)?.as_ptr() as usize;
        pool.arena = m;
        pool.arena_end = m + HEAP_ARENA;
    }
    let h = pool.arena as *mut Heap;
    pool.arena += size;
    // SAFETY: `h` is fresh, suitably aligned (64) memory of the right size.
    unsafe {
        h.write(Heap::new(empty_span()));
        (*h).all_next.set(pool.all);
    }
    pool.all = h;
    Some(h)
}

/// Gives this thread a heap and registers its exit hook.
#[cold]
fn init_heap() -> Option<*mut Heap> {
    let key = thread_key()?;
    let h = new_heap()?;
    // SAFETY: `h` is a live heap nobody else uses.
    unsafe { (*h).active.store(true, Ordering::Relaxed) };
    HEAP.with(|c| c.set(h));
    // SAFETY: `key` is a valid key; a non-null value makes the destructor run at thread exit.
    unsafe { libc::pthread_setspecific(key, h.cast()) };
    Some(h)
}

static KEY: AtomicUsize = AtomicUsize::new(0);
static KEY_LOCK: SpinLock<()> = SpinLock::new(());

/// The pthread key whose destructor tears a thread's heap down (created on first use).
fn thread_key() -> Option<libc::pthread_key_t> {
    let k = KEY.load(Ordering::Acquire);
    if k != 0 {
        return Some((k - 1) as libc::pthread_key_t);
    }
    let _g = KEY_LOCK.lock();
    let k = KEY.load(Ordering::Acquire);
    if k != 0 {
        return Some((k - 1) as libc::pthread_key_t);
    }
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is a valid out-pointer; the destructor has the required signature.
    if unsafe { libc::pthread_key_create(&mut key, Some(thread_exit)) } != 0 {
        return None;
    }
    // SAFETY: the handlers have the required signature and only take and release our locks.
    unsafe { libc::pthread_atfork(Some(fork_prepare), Some(fork_release), Some(fork_release)) };
    KEY.store(key as usize + 1, Ordering::Release);
    Some(key)
}

/// `fork` prepare handler: takes every allocator lock (in the one order the allocator nests
/// them: heap pool, central pools, huge cache, page heap), so that no other thread is inside a
/// critical section when the process is copied. The child then starts with consistent
/// structures and can allocate and free; threads that did not survive the fork keep their spans
/// (their blocks can still be freed in the child, as remote frees).
extern "C" fn fork_prepare() {
    HEAPS.raw_lock();
    for c in &CENTRAL {
        c.raw_lock();
    }
    crate::large::fork_lock(true);
    chunk::fork_lock(true);
}

/// `fork` parent and child handler: releases what [`fork_prepare`] took.
extern "C" fn fork_release() {
    chunk::fork_lock(false);
    crate::large::fork_lock(false);
    for c in CENTRAL.iter().rev() {
        // SAFETY: taken by this thread in `fork_prepare` (in the child, this thread is the
        // copy of the one that took it).
        unsafe { c.raw_unlock() };
    }
    // SAFETY: as above.
    unsafe { HEAPS.raw_unlock() };
}

/// pthread-key destructor: runs after the thread's Rust thread-local destructors.
unsafe extern "C" fn thread_exit(arg: *mut libc::c_void) {
    let h = arg as *mut Heap;
    if h.is_null() {
        return;
    }
    HEAP.with(|c| {
        if c.get() == h {
            c.set(empty_heap());
        }
    });
    SPEC_HEAP.with(|c| c.set(empty_heap()));
    // SAFETY: `h` was this thread's heap and the thread no longer uses it.
    unsafe { abandon(&*h) };
    // SAFETY: `h` is live; the pool takes it back.
    unsafe { (*h).active.store(false, Ordering::Relaxed) };
    let mut pool = HEAPS.lock();
    // SAFETY: as above.
    unsafe { (*h).pool_next.set(pool.free) };
    pool.free = h;
}

/// Gives away every span `h` owns: empty ones to the page heap, the others to the central pools.
///
/// # Safety
/// `h` is a heap no thread will use again without taking it from the pool.
pub(crate) unsafe fn abandon(h: &Heap) {
    if !h.tiny_ptr.get().is_null() {
        // SAFETY: `h` is this thread's heap with a current tiny block.
        unsafe { retire_tiny(h) };
    }
    // 1. No span of ours may be NOTIFY or NOTIFYING: after this, nobody delivers to `h`.
    for_each_owned(h, |s| remote::quiesce(&s.remote));
    // 2. Take what was delivered before that.
    // SAFETY: `h` is still the owner of its spans.
    unsafe { process_delayed(h) };
    // 3. Hand every span on.
    for class in 1..SPAN_CLASSES {
        let cc = &h.classes[class];
        let cur = cc.current.get();
        if cur != empty_span() {
            cc.current.set(empty_span());
            // SAFETY: owned by `h`.
            let s = unsafe { &*cur };
            s.set_tag(ListTag::None);
            s.used.set(s.used.get() - 1); // unpin
                                          // SAFETY: on no list, owned.
            unsafe { give_away(s) };
        }
        while !cc.partial.get().is_null() {
            // SAFETY: list members are owned by `h`.
            let s = unsafe { &*cc.partial.get() };
            unlink(&cc.partial, s);
            s.set_tag(ListTag::None);
            // SAFETY: on no list, owned.
            unsafe { give_away(s) };
        }
    }
    while !h.full.get().is_null() {
        // SAFETY: list members are owned by `h`.
        let s = unsafe { &*h.full.get() };
        unlink(&h.full, s);
        s.set_tag(ListTag::None);
        // SAFETY: on no list, owned.
        unsafe { give_away(s) };
    }
    h.empty_kept.set(0);
}

/// Releases an owned span that is on no list: to the page heap if empty, else to its central
/// pool.
///
/// # Safety
/// The caller owns `s`, which is on no list and quiesced.
unsafe fn give_away(s: &Span) {
    collect_remote(s);
    if s.used.get() == 0 {
        // SAFETY: no live block, on no list.
        unsafe { release_span(s) };
    } else {
        central_push(s.class.get() as usize, s);
    }
}

fn for_each_owned(h: &Heap, mut f: impl FnMut(&Span)) {
    for class in 1..SPAN_CLASSES {
        let cc = &h.classes[class];
        let cur = cc.current.get();
        if cur != empty_span() {
            // SAFETY: owned by `h`.
            f(unsafe { &*cur });
        }
        let mut p = cc.partial.get();
        while !p.is_null() {
            // SAFETY: list members are owned by `h`.
            let s = unsafe { &*p };
            f(s);
            p = s.next.get();
        }
    }
    let mut p = h.full.get();
    while !p.is_null() {
        // SAFETY: list members are owned by `h`.
        let s = unsafe { &*p };
        f(s);
        p = s.next.get();
    }
}
