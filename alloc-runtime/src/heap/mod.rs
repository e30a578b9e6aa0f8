//! Thread heaps: the per-thread cache in front of the central pools and the page heap.
//!
//! The files are one-way layers: read them top to bottom, the way a pointer travels; each file
//! calls only files below it in this table, never one above (`tests/layers.rs` checks it).
//!
//! | file | what |
//! | --- | --- |
//! | `gate.rs` | the size-specialised routines' own view of the heap |
//! | `fast.rs` | the fast paths: pop from the current span, push to an owned span |
//! | `fast_asm.rs` | the size-specialised entry points' pop in assembly, for `dev`-based builds |
//! | `miss.rs` | the fast paths' misses: where an allocation or a free goes next |
//! | `lifecycle.rs` | making heaps, thread exit (abandon), `fork` handlers, the shared heap |
//! | `key.rs` | the thread-exit key, the count of threads with a heap, calls without a heap |
//! | `threads.rs` | the index of heaps by the thread descriptor they record |
//! | `abandon.rs` | a heap's spans handed on: at its thread's exit, the shared heap's when unused |
//! | `idle.rs` | the background trimmer: idle heaps' empty spans and reserves given back |
//! | `slow.rs` | refill, parking full spans and taking them back, collecting remote frees |
//! | `outbox.rs` | frees into other threads' spans, gathered a span at a time and published |
//! | `retire.rs` | busy threads let go of the classes they stopped allocating in |
//! | `sampled.rs` | the heap profiler's countdowns, and the allocations they pick |
//! | `central.rs` | the per-class pools of spans abandoned by exited threads |
//! | `owned.rs` | an owner's span operations: collecting remote frees, releasing a span |
//! | `reserve.rs` | the runs of pages a thread takes for its new spans a few at a time |
//! | `trimlock.rs` | the trim lock an owner's slow paths hold and the trimmer tries |
//! | `tls.rs` | the thread-locals that find this thread's heap |
//! | `mod.rs` | the [`Heap`] struct and the sentinel heap |
//! | `list.rs` | [`SpanList`], the intrusive doubly linked list of spans |
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
//! - *partial*: owned spans with free blocks; refills take them from the front, spans coming
//!   back from the full list join at the back (so they gather more free blocks first);
//! - *full* (one list for all classes): owned spans parked with no free block. Their owner word
//!   carries [`OWNER_FULL`](crate::span::OWNER_FULL), so a local free goes to the slow path to
//!   move them back to partial, and they ask for a notification of their next remote free (see
//!   [`crate::remote`]): the freeing thread puts the span on the heap's *delayed* list. The
//!   request is armed once and left armed when the span comes back, so parking and unparking
//!   take no atomic read-modify-write once a span has been parked before.
//!
//! While many threads have a heap, a thread's first few allocations come from the *shared heap*,
//! under its lock if that is free: before the thread has a heap (`lifecycle::alloc_heapless`),
//! and then those of a class it has no span of (`miss::shared_first`), so that a thread that
//! allocates a few blocks does not write a heap, nor take a span and a page per class, for them;
//! the background trimmer hands that heap's spans on once nobody uses it (`abandon.rs`).
//!
//! The tiny class (4-byte blocks for 1 to 4 bytes) is a span class like the others; only its
//! blocks link through 4-byte chunk offsets instead of pointers.
//!
//! A span whose last block is freed goes back to the page heap (after a small allowance kept
//! for reuse). When a thread exits, its spans that still hold live blocks go to the central pool
//! of their class, owned by nobody; a later refill of that class adopts them, and sweeps (a few
//! spans each time a span is pooled or a thread takes fresh pages, every span on `collect()`) give back those whose blocks
//! have all been freed. Remote frees keep working throughout, lock-free: they only touch the
//! span's atomic remote list.

use core::cell::Cell;
use core::ptr;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize};

use crate::chunk;
use crate::span::{Span, EMPTY_SPAN, SPAN_CLASSES};

mod abandon;
mod central;
mod fast;
#[cfg(specalloc_asm_fast)]
mod fast_asm;
mod gate;
mod idle;
mod key;
mod lifecycle;
mod list;
mod miss;
mod outbox;
mod owned;
mod reserve;
mod retire;
#[cfg(feature = "profiling")]
mod sampled;
mod slow;
mod threads;
mod tls;
mod trimlock;

