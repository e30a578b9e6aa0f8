//! loom models of the span hand-offs through the central pools, compiled from the runtime's
//! own protocol source (`src/heap/central_proto.rs`, as `heap/central.rs` compiles it): a
//! thread exit abandons its span into the pool (`abandon` -> `give_away` -> `central_push`, then
//! a short `sweep`), other threads free blocks of the span without a lock (`free_slow` -> the
//! span's remote list, whoever owns it), a refill adopts it (`refill` -> `central_pop`), and a
//! sweep (`collect()` -> `sweep_all`) gives an emptied pooled span back to the page heap
//! (`release_span`).
//!
//! The model binds the protocol to a three-block span:
//! - the owner-only fields (`used`, the local free list) are `loom::cell::UnsafeCell`s, so loom
//!   reports every access that is not ordered after the previous owner's (the real fields are
//!   `Cell`s that only the owner, or the holder of the pool lock, may touch);
//! - the list tag (a `Cell<u8>` in the real span) is a relaxed atomic here, so that the models
//!   check the protocol's logic rather than stopping at a formal race on that byte;
//! - the remote list is a bitmask of blocks (`remote::free_remote` pushes with `Release`,
//!   `remote::take_remote` takes with `Acquire`); its notification states are covered by
//!   `loom_remote.rs` and are `NONE` here (an exiting owner quiesces its spans first);
//! - the central pool is a `loom::sync::Mutex` around the list of spans it holds;
//! - ghost state (plain `std` atomics, outside loom's model: loom runs one thread at a time, so
//!   they record the order in which things actually happened) tracks which blocks are live and
//!   whether the span went back to the page heap.
//!
//! Checked: every block freed exactly once is accounted for (the span's `used` count plus the
//! blocks on its lists match the live blocks), the span is released at most once and only when
//! empty, it is never in the pool after its release, no block is pushed to it after its
//! release, and once every thread is done a sweep gives back a pooled span with no live block.

#![allow(dead_code)]

use std::sync::atomic::{AtomicU8 as GhostU8, AtomicUsize as GhostUsize, Ordering::SeqCst};

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use loom::sync::{Arc, Mutex};

mod proto {
    use std::ops::DerefMut;

    include!("../src/heap/central_proto.rs");
}

use proto::{PoolList, PoolSpan, TAG_CENTRAL, TAG_NONE};

/// `ListTag::Current` of `span.rs`.
const TAG_CURRENT: u8 = 1;

/// Runs a loom model with at most `preemptions` preemptions per execution (`None`: exhaustive).
fn model<F: Fn() + Sync + Send + 'static>(preemptions: Option<usize>, f: F) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = preemptions;
    b.check(f);
}

/// Blocks per span in the model.
const BLOCKS: usize = 3;

/// Owner words of the model's heaps (any non-zero address).
const HEAP_OLD: usize = 0x100;
const HEAP_NEW: usize = 0x200;

/// Ghost block states.
const FREE: u8 = 0;
const LIVE: u8 = 1;

/// The model's span descriptor (`span::Span`).
struct Span {
    /// Blocks handed out and not yet freed locally, plus one while current (`Span::used`).
    used: UnsafeCell<u32>,
    /// The local free list (`Span::free`).
    free: UnsafeCell<Vec<usize>>,
    /// `Span::list`.
    tag: AtomicU8,
    /// `Span::owner`: the owning heap, 0 when nobody owns it.
    owner: AtomicUsize,
    /// `Span::remote`, as a set of blocks.
    remote: AtomicUsize,
    /// Ghost: how often the span went back to the page heap.
    released: GhostUsize,
    /// Ghost: each block's state.
    blocks: [GhostU8; BLOCKS],
}

impl Span {
    fn used(&self) -> u32 {
        // SAFETY: a read by the span's current owner (checked by loom).
        self.used.with(|u| unsafe { *u })
    }

    fn set_used(&self, v: u32) {
        // SAFETY: a write by the span's current owner (checked by loom).
        self.used.with_mut(|u| unsafe { *u = v });
    }

