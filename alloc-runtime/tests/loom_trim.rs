//! loom models of the idle-heap trim protocol (`src/trim_proto.rs`, with the remote-free push of
//! `src/remote_proto.rs`, both compiled here with loom's atomics): the background trimmer gives
//! a span back only when none of its blocks is live, and never while the owner, its fast path
//! or a freeing thread still touches it; an owner's slow path that acts on what its fast path saw
//! before the trimmer took the span finds it gone; the owner's exit (its spans handed to the
//! central pool) and a later owner's refill (a span taken back and allocated from) exclude the
//! trimmer; the owner's appends to its outboxes exclude the trimmer's publishing of them; an exiting
//! owner's heap, handed on through the pool, is not trimmed.
//!
//! The owner's and the trimmer's steps mirror `src/heap/fast.rs` (a local free: a push and a
//! store of `used`), `src/heap/slow.rs` (`span_emptied`, `refill`), `src/heap/abandon.rs`
//! (`abandon`) and `src/heap/idle.rs` (`give_back_empty`). The span's owner-only state (its list,
//! its local free list) and each block's memory are loom `UnsafeCell`s: loom fails a model in
//! which two threads touch one without an order between them, so "the trimmer gave the span back
//! while a free still wrote into it" and "the owner and the trimmer both moved the span" fail.

#![allow(dead_code)]

mod loom_arena;

use loom_arena::arena;

mod proto {
    pub use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

    pub fn spin_loop() {
        loom::thread::yield_now();
    }

    /// The owner's side of the asymmetric barrier pair (a compiler barrier in the runtime, whose
    /// hardware half the trimmer's `membarrier` supplies): modelled as what the pair guarantees,
    /// a `SeqCst` fence on each side.
    pub fn light_barrier() {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }

    /// The trimmer's side (`membarrier(2)` in the runtime; see [`light_barrier`]).
    pub fn heavy_barrier() -> bool {
        loom::sync::atomic::fence(Ordering::SeqCst);
        true
    }

    /// The runtime's chunk size minus one: links are chunk offsets.
    pub const LINK_MASK: usize = (4 << 20) - 1;

    include!("../src/remote_proto.rs");
    include!("../src/trim_proto.rs");
}

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use loom::sync::Arc;

/// Where the span is, as its owner's lists (or the trimmer's release) left it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Place {
    /// On the owner's partial list.
    Partial,
    /// The owner's current span (pinned).
    Current,
    /// Given back to the page heap.
    Released,
    /// In the central pool (its owner exited).
    Central,
}

/// Blocks of the model's span.
const BLOCKS: usize = 2;

/// A stand-in for a span and its heap's trim lock.
struct Model {
    /// The heap's trim lock: the owner's word and the trimmer's.
    owner_word: AtomicU32,
    trimmer_word: AtomicU32,
    /// The span's remote word.
    remote: AtomicUsize,
    /// The span's count of used blocks (`Span::used`).
    used: AtomicU32,
    /// The owner's view of the span: its list.
    place: UnsafeCell<Place>,
    /// Blocks on the local free list.
    local_free: UnsafeCell<u32>,
    /// Each block's memory.
    memory: [UnsafeCell<u64>; BLOCKS],
    /// Times the span was given back (by the owner or the trimmer).
    releases: AtomicUsize,
    /// Offset of this model's blocks in the arena (tests run in parallel).
    base: usize,
}

impl Model {
    /// A partial span with every block live.
    fn new(base: usize) -> Arc<Model> {
        Arc::new(Model {
            owner_word: AtomicU32::new(0),
            trimmer_word: AtomicU32::new(0),
            remote: AtomicUsize::new(0),
            used: AtomicU32::new(BLOCKS as u32),
            place: UnsafeCell::new(Place::Partial),
            local_free: UnsafeCell::new(0),
            memory: std::array::from_fn(|_| UnsafeCell::new(0)),
            releases: AtomicUsize::new(0),
            base,
        })
    }

    /// The owner enters a slow path (`Heap::enter`): `None` when already inside.
    fn enter(&self) -> Option<u32> {
        proto::owner_enter(&self.owner_word, &self.trimmer_word)
    }

    /// The owner leaves the slow path [`Model::enter`] entered.
    fn leave(&self, took: Option<u32>) {
        if let Some(to) = took {
            proto::owner_leave(&self.owner_word, to);
        }
    }

    /// The span's place (owner-side state, a loom cell: loom checks that every access is
    /// ordered after the last write by another thread).
    fn place(&self) -> Place {
        // SAFETY: loom's cell hands out the pointer only for this read, and fails the model if
        // another thread's access is not ordered with it.
        self.place.with(|p| unsafe { *p })
    }