pub(crate) use central::{central_lens, sweep_all as sweep_abandoned};
pub(crate) use fast::{
    alloc_small, alloc_small_at, alloc_tiny, free_block, free_small, free_tiny, CACHE_SIZE,
};
#[cfg(specalloc_asm_fast)]
pub(crate) use fast_asm::{take_tiny, take_wide};
pub(crate) use gate::{alloc_small_spec, alloc_tiny_spec, miss, take_inline, take_with};
#[cfg(feature = "test-hooks")]
pub use key::{HEAPLESS_FIRST, SHARED_FROM_THREADS};
#[cfg(feature = "test-hooks")]
pub use lifecycle::hold_lock;
pub(crate) use lifecycle::{all_heaps, heaps_made, next_heap};
use list::SpanList;
pub(crate) use miss::alloc_slow;
#[cfg(feature = "test-hooks")]
pub use miss::SHARED_FIRST;
#[cfg(feature = "test-hooks")]
pub use outbox::DIRECT_FREES;
#[cfg(feature = "profiling")]
pub(crate) use sampled::arm_this_thread;
#[cfg(specalloc_asm_fast)]
pub(crate) use slow::span_emptied;
pub(crate) use slow::trim_thread;
#[cfg(feature = "test-hooks")]
pub use tls::thread_heap;
#[cfg(specalloc_asm_fast)]
pub(crate) use tls::tls_block_symbol;

/// Per-class state of a heap, laid out so the fast path touches one cache line.
#[repr(C)]
pub(crate) struct ClassCache {
    /// The span allocated from ([`crate::span::empty_span`] when none).
    pub(crate) current: Cell<*mut Span>,
    /// Allocations of this class by this heap (owner writes, anyone reads). With the heap
    /// profiler, offset by [`ClassCache::alloc_bias`] so that it reaches zero at the class's
    /// next sampled allocation (see `sampled.rs`); [`ClassCache::alloc_count`] reads the count.
    pub(crate) allocs: AtomicU64,
    /// What [`ClassCache::allocs`] is offset by (owner writes, anyone reads).
    #[cfg(feature = "profiling")]
    alloc_bias: AtomicU64,
    /// [`ClassCache::allocs`] at the owner's last look for classes it stopped allocating in (see
    /// `retire.rs`): beside it, since the first refill after each of the trimmer's wakes reads
    /// both for every class.
    allocs_seen: Cell<u64>,
    /// Owned spans with free blocks.
    partial: SpanList,
}