    /// `Span::push_local` (by the owner, or the holder of the pool lock).
    fn push_local(&self, b: usize) {
        self.assert_not_released("local free");
        // SAFETY: a write by the span's current owner (checked by loom).
        self.free.with_mut(|f| unsafe { (*f).push(b) });
    }

    fn assert_not_released(&self, what: &str) {
        assert_eq!(
            self.released.load(SeqCst),
            0,
            "{what} after the span's release"
        );
    }

    /// `remote::free_remote` with the span's remote state NONE: a push on the remote list.
    fn push_remote(&self, b: usize) {
        self.assert_not_released("remote free");
        let old = self.remote.fetch_or(1 << b, Ordering::Release);
        assert_eq!(old & (1 << b), 0, "block {b} on the remote list twice");
    }
}

impl PoolSpan for Span {
    fn tag(&self) -> u8 {
        self.tag.load(Ordering::Relaxed)
    }

    fn set_tag(&self, tag: u8) {
        self.tag.store(tag, Ordering::Relaxed);
    }

    fn set_owner(&self, heap: usize) {
        self.owner.store(heap, Ordering::Relaxed);
    }

    fn used(&self) -> u32 {
        Span::used(self)
    }

    /// `heap::collect_remote`: the remote list onto the local free list.
    fn collect_remote(&self) -> u32 {
        let bits = self.remote.swap(0, Ordering::Acquire);
        if bits == 0 {
            return 0;
        }
        let n = bits.count_ones();
        for b in 0..BLOCKS {
            if bits & (1 << b) != 0 {
                self.push_local(b);
            }
        }
        let used = Span::used(self);
        assert!(
            used >= n,
            "more remote frees ({n}) than used blocks ({used})"
        );
        Span::set_used(self, used - n);
        n
    }

    /// `heap::release_span`: the span's pages go back to the page heap.
    unsafe fn release(&self) {
        assert_eq!(Span::used(self), 0, "released a span with live blocks");
        assert_eq!(self.remote.load(Ordering::Relaxed), 0);
        assert_eq!(self.released.fetch_add(1, SeqCst), 0, "span released twice");
        self.owner.store(0, Ordering::Relaxed);
    }
}

/// The model's central pool of the span's class (`heap::CENTRAL[class]`): the spans it holds
/// (only ours, in these models).
struct PoolSpans(Vec<*const Span>);
// SAFETY: the pointers name the `World`'s span, which outlives every thread of a model.
unsafe impl Send for PoolSpans {}

impl PoolList<Span> for PoolSpans {
    /// The front is the end of the vector.
    fn push(&mut self, span: &Span) {
        span.assert_not_released("central push");
        self.0.push(span);
    }

    /// The real list is intrusive: unlinking a span that is not on it corrupts the pool (and
    /// trips `SpanList::unlink`'s debug assertion), which the model reports here.
    fn unlink(&mut self, span: &Span) {
        let i = self
            .0
            .iter()
            .position(|&s| std::ptr::eq(s, span))
            .expect("unlinked a span that is not in the central pool");
        self.0.remove(i);
    }

    fn pop(&mut self) -> Option<*const Span> {
        self.0.pop()
    }