    /// Sets the span's place (see [`Model::place`]).
    fn set_place(&self, to: Place) {
        // SAFETY: as in `place`, for a write.
        self.place.with_mut(|p| unsafe { *p = to });
    }

    /// Blocks on the local free list.
    fn local_free(&self) -> u32 {
        // SAFETY: as in `place`.
        self.local_free.with(|p| unsafe { *p })
    }

    /// Sets the count of blocks on the local free list.
    fn set_local_free(&self, n: u32) {
        // SAFETY: as in `place`, for a write.
        self.local_free.with_mut(|p| unsafe { *p = n });
    }

    /// Writes block `i`'s memory.
    fn write_block(&self, i: usize, v: u64) {
        // SAFETY: as in `place`, for a write.
        self.memory[i].with_mut(|p| unsafe { *p = v });
    }

    fn block(&self, i: usize) -> usize {
        arena() + 64 + self.base + 8 * i
    }

    /// Whoever gives the span back reuses its pages: every block's memory is written.
    fn release(&self) {
        for i in 0..BLOCKS {
            self.write_block(i, 0xdead);
        }
        self.set_local_free(0);
        self.set_place(Place::Released);
        self.releases.fetch_add(1, Ordering::Relaxed);
    }

    /// The owner's local free of block `i` (`fast.rs`): the block's link, the push, the count;
    /// at zero, the slow path (`slow::span_emptied`), which looks again under the lock.
    fn free_local(&self, i: usize) {
        self.write_block(i, 1);
        self.set_local_free(self.local_free() + 1);
        let used = self.used.load(Ordering::Relaxed) - 1;
        self.used.store(used, Ordering::Release);
        if used == 0 {
            let took = self.enter();
            let place = self.place();
            if place == Place::Partial && self.used.load(Ordering::Relaxed) == 0 {
                self.release();
            }
            self.leave(took);
        }
    }

    /// Another thread's free of block `i`: its link, then the push on the remote list.
    fn free_remote(&self, i: usize) {
        self.write_block(i, 2);
        // SAFETY: a block of the model's arena, freed once, ours until published.
        while !unsafe { proto::try_push(&self.remote, self.block(i), true) } {
            loom::thread::yield_now();
        }
    }

    /// The trimmer (`idle::trim`): gives the span back if it holds no live block.
    fn trim(&self) {
        if !proto::trimmer_try(&self.owner_word, &self.trimmer_word) {
            return;
        }
        let place = self.place();
        if place == Place::Partial && proto::holds_no_live_block(&self.remote, &self.used) {
            // `collect_remote`: the list taken, the count subtracted.
            let (_, n) = proto::take_remote(&self.remote);
            let used = self.used.load(Ordering::Relaxed) - n as u32;
            assert_eq!(used, 0, "a span with no live block counts none");
            self.used.store(used, Ordering::Release);
            self.release();
        }
        proto::trimmer_leave(&self.trimmer_word);
    }

    /// The owner's exit (`abandon::abandon`) under its lock: a span still on its list goes to
    /// the central pool with its remote list.
    fn exit(&self) {
        let took = self.enter();
        assert!(took.is_some());
        if self.place() == Place::Partial {
            self.set_place(Place::Central);
        }
        self.leave(took);
    }

    /// A refill (`slow::refill`) under the lock: the span, if still on the partial list, becomes
    /// current (pinned), its remote frees are collected and a block is handed out of it.
    /// Returns whether it allocated from the span.
    fn refill_and_allocate(&self) -> bool {
        let took = self.enter();
        assert!(took.is_some());
        let got = self.place() == Place::Partial;
        if got {
            self.set_place(Place::Current);
            let pinned = self.used.load(Ordering::Relaxed) + 1;
            self.used.store(pinned, Ordering::Release);
            let (_, n) = proto::take_remote(&self.remote);
            let used = self.used.load(Ordering::Relaxed) - n as u32;
            self.used.store(used, Ordering::Release);
            self.set_local_free(self.local_free() + n as u32);
            let free = self.local_free();
            assert!(free > 0, "a refilled span with no free block");
            // The allocation (fast path): a block popped and written.
            self.set_local_free(free - 1);
            self.used.store(used + 1, Ordering::Release);
            self.write_block(0, 3);
        }
        self.leave(took);
        got
    }
}

/// One block freed locally, the other by another thread, the trimmer between: the span is given
/// back exactly once (by whichever sees it empty), and never while a free still writes into it.
#[test]
fn trimmer_against_local_and_remote_frees() {
    loom::model(|| {
        let m = Model::new(0);
        let (m1, m2) = (m.clone(), m.clone());
        let remote = loom::thread::spawn(move || m1.free_remote(1));
        let trimmer = loom::thread::spawn(move || m2.trim());
        m.free_local(0);
        remote.join().unwrap();
        trimmer.join().unwrap();
        // The owner's span_emptied saw `used` at zero only if no remote block was pending; the
        // span is given back at most once, and it is once the trimmer saw it empty.
        let releases = m.releases.load(Ordering::Relaxed);
        assert!(releases <= 1, "given back {releases} times");
        let place = m.place();
        assert_eq!(place == Place::Released, releases == 1);
    });
}