/// A thread heap.
#[repr(C)]
pub(crate) struct Heap {
    pub(crate) classes: [ClassCache; SPAN_CLASSES],
    /// Frees of each class by this heap, local and remote. An array of its own rather than a
    /// field of [`ClassCache`]: its stride, a word, is one the free path's store addresses with
    /// the class as it is (a class cache's 32 bytes take a shift first).
    pub(crate) frees: [AtomicU64; SPAN_CLASSES],
    /// Bytes of empty spans kept on the partial lists (at most [`EMPTY_KEEP`]).
    empty_kept: Cell<usize>,
    /// The chunk this heap takes its new spans' pages from first (`chunk/place.rs`), once it
    /// reserves runs (`reserve.rs`).
    home: chunk::Home,
    /// Runs of pages taken from the page heap for this heap's next new spans, linked through
    /// the descriptors' `next` (see `reserve.rs`).
    reserve: Cell<*mut Span>,
    /// Pages in [`Heap::reserve`]. Written by the owner only (relaxed loads and stores);
    /// `stats()` reads it from any thread.
    pub(crate) reserve_pages: AtomicUsize,
    /// New spans this heap took pages for since it was made or last gave its reserve back
    /// (counted up to `reserve::RESERVE_AFTER`).
    new_spans: Cell<u32>,
    /// Owned spans parked with no free block (all classes).
    full: SpanList,
    /// Spans other threads delivered because they freed into them while parked full (see
    /// `remote`), linked through `Span::delayed_next`.
    pub(crate) delayed: AtomicUsize,
    /// Blocks this heap's thread freed into spans it does not own.
    pub(crate) remote_frees: AtomicU64,
    /// Frees into other live threads' spans this heap pushed at once, without its outboxes, up
    /// to `outbox::DIRECT_FREES`.
    direct_frees: Cell<u32>,
    /// Some outbox may hold blocks: set when one starts a batch, cleared when every one is
    /// published. Until then nothing reads the outboxes, which a new heap's pages leave
    /// untouched (see [`write_new_heap`]).
    outboxes_used: Cell<bool>,
    /// The last hand-over request (`slow::HANDOVER`) this heap answered.
    handover_seen: Cell<usize>,
    /// The trimmer's wake count (`retire::RETIRE_EPOCH`) at the owner's last look for classes
    /// it stopped allocating in (see [`ClassCache::allocs_seen`]).
    retire_seen: Cell<u32>,
    /// Next heap in the registry of all heaps (written once, before publication).
    all_next: Cell<*mut Heap>,
    /// Next heap in the pool of unused heaps.
    pool_next: Cell<*mut Heap>,
    /// The thread descriptor (`pthread_self()`) of the thread using this heap; 0 when pooled,
    /// for the shared heap, and for heaps of threads that did not survive a `fork`. Read and
    /// written under the heap pool's lock (see `lifecycle::new_heap`), through its index of
    /// heaps by descriptor (`threads.rs`).
    thread: Cell<usize>,
    /// The next heap in the same bucket of that index.
    thread_next: Cell<*mut Heap>,
    /// A thread is using this heap.
    pub(crate) active: AtomicBool,
    /// The trim lock's owner word (see `trim_proto.rs`): odd while the owner is in a slow
    /// path; it goes up on each entry and exit (wrapping), so it also tells the trimmer whether
    /// the owner entered one since its last look. Written by the owner only.
    trim_owner: AtomicU32,
    /// The trim lock's trimmer word: 1 while the trimmer tries or holds the lock. Written by the
    /// trimmer only (and cleared in a `fork` child).
    trim_trimmer: AtomicU32,
    /// [`Heap::trim_owner`] when the trimmer last looked (the trimmer's own; odd at first, which
    /// an idle owner's word never is).
    trim_seen: AtomicU32,
    /// The owner word at the trimmer's last trim if that left the heap bare (see
    /// `idle::worth_trimming`), else [`NOT_BARE`]. The trimmer's own.
    trim_bare_at: AtomicU32,
    /// The head of [`Heap::delayed`] at the trimmer's last trim. The trimmer's own.
    trim_delayed_at: AtomicUsize,
    /// The heap profiler's sampling epoch this heap's countdowns were drawn for (see
    /// `sampled.rs`).
    #[cfg(feature = "profiling")]
    prof_epoch: Cell<u32>,
    /// Odd while the owner draws a countdown (see [`Heap::alloc_count`]).
    #[cfg(feature = "profiling")]
    prof_seq: AtomicU32,
    /// Per class, blocks this heap's thread freed into pooled spans since it last swept that
    /// class's pool (see `miss::note_pooled_free`). Before the outboxes, in the heap's first
    /// page: a thread that frees one block of a dead thread's (the C library frees a thread's
    /// TLS vector when another thread joins it) writes here, and nothing else of the rest.
    pooled_frees: [Cell<u32>; SPAN_CLASSES],
    /// Per class, this heap's thread's allocations served by the shared heap while it had no
    /// span of the class (up to `miss::SHARED_FIRST`; see `miss::shared_first`). Set to zero
    /// when a thread takes the heap.
    shared_allocs: [Cell<u8>; SPAN_CLASSES],
    // The per-class arrays a thread that frees only into its own spans does not touch: last,
    // so that a new heap's first pages hold what it uses (see [`write_new_heap`]).
    /// Per class, frees into spans this heap does not own, gathered and published a batch at a
    /// time, [`OUTBOX_WAYS`] spans at once (see `slow::free_batched`).
    outboxes: [[Outbox; OUTBOX_WAYS]; SPAN_CLASSES],
    /// Per class, the outbox a batch for a further span takes the place of.
    outbox_victim: [Cell<u8>; SPAN_CLASSES],
}

// What every thread writes (the classes, the counters, the fields of the slow paths and the
// trimmer, the counts of frees into pooled spans) fits in the heap's first page, and new heaps
// start a page of their own (`lifecycle::new_heap`): a thread that allocates in a few classes,
// frees its own blocks and a dead thread's, and never frees into a live thread's spans (the
// outboxes) writes one page of its heap.
const _: () = assert!(core::mem::offset_of!(Heap, outboxes) <= crate::os::OS_PAGE);