    fn back(&self) -> Option<*const Span> {
        self.0.first().copied()
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

type Pool = Mutex<PoolSpans>;

struct World {
    span: Box<Span>,
    pool: Pool,
}

impl World {
    /// A span that is heap `HEAP_OLD`'s current span, with the blocks of `live` handed out.
    fn owned_current(live: &[usize]) -> World {
        World::new(live, TAG_CURRENT, HEAP_OLD, 1, false)
    }

    /// A span abandoned earlier into the central pool, with the blocks of `live` handed out.
    fn in_central(live: &[usize]) -> World {
        World::new(live, TAG_CENTRAL, 0, 0, true)
    }

    fn new(live: &[usize], tag: u8, owner: usize, pin: u32, pooled: bool) -> World {
        let blocks = [GhostU8::new(FREE), GhostU8::new(FREE), GhostU8::new(FREE)];
        for &b in live {
            blocks[b].store(LIVE, SeqCst);
        }
        let span = Box::new(Span {
            used: UnsafeCell::new(live.len() as u32 + pin),
            free: UnsafeCell::new((0..BLOCKS).filter(|b| !live.contains(b)).collect()),
            tag: AtomicU8::new(tag),
            owner: AtomicUsize::new(owner),
            remote: AtomicUsize::new(0),
            released: GhostUsize::new(0),
            blocks,
        });
        let pooled = if pooled {
            vec![&*span as *const Span]
        } else {
            Vec::new()
        };
        World {
            span,
            pool: Mutex::new(PoolSpans(pooled)),
        }
    }

    /// How often the pool holds the span.
    fn pooled(&self) -> usize {
        let me = &*self.span as *const Span;
        self.pool
            .lock()
            .unwrap()
            .0
            .iter()
            .filter(|&&s| s == me)
            .count()
    }

    fn used(&self) -> u32 {
        self.span.used()
    }

    fn set_used(&self, v: u32) {
        self.span.set_used(v);
    }

    /// Ghost: the holder of `b` gives it up.
    fn ghost_free(&self, b: usize) {
        assert_eq!(
            self.span.blocks[b].swap(FREE, SeqCst),
            LIVE,
            "block {b} freed twice"
        );
    }

    /// `heap::abandon` for the exiting heap's current span (already quiesced): unpin, give away
    /// (the runtime's `central::give_away`, from the shared source).
    fn owner_exits(&self) {
        self.span.tag.store(TAG_NONE, Ordering::Relaxed);
        self.set_used(self.used() - 1);
        // SAFETY: the exiting owner owns the span.
        unsafe { proto::give_away(&*self.span, || self.pool.lock().unwrap()) };
    }

    /// `heap::free_slow` for a thread that does not own the span, whoever owns it (an owner, a
    /// pool, nobody between the two): a push on its remote list, no lock.
    fn free_foreign(&self, b: usize) {
        self.ghost_free(b);
        self.span.push_remote(b);
    }

    /// `heap::miss::free_slow` into a pooled span, then the freeing thread's share of the sweeping
    /// (`central::sweep_after_frees`): a sweep only if the pool's lock is free.
    fn free_foreign_then_try_sweep(&self, b: usize) {
        self.free_foreign(b);
        if let Ok(pool) = self.pool.try_lock() {
            proto::sweep_locked(pool, proto::SWEEP_ON_PUSH);
        }
    }

    /// `heap::central::sweep_all` for the span's class (from the shared source). Returns the
    /// spans it gave back.
    fn sweep(&self) -> usize {
        proto::sweep(|| self.pool.lock().unwrap(), usize::MAX)
    }

    /// The adoption part of `heap::refill` (`central_pop`, owner word, `collect_remote`,
    /// `make_current`), then one allocation from the adopted span if it has a free block.
    /// Returns whether it adopted the span.
    fn adopt_and_alloc(&self, heap: usize) -> bool {
        let Some(s) = proto::central_pop(self.pool.lock().unwrap()) else {
            return false;
        };
        assert_eq!(s, &*self.span as *const Span);
        self.span.owner.store(heap, Ordering::Relaxed);
        self.span.collect_remote();
        self.span.tag.store(TAG_CURRENT, Ordering::Relaxed);
        self.set_used(self.used() + 1);
        // SAFETY: the adopter owns the span now (checked by loom).
        if let Some(b) = self.span.free.with_mut(|f| unsafe { (*f).pop() }) {
            self.set_used(self.used() + 1);
            assert_eq!(
                self.span.blocks[b].swap(LIVE, SeqCst),
                FREE,
                "block {b} handed out while live"
            );
        }
        true
    }

    /// After every thread has joined: the span's books balance.
    fn check_final(&self) {
        let live = (0..BLOCKS)
            .filter(|&b| self.span.blocks[b].load(SeqCst) == LIVE)
            .count() as u32;
        let pooled = self.pooled();
        if self.span.released.load(SeqCst) == 1 {
            assert_eq!(live, 0, "span released with live blocks");
            assert_eq!(pooled, 0, "released span left in the central pool");
            assert_eq!(self.span.remote.load(Ordering::Relaxed), 0);
            return;
        }
        let tag = self.span.tag.load(Ordering::Relaxed);
        match tag {
            TAG_CENTRAL => {
                assert_eq!(pooled, 1, "span tagged central but not pooled exactly once");
                assert_eq!(self.span.owner.load(Ordering::Relaxed), 0);
            }
            TAG_CURRENT => {
                assert_eq!(pooled, 0, "owned span still in the central pool");
                assert_ne!(self.span.owner.load(Ordering::Relaxed), 0);
            }
            t => panic!("span lost: tag {t}, not released"),
        }
        // Whoever owns the span next collects its remote list.
        self.span.collect_remote();
        let pin = u32::from(tag == TAG_CURRENT);
        assert_eq!(
            self.used(),
            live + pin,
            "used count does not match the live blocks"
        );
        // SAFETY: every thread has joined.
        let mut free = self.span.free.with(|f| unsafe { (*f).clone() });
        free.sort_unstable();
        let want: Vec<usize> = (0..BLOCKS)
            .filter(|&b| self.span.blocks[b].load(SeqCst) == FREE)
            .collect();
        assert_eq!(
            free, want,
            "free list does not hold exactly the free blocks"
        );
    }
}

/// After every thread of a model has joined: a span still pooled with no live block goes back
/// to the page heap on the next sweep, and one with a live block stays pooled.
fn settle(w: &World) {
    let live = (0..BLOCKS).any(|b| w.span.blocks[b].load(SeqCst) == LIVE);
    if w.span.tag.load(Ordering::Relaxed) == TAG_CENTRAL {
        assert_eq!(
            w.sweep(),
            usize::from(!live),
            "sweep of a settled pooled span"
        );
        if live {
            assert_eq!(w.pooled(), 1);
        }
    }
    w.check_final();
}

/// The thread-exit race: the span is its owner's current span, holding one live block that
/// another thread holds. The owner exits (abandoning the span to the pool, with its short
/// sweep) while that thread frees the block and a third thread's refill tries to adopt the span.
#[test]
fn exit_vs_free_vs_adopt() {
    loom::model(|| {
        let w = Arc::new(World::owned_current(&[0]));
        let w1 = w.clone();
        let freer = loom::thread::spawn(move || w1.free_foreign(0));
        let w2 = w.clone();
        let adopter = loom::thread::spawn(move || w2.adopt_and_alloc(HEAP_NEW));
        w.owner_exits();
        freer.join().unwrap();
        adopter.join().unwrap();
        settle(&w);
    });
}

/// The exit race with two live blocks: one freed by another thread while the owner exits, the
/// other still live at the end. The span ends in the pool with its books balanced; once the last
/// block is freed, a sweep gives it back.
#[test]
fn exit_vs_free_keeps_other_block() {
    loom::model(|| {
        let w = Arc::new(World::owned_current(&[0, 1]));
        let w1 = w.clone();
        let freer = loom::thread::spawn(move || w1.free_foreign(0));
        w.owner_exits();
        freer.join().unwrap();
        assert_eq!(w.span.released.load(SeqCst), 0);
        settle(&w);
        w.free_foreign(1);
        assert_eq!(w.sweep(), 1);
        assert_eq!(w.span.released.load(SeqCst), 1);
        w.check_final();
    });
}

/// The owner exits while another thread frees a block and a third sweeps the pool (`collect()`):
/// the span is released at most once, only when empty, and never freed into after.
#[test]
fn exit_vs_free_vs_sweep() {
    model(Some(3), || {
        let w = Arc::new(World::owned_current(&[0, 1]));
        let w1 = w.clone();
        let freer = loom::thread::spawn(move || {
            w1.free_foreign(0);
            w1.free_foreign(1);
        });
        let w2 = w.clone();
        let sweeper = loom::thread::spawn(move || w2.sweep());
        w.owner_exits();
        freer.join().unwrap();
        sweeper.join().unwrap();
        settle(&w);
        assert_eq!(w.span.released.load(SeqCst), 1, "an empty span left behind");
    });
}

/// A span already in the pool: two threads free its two live blocks while a third adopts it
/// (and allocates from it). Either the adopter ends up with the frees on its free or remote
/// list, or the span stays pooled and the next sweep gives it back.
#[test]
fn pooled_span_frees_vs_adopt() {
    model(Some(4), || {
        let w = Arc::new(World::in_central(&[0, 1]));
        let w1 = w.clone();
        let f1 = loom::thread::spawn(move || w1.free_foreign(0));
        let w2 = w.clone();
        let f2 = loom::thread::spawn(move || w2.free_foreign(1));
        let adopted = w.adopt_and_alloc(HEAP_NEW);
        f1.join().unwrap();
        f2.join().unwrap();
        settle(&w);
        assert_eq!(
            w.span.released.load(SeqCst),
            usize::from(!adopted),
            "released iff not adopted"
        );
    });
}

/// A span in the pool with one live block: its free races with an adoption and a sweep.
/// Whichever wins, the block is accounted for once and the span is released at most once, and
/// only after the free.
#[test]
fn pooled_span_last_free_vs_adopt_vs_sweep() {
    model(Some(3), || {
        let w = Arc::new(World::in_central(&[2]));
        let w1 = w.clone();
        let f = loom::thread::spawn(move || w1.free_foreign(2));
        let w2 = w.clone();
        let s = loom::thread::spawn(move || w2.sweep());
        let adopted = w.adopt_and_alloc(HEAP_NEW);
        f.join().unwrap();
        s.join().unwrap();
        settle(&w);
        assert_eq!(w.span.released.load(SeqCst), usize::from(!adopted));
    });
}

/// The freeing threads sweep as they go (with a lock they find free) while a third adopts the
/// span: released at most once, only once empty, never freed into after; adopted or given back.
#[test]
fn pooled_span_freeing_threads_sweep_vs_adopt() {
    model(Some(3), || {
        let w = Arc::new(World::in_central(&[0, 1]));
        let w1 = w.clone();
        let f1 = loom::thread::spawn(move || w1.free_foreign_then_try_sweep(0));
        let w2 = w.clone();
        let f2 = loom::thread::spawn(move || w2.free_foreign_then_try_sweep(1));
        let adopted = w.adopt_and_alloc(HEAP_NEW);
        f1.join().unwrap();
        f2.join().unwrap();
        settle(&w);
        assert_eq!(w.span.released.load(SeqCst), usize::from(!adopted));
    });
}

/// The owner exits while another thread frees both blocks, sweeping as it goes.
#[test]
fn exit_vs_freeing_thread_sweeping() {
    model(Some(3), || {
        let w = Arc::new(World::owned_current(&[0, 1]));
        let w1 = w.clone();
        let freer = loom::thread::spawn(move || {
            w1.free_foreign_then_try_sweep(0);
            w1.free_foreign_then_try_sweep(1);
        });
        w.owner_exits();
        freer.join().unwrap();
        settle(&w);
        assert_eq!(w.span.released.load(SeqCst), 1, "an empty span left behind");
    });
}

/// Two frees of a pooled span's blocks race with two sweeps: the span goes back exactly once,
/// and leaves the pool.
#[test]
fn pooled_span_two_frees_two_sweeps_release_once() {
    model(Some(3), || {
        let w = Arc::new(World::in_central(&[0, 1]));
        let w1 = w.clone();
        let f = loom::thread::spawn(move || {
            w1.free_foreign(0);
            w1.sweep();
        });
        w.free_foreign(1);
        w.sweep();
        f.join().unwrap();
        settle(&w);
        assert_eq!(w.span.released.load(SeqCst), 1);
        assert_eq!(w.pooled(), 0);
    });
}
