//! The world of the loom models of several pooled spans and of span descriptors reused across
//! lives (`loom_central_spans.rs`, `loom_central_reuse.rs`), compiled with the runtime's own
//! protocol source (`src/heap/central_proto.rs`), as `loom_central.rs` is.
//!
//! Unlike `loom_central.rs`'s world of one span, this one has several span descriptors, a
//! central pool per class, and a page heap: a descriptor released to the page heap can be set
//! up again (a new *life*: a new owner, maybe another class) while threads of its old life are
//! still running. The protocol works on [`Life`] handles, one per descriptor and life, so that
//! every access it makes says which life it acts for:
//! - the owner-only fields (`used`, the local free list, the class) are
//!   `loom::cell::UnsafeCell`s, so loom reports every access that is not ordered after the
//!   previous owner's, including the setup of a new life racing with the old life's accesses
//!   (the page heap is a `loom::sync::Mutex` per descriptor, as `chunk::free_pages` and the
//!   page allocation take `PAGE_HEAP`'s lock);
//! - the list tag and owner word are relaxed atomics (as in `loom_central.rs`);
//! - the remote list is a bitmask of blocks, pushed with `Release`, taken with `Acquire`;
//! - ghost state (plain `std` atomics: loom runs one thread at a time, so they record the order
//!   in which things happened) tracks each descriptor's life, whether it is in the page heap,
//!   the life each block is live in, the life whose free put each block on the remote list,
//!   and each life's releases.
//!
//! Checked on every access the protocol makes: the descriptor is not in the page heap, and it
//! is in the life the caller acts for. Checked on release: no live block, no remote free
//! pending, released at most once per life. Checked on setup: the descriptor is in the page
//! heap, with no remote free pending. Checked at the end ([`World::settle`]): every earlier
//! life was released exactly once, a full sweep gives back exactly the pooled spans with no
//! live block, each pool holds each descriptor at most once and only in its current life, and
//! each span's books balance (its `used` count and free list match its live blocks).

#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize as GhostUsize, Ordering::SeqCst};

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use loom::sync::{Mutex, MutexGuard};

/// The protocol, from the runtime's source.
pub mod proto {
    use std::ops::DerefMut;

    include!("../../src/heap/central_proto.rs");
}

use proto::{PoolList, PoolSpan, TAG_CENTRAL, TAG_NONE};

mod check;

/// `ListTag::Current` of `span.rs`.
pub const TAG_CURRENT: u8 = 1;

/// Blocks per span in the model.
pub const BLOCKS: usize = 2;
/// Lives a descriptor may have in a model.
pub const LIVES: usize = 2;
/// Span classes (central pools) in the model.
pub const CLASSES: usize = 2;

/// Owner words of the model's heaps (any non-zero address).
pub const HEAP_OLD: usize = 0x100;
/// A second heap.
pub const HEAP_NEW: usize = 0x200;

/// A span descriptor (`span::Span` in its chunk header), reused across lives.
pub struct Desc {
    /// Blocks handed out and not freed locally, plus one while current (`Span::used`).
    used: UnsafeCell<u32>,
    /// The local free list (`Span::free`).
    free: UnsafeCell<Vec<usize>>,
    /// The span's class (`Span::class`), written when a life is set up.
    class: UnsafeCell<usize>,
    /// `Span::list`.
    tag: AtomicU8,
    /// `Span::owner`: the owning heap, 0 when nobody owns it.
    owner: AtomicUsize,
    /// `Span::remote`, as a set of blocks.
    remote: AtomicUsize,
    /// The page heap's hold on the descriptor: true while its pages are free.
    pages: Mutex<bool>,
    /// Ghost: the current life (1 for the first; 0 before any).
    life: GhostUsize,
    /// Ghost: 1 while the descriptor is in the page heap.
    in_page_heap: GhostUsize,
    /// Ghost: the life each block is live in (0: free).
    blocks: [GhostUsize; BLOCKS],
    /// Ghost: the life whose free put each block on the remote list.
    pushed: [GhostUsize; BLOCKS],
    /// Ghost: releases of each life (index: the life).
    releases: [GhostUsize; LIVES + 1],
}

impl Desc {
    /// A descriptor never set up, its pages free.
    fn new() -> Desc {
        Desc {
            used: UnsafeCell::new(0),
            free: UnsafeCell::new(Vec::new()),
            class: UnsafeCell::new(0),
            tag: AtomicU8::new(TAG_NONE),
            owner: AtomicUsize::new(0),
            remote: AtomicUsize::new(0),
            pages: Mutex::new(true),
            life: GhostUsize::new(0),
            in_page_heap: GhostUsize::new(1),
            blocks: [const { GhostUsize::new(0) }; BLOCKS],
            pushed: [const { GhostUsize::new(0) }; BLOCKS],
            releases: [const { GhostUsize::new(0) }; LIVES + 1],
        }
    }