impl Heap {
    const fn new(empty: *mut Span) -> Heap {
        let mut h = Heap {
            classes: [const {
                ClassCache {
                    current: Cell::new(ptr::null_mut()),
                    allocs: AtomicU64::new(0),
                    #[cfg(feature = "profiling")]
                    alloc_bias: AtomicU64::new(0),
                    allocs_seen: Cell::new(0),
                    partial: SpanList::new(),
                }
            }; SPAN_CLASSES],
            frees: [const { AtomicU64::new(0) }; SPAN_CLASSES],
            empty_kept: Cell::new(0),
            home: chunk::Home::new(),
            reserve: Cell::new(ptr::null_mut()),
            reserve_pages: AtomicUsize::new(0),
            new_spans: Cell::new(0),
            full: SpanList::new(),
            delayed: AtomicUsize::new(0),
            remote_frees: AtomicU64::new(0),
            direct_frees: Cell::new(0),
            outboxes_used: Cell::new(false),
            outboxes: [const {
                [const {
                    Outbox {
                        span: Cell::new(ptr::null()),
                        head: Cell::new(0),
                        tail: Cell::new(0),
                        room: Cell::new(0),
                    }
                }; OUTBOX_WAYS]
            }; SPAN_CLASSES],
            outbox_victim: [const { Cell::new(0) }; SPAN_CLASSES],
            handover_seen: Cell::new(0),
            pooled_frees: [const { Cell::new(0) }; SPAN_CLASSES],
            shared_allocs: [const { Cell::new(0) }; SPAN_CLASSES],
            retire_seen: Cell::new(0),
            all_next: Cell::new(ptr::null_mut()),
            pool_next: Cell::new(ptr::null_mut()),
            thread: Cell::new(0),
            thread_next: Cell::new(ptr::null_mut()),
            active: AtomicBool::new(false),
            trim_owner: AtomicU32::new(0),
            trim_trimmer: AtomicU32::new(0),
            #[cfg(feature = "profiling")]
            prof_epoch: Cell::new(0),
            #[cfg(feature = "profiling")]
            prof_seq: AtomicU32::new(0),
            trim_seen: AtomicU32::new(u32::MAX),
            trim_bare_at: AtomicU32::new(NOT_BARE),
            trim_delayed_at: AtomicUsize::new(0),
        };
        // Every class starts at the sentinel span, whose free list is empty.
        let mut j = 0;
        while j < SPAN_CLASSES {
            h.classes[j].current = Cell::new(empty);
            j += 1;
        }
        h
    }

    /// This heap's address, as stored in the owner words of its spans.
    #[inline(always)]
    fn addr(&self) -> usize {
        self as *const Heap as usize
    }
}

/// A thread's frees into one span it does not own, not yet published: a chain of blocks linked
/// as remote lists link them (`remote::set_link_as`) from `head` to `tail`, which one CAS pushes
/// on the span's remote list. Until then the blocks count as used in their span, so the span
/// stays allocated, and its descriptor in this life, while an outbox names it.
struct Outbox {
    /// The span, or null when the outbox is empty.
    span: Cell<*const Span>,
    /// The block freed last.
    head: Cell<usize>,
    /// The block freed first.
    tail: Cell<usize>,
    /// Blocks the outbox still takes before it publishes them (it holds its class's limit,
    /// `slow::outbox_limit`, less this).
    room: Cell<u32>,
}

/// Spans of one class a heap gathers frees for at once (see `slow::free_batched`): a consumer
/// fed by several producers frees each class into as many spans, interleaved.
const OUTBOX_WAYS: usize = 4;

/// [`Heap::trim_bare_at`] of a heap no trim left bare: odd, which an owner word outside a slow
/// path never is.
const NOT_BARE: u32 = u32::MAX;

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

/// The shared heap's address (0 until it is made, then never changed; `lifecycle::alloc_shared`
/// writes it under the shared heap's lock): frees into its spans are pushed at once, never
/// batched (`outbox::start_batch`).
static SHARED_HEAP: AtomicUsize = AtomicUsize::new(0);

/// Writes a new heap at `h`, memory that holds zeros: the value of [`Heap::new`] with the
/// sentinel span, all of whose fields are zero bits but the ones written here (a test compares
/// the result with the sentinel heap, field by field). Writing only those leaves most of a
/// fresh mapping's pages untouched until the heap uses them: a heap is over 12 KiB, two thirds
/// of it outboxes that a thread freeing only its own blocks never writes. Built in place,
/// never on the stack: a build without optimisation would build a whole value in a frame of
/// its own and copy it, over 30 KiB of stack on a thread's first allocation.
///
/// # Safety
/// `h` is valid for writes of a `Heap`, suitably aligned, and every byte of it is zero.
unsafe fn write_new_heap(h: *mut Heap) {
    let empty = &EMPTY_SPAN.0 as *const Span as *mut Span;
    for j in 0..SPAN_CLASSES {
        // SAFETY: `h` is valid for writes (our caller's contract); the place is a field of it.
        unsafe { (&raw mut (*h).classes[j].current).write(Cell::new(empty)) };
    }
    // SAFETY: as above.
    unsafe {
        (&raw mut (*h).trim_seen).write(AtomicU32::new(u32::MAX));
        (&raw mut (*h).trim_bare_at).write(AtomicU32::new(NOT_BARE));
    }
}