/// Both blocks freed by other threads, the trimmer racing them twice: given back at most once,
/// only after both pushes.
#[test]
fn trimmer_against_two_remote_frees() {
    loom::model(|| {
        let m = Model::new(256);
        let (m1, m2) = (m.clone(), m.clone());
        let a = loom::thread::spawn(move || m1.free_remote(0));
        let b = loom::thread::spawn(move || m2.free_remote(1));
        m.trim();
        a.join().unwrap();
        b.join().unwrap();
        m.trim();
        assert_eq!(
            m.releases.load(Ordering::Relaxed),
            1,
            "the second trim finds it empty"
        );
    });
}

/// The owner exits (its spans to the central pool) while the trimmer runs and the last block is
/// freed remotely: the span is either given back by the trimmer or pooled, never both; pooled, it
/// keeps the pending block for its adopter.
#[test]
fn trimmer_against_owner_exit() {
    loom::model(|| {
        let m = Model::new(512);
        // The owner freed block 0 before (no emptying: block 1 is live).
        m.free_local(0);
        let (m1, m2) = (m.clone(), m.clone());
        let remote = loom::thread::spawn(move || m1.free_remote(1));
        let trimmer = loom::thread::spawn(move || m2.trim());
        m.exit();
        remote.join().unwrap();
        trimmer.join().unwrap();
        let place = m.place();
        let releases = m.releases.load(Ordering::Relaxed);
        match place {
            Place::Released => assert_eq!(releases, 1),
            Place::Central => {
                assert_eq!(releases, 0);
                // The adopter collects the remote block: the count is whole.
                let (_, n) = proto::take_remote(&m.remote);
                assert_eq!(m.used.load(Ordering::Relaxed) as usize, n);
            }
            p => panic!("span left {p:?}"),
        }
    });
}

/// A later owner (the heap reused by a new thread) refills from the span while the trimmer runs:
/// it never allocates from a span the trimmer gave back, and the trimmer never gives back the
/// span it allocates from.
#[test]
fn trimmer_against_refill() {
    loom::model(|| {
        let m = Model::new(768);
        m.free_local(0);
        let (m1, m2) = (m.clone(), m.clone());
        let remote = loom::thread::spawn(move || m1.free_remote(1));
        let trimmer = loom::thread::spawn(move || m2.trim());
        let got = m.refill_and_allocate();
        remote.join().unwrap();
        trimmer.join().unwrap();
        let place = m.place();
        let releases = m.releases.load(Ordering::Relaxed);
        if got {
            assert_eq!(place, Place::Current);
            assert_eq!(releases, 0);
        } else {
            assert_eq!(place, Place::Released);
            assert_eq!(releases, 1);
        }
    });
}

/// The owner's last local free empties the span while the trimmer looks: the trimmer may give
/// it back between the free's store of `used` and the owner's slow path, which then finds it gone
/// (`span_emptied` looks again under the lock); either way it is given back once.
#[test]
fn trimmer_against_emptying_free() {
    loom::model(|| {
        let m = Model::new(1024);
        m.free_local(1);
        let m1 = m.clone();
        let trimmer = loom::thread::spawn(move || m1.trim());
        m.free_local(0);
        trimmer.join().unwrap();
        assert_eq!(m.releases.load(Ordering::Relaxed), 1);
        assert_eq!(m.place(), Place::Released);
    });
}

/// A stand-in for a heap's outboxes (`slow::free_batched`, `slow::publish_outboxes`): the owner
/// appends the blocks it frees into other threads' spans under the trim lock (the remote-free
/// path enters it on every such free), and the trimmer publishes an idle heap's outboxes.
struct Outboxes {
    owner_word: AtomicU32,
    trimmer_word: AtomicU32,
    /// Blocks the outbox holds (the owner's, or the lock holder's).
    held: UnsafeCell<u32>,
    /// Each block's link, written by the append and read by the publish.
    links: [UnsafeCell<u64>; 2],
    /// Blocks published to their span.
    published: AtomicU32,
}

impl Outboxes {
    fn new() -> Arc<Outboxes> {
        Arc::new(Outboxes {
            owner_word: AtomicU32::new(0),
            trimmer_word: AtomicU32::new(0),
            held: UnsafeCell::new(0),
            links: std::array::from_fn(|_| UnsafeCell::new(0)),
            published: AtomicU32::new(0),
        })
    }

    fn held(&self) -> u32 {
        // SAFETY: as in `Model::place`.
        self.held.with(|p| unsafe { *p })
    }