    /// `Span::used` (owner only).
    fn used(&self) -> u32 {
        // SAFETY: a read by the span's current owner (checked by loom).
        self.used.with(|u| unsafe { *u })
    }

    /// Sets `Span::used` (owner only).
    fn set_used(&self, v: u32) {
        // SAFETY: a write by the span's current owner (checked by loom).
        self.used.with_mut(|u| unsafe { *u = v });
    }

    /// Asserts that the descriptor is out of the page heap and in `life`.
    fn check(&self, life: usize, what: &str) {
        assert_eq!(
            self.in_page_heap.load(SeqCst),
            0,
            "{what} by life {life} of a descriptor back in the page heap"
        );
        let now = self.life.load(SeqCst);
        assert_eq!(
            now, life,
            "{what} by life {life} of a descriptor in life {now}"
        );
    }

    /// Blocks live in the current life; panics on a block live in another.
    fn live_blocks(&self) -> Vec<usize> {
        let life = self.life.load(SeqCst);
        (0..BLOCKS)
            .filter(|&b| {
                let l = self.blocks[b].load(SeqCst);
                assert!(
                    l == 0 || l == life,
                    "block {b} live in life {l}, now {life}"
                );
                l != 0
            })
            .collect()
    }
}

/// A descriptor in one of its lives: what the protocol is handed (by an owner, a pool or the
/// page heap), so that each of its accesses is checked against the descriptor's current life.
pub struct Life {
    /// The descriptor (in the `World`'s own vector).
    desc: *const Desc,
    /// The life this handle acts for (1 for the first).
    life: usize,
    /// Ghost: the class of this life.
    class: GhostUsize,
}

impl Life {
    /// The descriptor.
    pub fn desc(&self) -> &Desc {
        // SAFETY: `desc` points into the `World` that holds this handle.
        unsafe { &*self.desc }
    }

    /// The class of this life.
    pub fn class(&self) -> usize {
        self.class.load(SeqCst)
    }

    /// Asserts that the descriptor is out of the page heap and in this handle's life.
    fn check(&self, what: &str) {
        self.desc().check(self.life, what);
    }
}

impl PoolSpan for Life {
    fn tag(&self) -> u8 {
        self.check("tag read");
        self.desc().tag.load(Ordering::Relaxed)
    }

    fn set_tag(&self, tag: u8) {
        self.check("tag write");
        self.desc().tag.store(tag, Ordering::Relaxed);
    }

    fn set_owner(&self, heap: usize) {
        self.check("owner write");
        self.desc().owner.store(heap, Ordering::Relaxed);
    }

    fn used(&self) -> u32 {
        self.check("used read");
        self.desc().used()
    }

    /// `heap::collect_remote`: the remote list onto the local free list.
    fn collect_remote(&self) -> u32 {
        self.check("remote collection");
        let d = self.desc();
        let bits = d.remote.swap(0, Ordering::Acquire);
        let n = bits.count_ones();
        for b in (0..BLOCKS).filter(|b| bits & (1 << b) != 0) {
            let by = d.pushed[b].swap(0, SeqCst);
            assert_eq!(
                by, self.life,
                "life {} collected life {by}'s free",
                self.life
            );
            // SAFETY: a write by the span's current owner (checked by loom).
            d.free.with_mut(|f| unsafe { (*f).push(b) });
        }
        let used = d.used();
        assert!(
            used >= n,
            "more remote frees ({n}) than used blocks ({used})"
        );
        d.set_used(used - n);
        n
    }

    /// `heap::release_span`: the span's pages go back to the page heap.
    unsafe fn release(&self) {
        self.check("release");
        let d = self.desc();
        assert_eq!(d.used(), 0, "released a span with live blocks");
        assert!(
            d.live_blocks().is_empty(),
            "released a span with a live block"
        );
        assert_eq!(
            d.remote.load(Ordering::Relaxed),
            0,
            "released with remote frees pending"
        );
        let n = d.releases[self.life].fetch_add(1, SeqCst);
        assert_eq!(n, 0, "life {} released twice", self.life);
        d.owner.store(0, Ordering::Relaxed);
        d.in_page_heap.store(1, SeqCst);
        *d.pages.lock().unwrap() = true;
    }
}

/// A class's central pool: handles, the front at the end of the vector.
pub struct PoolSpans(Vec<*const Life>);
// SAFETY: the handles live in the `World`, which outlives every thread of a model.
unsafe impl Send for PoolSpans {}