/// `x += 1` on a counter only this thread writes: a plain load and store, no atomic RMW.
#[inline(always)]
fn inc(c: &AtomicU64) {
    add(c, 1);
}

/// [`inc`] of the allocation counter of the class cache `cache` bytes past `base` (a heap and
/// a cache's offset in it, which the instruction adds itself: the caller need not add them
/// first) that tells whether it wrapped to zero (the heap profiler's countdown of a class
/// reached its next sampled allocation, see `sampled.rs`): one `add` to memory and a branch on
/// its flags.
#[cfg(feature = "profiling")]
#[inline(always)]
fn count_fires_at(base: *const u8, cache: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `base + cache` is a class cache (the callers'), whose owner alone writes the
        // counter; an aligned 8-byte `add` is single-copy atomic, so readers see the old or the
        // new value, as with `inc`'s load and store.
        unsafe {
            core::arch::asm!(
                "add qword ptr [{base} + {cache} + {allocs}], 1",
                "jz {fired}",
                base = in(reg) base,
                cache = in(reg) cache,
                allocs = const core::mem::offset_of!(ClassCache, allocs),
                fired = label { return true; },
                options(nostack),
            );
        }
        false
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        // SAFETY: as above: a class cache, whose counter its owner alone writes.
        let cc = unsafe { &*(base.add(cache) as *const ClassCache) };
        let v = crate::raw::load_u64(&cc.allocs).wrapping_add(1);
        crate::raw::store_u64(&cc.allocs, v);
        v == 0
    }
}

impl ClassCache {
    /// Allocations of this class by this heap, read by its owner.
    #[inline]
    pub(crate) fn alloc_count(&self) -> u64 {
        let n = self.allocs.load(core::sync::atomic::Ordering::Relaxed);
        #[cfg(feature = "profiling")]
        let n = n.wrapping_sub(self.alloc_bias.load(core::sync::atomic::Ordering::Relaxed));
        n
    }
}

impl Heap {
    /// Allocations of `class` by this heap, read by any thread: with the heap profiler, the
    /// counter and its offset as of one moment (`prof_seq`, a sequence lock the owner holds
    /// while it draws a countdown), or after a few tries the last reading.
    pub(crate) fn alloc_count(&self, class: usize) -> u64 {
        #[cfg(feature = "profiling")]
        for _ in 0..64 {
            use core::sync::atomic::{fence, Ordering};
            let s1 = self.prof_seq.load(Ordering::Acquire);
            let n = self.classes[class].alloc_count();
            fence(Ordering::Acquire);
            if s1 & 1 == 0 && self.prof_seq.load(Ordering::Relaxed) == s1 {
                return n;
            }
            core::hint::spin_loop();
        }
        self.classes[class].alloc_count()
    }
}