    fn set_held(&self, n: u32) {
        // SAFETY: as in `Model::place`, for a write.
        self.held.with_mut(|p| unsafe { *p = n });
    }

    /// The owner frees block `i` into another thread's span: appended to the outbox under the
    /// lock; `nested` enters a second time inside the first, as a slow path called from another.
    fn free_remote(&self, i: usize, nested: bool) {
        let took = proto::owner_enter(&self.owner_word, &self.trimmer_word);
        assert!(took.is_some());
        let inner = nested.then(|| proto::owner_enter(&self.owner_word, &self.trimmer_word));
        assert!(
            inner.is_none_or(|t| t.is_none()),
            "a nested entry takes nothing"
        );
        // SAFETY: as in `Model::place`, for a write.
        self.links[i].with_mut(|p| unsafe { *p = i as u64 + 1 });
        self.set_held(self.held() + 1);
        proto::owner_leave(&self.owner_word, took.unwrap());
    }

    /// The trimmer publishes the outbox if the owner is outside its slow paths.
    fn trim(&self) {
        if !proto::trimmer_try(&self.owner_word, &self.trimmer_word) {
            return;
        }
        let n = self.held();
        for link in &self.links[..n as usize] {
            // SAFETY: as in `Model::place`.
            let v = link.with(|p| unsafe { *p });
            assert_ne!(v, 0, "published before its link was written");
        }
        self.published.fetch_add(n, Ordering::Relaxed);
        self.set_held(0);
        proto::trimmer_leave(&self.trimmer_word);
    }
}

/// The trimmer publishes the outbox of a heap whose owner keeps freeing into other threads'
/// spans: never while the owner appends (loom fails the model on the cells otherwise), never a
/// block twice, never one lost; a nested entry neither takes nor releases the lock.
#[test]
fn trimmer_against_outbox_appends() {
    loom::model(|| {
        let o = Outboxes::new();
        let o1 = o.clone();
        let trimmer = loom::thread::spawn(move || o1.trim());
        o.free_remote(0, false);
        o.free_remote(1, true);
        trimmer.join().unwrap();
        o.trim();
        assert_eq!(o.held(), 0);
        assert_eq!(o.published.load(Ordering::Relaxed), 2);
    });
}

/// A heap whose thread exits (`lifecycle::thread_exit`) while the trimmer tries it, and which
/// the pool then hands to the fallback heap's user (`alloc_after_exit`).
struct Exiting {
    owner_word: AtomicU32,
    trimmer_word: AtomicU32,
    /// `Heap::active`.
    active: loom::sync::atomic::AtomicBool,
    /// The heap's lists (owner-side state).
    lists: UnsafeCell<u32>,
    /// The pool of unused heaps: true once the heap is in it.
    pooled: loom::sync::Mutex<bool>,
}

/// The exiting owner gives its spans away and marks the heap inactive under its trim lock, then
/// pools it; the trimmer takes an active heap only (`idle::trim`); the fallback heap's user takes
/// the heap from the pool and changes its lists (modelled without the trim lock it also enters,
/// so that the model shows the order of `active` alone keeps the trimmer out).
#[test]
fn trimmer_against_exit_and_pool_handoff() {
    loom::model(|| {
        let h = Arc::new(Exiting {
            owner_word: AtomicU32::new(0),
            trimmer_word: AtomicU32::new(0),
            active: loom::sync::atomic::AtomicBool::new(true),
            lists: UnsafeCell::new(1),
            pooled: loom::sync::Mutex::new(false),
        });
        let (h1, h2) = (h.clone(), h.clone());
        let trimmer = loom::thread::spawn(move || {
            if proto::trimmer_try(&h1.owner_word, &h1.trimmer_word) {
                if h1.active.load(Ordering::Relaxed) {
                    // SAFETY: as in `Model::place`, for a write.
                    h1.lists.with_mut(|p| unsafe { *p = 0 });
                }
                proto::trimmer_leave(&h1.trimmer_word);
            }
        });
        let fallback = loom::thread::spawn(move || {
            let got = std::mem::take(&mut *h2.pooled.lock().unwrap());
            if got {
                // SAFETY: as in `Model::place`, for a write.
                h2.lists.with_mut(|p| unsafe { *p = 7 });
            }
        });
        let took = proto::owner_enter(&h.owner_word, &h.trimmer_word);
        // SAFETY: as in `Model::place`, for a write.
        h.lists.with_mut(|p| unsafe { *p = 0 });
        h.active.store(false, Ordering::Relaxed);
        proto::owner_leave(&h.owner_word, took.unwrap());
        *h.pooled.lock().unwrap() = true;
        trimmer.join().unwrap();
        fallback.join().unwrap();
    });
}