impl PoolSpans {
    /// Where the pool holds `span`'s descriptor; panics if it holds it in another life.
    fn position(&self, span: &Life) -> Option<usize> {
        let i = self.0.iter().position(|&s| {
            // SAFETY: pooled handles live in the `World`.
            std::ptr::eq(unsafe { (*s).desc }, span.desc)
        })?;
        // The real list links descriptors: a handle of another life would be the same span.
        assert!(
            std::ptr::eq(self.0[i], span),
            "the pool holds the descriptor in another life"
        );
        Some(i)
    }
}

impl PoolList<Life> for PoolSpans {
    fn push(&mut self, span: &Life) {
        span.check("central push");
        assert!(self.position(span).is_none(), "span pooled twice");
        self.0.push(span);
    }

    /// Unlinking writes the span's links: an access like any other.
    fn unlink(&mut self, span: &Life) {
        span.check("unlink");
        let i = self
            .position(span)
            .expect("unlinked a span that is not in the central pool");
        self.0.remove(i);
    }

    /// Popping reads the span's links.
    fn pop(&mut self) -> Option<*const Life> {
        let s = self.0.pop()?;
        // SAFETY: pooled handles live in the `World`.
        unsafe { (*s).check("pool pop") };
        Some(s)
    }

    fn back(&self) -> Option<*const Life> {
        self.0.first().copied()
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

/// A descriptor's state when a model starts.
pub enum Start {
    /// Free in the page heap.
    Free,
    /// Pooled in `class`, with the blocks of `live` handed out.
    Pooled(usize, &'static [usize]),
    /// The current span of heap `HEAP_OLD` in `class`, with the blocks of `live` handed out.
    Current(usize, &'static [usize]),
}

/// Descriptors, their lives, the pools.
pub struct World {
    /// The descriptors (never resized: handles and pools point into it).
    descs: Vec<Desc>,
    /// Index: descriptor * LIVES + life - 1.
    lives: Vec<Life>,
    /// The central pools, one per class.
    pools: Vec<Mutex<PoolSpans>>,
}

// SAFETY: the raw pointers name the `World`'s own descriptors and handles, which it never
// moves (their vectors are never resized) and which outlive every thread of a model.
unsafe impl Send for World {}
// SAFETY: as above; everything shared is an atomic, a loom cell or behind a loom mutex.
unsafe impl Sync for World {}

impl World {
    /// Descriptors set up as `start` says; pooled ones go in their pool in order (the first is
    /// the oldest).
    pub fn new(start: &[Start]) -> World {
        let descs: Vec<Desc> = start.iter().map(|_| Desc::new()).collect();
        let mut w = World {
            lives: Vec::new(),
            descs,
            pools: (0..CLASSES)
                .map(|_| Mutex::new(PoolSpans(Vec::new())))
                .collect(),
        };
        w.lives = (0..w.descs.len() * LIVES)
            .map(|i| Life {
                desc: &w.descs[i / LIVES],
                life: i % LIVES + 1,
                class: GhostUsize::new(0),
            })
            .collect();
        for (d, s) in start.iter().enumerate() {
            match *s {
                Start::Free => {}
                Start::Current(class, live) => {
                    w.fresh(d, class, HEAP_OLD, live).unwrap();
                }
                Start::Pooled(class, live) => {
                    let h = w.fresh(d, class, HEAP_OLD, live).unwrap();
                    h.set_tag(TAG_NONE);
                    h.desc().set_used(h.desc().used() - 1);
                    proto::central_push(w.pool(class), h);
                }
            }
        }
        w
    }

    /// Locks `class`'s pool.
    pub fn pool(&self, class: usize) -> MutexGuard<'_, PoolSpans> {
        self.pools[class].lock().unwrap()
    }

    /// Descriptor `d`'s handle for its current life.
    pub fn current(&self, d: usize) -> &Life {
        let life = self.descs[d].life.load(SeqCst);
        &self.lives[d * LIVES + life - 1]
    }

    /// The current life of descriptor `d`.
    pub fn life(&self, d: usize) -> usize {
        self.descs[d].life.load(SeqCst)
    }

    /// Releases of descriptor `d`'s life `life`.
    pub fn releases(&self, d: usize, life: usize) -> usize {
        self.descs[d].releases[life].load(SeqCst)
    }

    /// A thread takes descriptor `d`'s pages from the page heap, if they are free, for a span
    /// of `class` that becomes `heap`'s current span with the blocks of `live` handed out
    /// (`chunk::alloc_pages`, then `Span` setup and `make_current`).
    pub fn fresh(&self, d: usize, class: usize, heap: usize, live: &[usize]) -> Option<&Life> {
        let desc = &self.descs[d];
        {
            let mut free = desc.pages.lock().unwrap();
            if !*free {
                return None;
            }
            *free = false;
        }
        assert_eq!(desc.in_page_heap.swap(0, SeqCst), 1, "pages taken twice");
        let life = desc.life.fetch_add(1, SeqCst) + 1;
        assert!(life <= LIVES, "more lives than the model allows");
        assert_eq!(
            desc.remote.load(Ordering::Relaxed),
            0,
            "a new life starts with frees of an earlier one pending"
        );
        let h = &self.lives[d * LIVES + life - 1];
        h.class.store(class, SeqCst);
        // SAFETY: the new owner's writes (checked by loom against every earlier access).
        desc.class.with_mut(|c| unsafe { *c = class });
        desc.set_used(live.len() as u32 + 1);
        // SAFETY: as above.
        desc.free
            .with_mut(|f| unsafe { *f = (0..BLOCKS).filter(|b| !live.contains(b)).collect() });
        for &b in live {
            assert_eq!(
                desc.blocks[b].swap(life, SeqCst),
                0,
                "block {b} handed out twice"
            );
        }
        desc.owner.store(heap, Ordering::Relaxed);
        desc.tag.store(TAG_CURRENT, Ordering::Relaxed);
        Some(h)
    }

    /// `heap::abandon` for an exiting owner's current span (already quiesced): unpin, then the
    /// runtime's `central::give_away` (shared source) into the life's class's pool.
    pub fn owner_exits(&self, h: &Life) {
        h.check("abandon");
        h.desc().tag.store(TAG_NONE, Ordering::Relaxed);
        h.desc().set_used(h.desc().used() - 1);
        let class = h.class();
        // SAFETY: the exiting owner owns the span.
        unsafe { proto::give_away(h, || self.pool(class)) };
    }

    /// `heap::miss::free_slow` by a thread that does not own the span, of block `b` of
    /// descriptor `d`, live in life `life`: the class is read before the push (after it, the
    /// span may be collected, released and set up again), then the block goes on the remote
    /// list without a lock. With `then_sweep`, the freeing thread's share of the sweeping
    /// follows (`central::sweep_after_frees` of the class read: a sweep if the pool's lock is
    /// free), whether or not the span was pooled.
    pub fn free_foreign(&self, d: usize, b: usize, life: usize, then_sweep: bool) {
        let desc = &self.descs[d];
        desc.check(life, "free");
        // SAFETY: a read ordered after the life's setup by the block's hand-out (checked by
        // loom).
        let class = desc.class.with(|c| unsafe { *c });
        let was = desc.blocks[b].swap(0, SeqCst);
        assert_eq!(was, life, "block {b} freed twice or in another life");
        let old = desc.remote.fetch_or(1 << b, Ordering::Release);
        // Ghost, right after the push (loom switches threads only at its own operations).
        desc.check(life, "remote free");
        assert_eq!(old & (1 << b), 0, "block {b} on the remote list twice");
        desc.pushed[b].store(life, SeqCst);
        if then_sweep {
            if let Ok(pool) = self.pools[class].try_lock() {
                proto::sweep_locked(pool, proto::SWEEP_ON_PUSH);
            }
        }
    }

    /// `heap::central::sweep_all` for `class` (shared source). Returns the spans it gave back.
    pub fn sweep(&self, class: usize) -> usize {
        proto::sweep(|| self.pool(class), usize::MAX)
    }

    /// A short sweep of `class` (as after a span is pooled or a thread takes fresh pages).
    pub fn sweep_short(&self, class: usize) -> usize {
        proto::sweep(|| self.pool(class), proto::SWEEP_ON_PUSH)
    }

    /// The adoption part of `heap::refill` from `class`'s pool (`central_pop`, owner word,
    /// `collect_remote`, `make_current`), then one allocation from the adopted span if it has
    /// a free block. Returns the adopted span's descriptor, life and block handed out.
    pub fn adopt_and_alloc(
        &self,
        class: usize,
        heap: usize,
    ) -> Option<(usize, usize, Option<usize>)> {
        let s = proto::central_pop(self.pool(class))?;
        // SAFETY: pool members are handles of the `World`.
        let h = unsafe { &*s };
        h.set_owner(heap);
        h.collect_remote();
        h.set_tag(TAG_CURRENT);
        let d = h.desc();
        d.set_used(d.used() + 1);
        // SAFETY: the adopter owns the span now (checked by loom).
        let b = d.free.with_mut(|f| unsafe { (*f).pop() });
        if let Some(b) = b {
            d.set_used(d.used() + 1);
            assert_eq!(
                d.blocks[b].swap(h.life, SeqCst),
                0,
                "block {b} handed out while live"
            );
        }
        let idx = self.descs.iter().position(|x| std::ptr::eq(x, d)).unwrap();
        Some((idx, h.life, b))
    }
}