/// `x += n` on a counter only this thread writes.
#[inline(always)]
fn add(c: &AtomicU64, n: u64) {
    crate::raw::store_u64(c, crate::raw::load_u64(c).wrapping_add(n));
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::Ordering::Relaxed;

    /// A new heap written over zeros equals the sentinel heap, which is `Heap::new`'s value:
    /// every field `write_new_heap` leaves alone is zero in `Heap::new`.
    #[test]
    fn a_new_heap_is_heap_new() {
        let layout = std::alloc::Layout::new::<Heap>();
        // SAFETY: `Heap` has a nonzero size.
        let p = unsafe { std::alloc::alloc_zeroed(layout) } as *mut Heap;
        assert!(!p.is_null());
        // SAFETY: zeroed, aligned memory for a heap.
        unsafe { write_new_heap(p) };
        // SAFETY: written above; never freed (as the runtime's heaps).
        let (a, b) = (unsafe { &*p }, &EMPTY_HEAP.0);
        // Every field is named (a new one stops this compiling until it is compared below).
        #[rustfmt::skip]
        let Heap {
            classes: _, empty_kept: _, home: _, reserve: _, reserve_pages: _, new_spans: _, full: _,
            delayed: _, remote_frees: _, direct_frees: _, outboxes_used: _, outboxes: _, outbox_victim: _, handover_seen: _,
            pooled_frees: _, shared_allocs: _, frees: _, retire_seen: _, all_next: _, pool_next: _,
            thread: _, thread_next: _, active: _, trim_owner: _, trim_trimmer: _, trim_seen: _,
            trim_bare_at: _, trim_delayed_at: _,
            #[cfg(feature = "profiling")] prof_epoch: _,
            #[cfg(feature = "profiling")] prof_seq: _,
        } = b;
        let ClassCache {
            current: _,
            allocs: _,
            #[cfg(feature = "profiling")]
                alloc_bias: _,
            allocs_seen: _,
            partial: _,
        } = &b.classes[0];
        let Outbox {
            span: _,
            head: _,
            tail: _,
            room: _,
        } = &b.outboxes[0][0];
        for (x, y) in a.classes.iter().zip(&b.classes) {
            assert_eq!(x.current.get(), y.current.get());
            assert_eq!(x.allocs.load(Relaxed), y.allocs.load(Relaxed));
            #[cfg(feature = "profiling")]
            assert_eq!(x.alloc_bias.load(Relaxed), y.alloc_bias.load(Relaxed));
            assert_eq!(x.allocs_seen.get(), y.allocs_seen.get());
            assert!(x.partial.is_empty() && y.partial.is_empty());
        }
        assert_eq!(a.empty_kept.get(), b.empty_kept.get());
        assert!(a.home.is_empty() && b.home.is_empty());
        assert_eq!(a.reserve.get(), b.reserve.get());
        assert_eq!(a.reserve_pages.load(Relaxed), b.reserve_pages.load(Relaxed));
        assert_eq!(a.new_spans.get(), b.new_spans.get());
        assert!(a.full.is_empty() && b.full.is_empty());
        assert_eq!(a.delayed.load(Relaxed), b.delayed.load(Relaxed));
        assert_eq!(a.remote_frees.load(Relaxed), b.remote_frees.load(Relaxed));
        assert_eq!(a.direct_frees.get(), b.direct_frees.get());
        for (x, y) in a.shared_allocs.iter().zip(&b.shared_allocs) {
            assert_eq!(x.get(), y.get());
        }
        assert_eq!(a.outboxes_used.get(), b.outboxes_used.get());
        for (x, y) in a.outboxes.iter().flatten().zip(b.outboxes.iter().flatten()) {
            assert_eq!(x.span.get(), y.span.get());
            assert_eq!((x.head.get(), x.tail.get()), (y.head.get(), y.tail.get()));
            assert_eq!(x.room.get(), y.room.get());
        }
        for c in 0..SPAN_CLASSES {
            assert_eq!(a.outbox_victim[c].get(), b.outbox_victim[c].get());
            assert_eq!(a.pooled_frees[c].get(), b.pooled_frees[c].get());
            assert_eq!(a.frees[c].load(Relaxed), b.frees[c].load(Relaxed));
        }
        assert_eq!(a.handover_seen.get(), b.handover_seen.get());
        assert_eq!(a.retire_seen.get(), b.retire_seen.get());
        assert_eq!(a.all_next.get(), b.all_next.get());
        assert_eq!(a.pool_next.get(), b.pool_next.get());
        assert_eq!(a.thread.get(), b.thread.get());
        assert_eq!(a.thread_next.get(), b.thread_next.get());
        assert_eq!(a.active.load(Relaxed), b.active.load(Relaxed));
        assert_eq!(a.trim_owner.load(Relaxed), b.trim_owner.load(Relaxed));
        assert_eq!(a.trim_trimmer.load(Relaxed), b.trim_trimmer.load(Relaxed));
        assert_eq!(a.trim_seen.load(Relaxed), b.trim_seen.load(Relaxed));
        assert_eq!(a.trim_bare_at.load(Relaxed), b.trim_bare_at.load(Relaxed));
        assert_eq!(
            a.trim_delayed_at.load(Relaxed),
            b.trim_delayed_at.load(Relaxed)
        );
        #[cfg(feature = "profiling")]
        {
            assert_eq!(a.prof_epoch.get(), b.prof_epoch.get());
            assert_eq!(a.prof_seq.load(Relaxed), b.prof_seq.load(Relaxed));
        }
    }
}
