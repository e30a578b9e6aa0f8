//! loom models of the tiny blocks' liveness protocol (`src/tiny_proto.rs`, compiled here with
//! loom's atomics), driven the way `src/heap.rs` drives it:
//!
//! - the owner carves objects from its current block without touching the block's counts and
//!   counts its own frees of it in its heap (`free_tiny`, `tiny_cur_frees`); it retires the block
//!   by storing that count as the block's local count and publishing the carved count
//!   (`retire_tiny` -> `tiny_proto::retire`), or frees it outright if it freed every object;
//! - the owner's frees of a retired block are a store of the local count and `owner_free`;
//! - other threads' frees are `remote_free`; when that cannot tell whether the block died they
//!   mark the block dirty and send the span's token to the owner through the span's remote list
//!   (`free_tiny_remote`), and the owner re-checks dirty blocks when it takes the token
//!   (`collect_remote_tiny` -> `take_token`);
//! - whoever claims the dead block frees it: the owner onto its free list; another thread by a
//!   remote free, which writes the block's link word and hands it to the owner through the
//!   span's remote list (`free_small` -> `free_slow` -> `remote::free_remote`).
//!
//! Checked: exactly one party claims each block (never none, never two), and every access to the
//! block's bytes (each object's last use before its free, the claimer's link word, the owner's
//! reuse) is ordered after the others: the objects are `loom::cell::UnsafeCell`s.
//!
//! Every write to an atomic that other threads modify with read-modify-write operations is a
//! read-modify-write here as well: loom 0.7 can order a plain store between the read and the
//! write of a concurrent read-modify-write (tokio-rs/loom#254), which reports impossible
//! executions.

#![allow(dead_code)]

mod proto {
    use loom::sync::atomic::{AtomicU16, AtomicU8, Ordering};

    include!("../src/tiny_proto.rs");
}

use std::sync::atomic::{AtomicUsize as GhostUsize, Ordering::SeqCst};

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicU16, AtomicU8, Ordering};
use loom::sync::Arc;
use proto::DEAD;

/// How the owner stores a block's local count when it frees an object of a retired block.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum LocalStore {
    /// As `heap::free_tiny` does: `Relaxed`.
    Relaxed,
    /// `Release`, which orders the object's last use before the store.
    Release,
}

/// A 16-byte tiny block with up to three objects (0 and 1 share the block's first word, where a
/// free block keeps its link), its header words, and the span-level state the protocol uses.
struct Block {
    /// `tiny_word`: carved (low byte) and remote-free (high byte) counts.
    word: AtomicU16,
    /// `tiny_local`: the owner's free count.
    local: AtomicU8,
    objs: [UnsafeCell<u8>; 3],
    /// The block's dirty bit (`TINY_DIRTY`).
    dirty: AtomicBool,
    /// The span's token is on its way (`TINY_TOKEN_SENT`).
    sent: AtomicU8,
    /// The token is on the span's remote list.
    token_queued: AtomicBool,
    /// The claimed block is on the span's remote list.
    block_queued: AtomicBool,
    /// Ghost: claims of the block.
    claims: GhostUsize,
    store: LocalStore,
}

impl Block {
    fn new(carved: u8, store: LocalStore) -> Block {
        let b = Block {
            word: AtomicU16::new(0),
            local: AtomicU8::new(0),
            objs: [UnsafeCell::new(0), UnsafeCell::new(0), UnsafeCell::new(0)],
            dirty: AtomicBool::new(false),
            sent: AtomicU8::new(0),
            token_queued: AtomicBool::new(false),
            block_queued: AtomicBool::new(false),
            claims: GhostUsize::new(0),
            store,
        };
        proto::start(&b.word, &b.local, carved);
        b
    }

    /// The last use of object `i` before its free.
    fn touch(&self, i: usize) {
        self.objs[i].with_mut(|p| {
            // SAFETY: object `i` belongs to the caller until it frees it (checked by loom).
            unsafe { *p = (*p).wrapping_add(1) }
        });
    }

    /// The owner frees the dead block it claimed, or reuses a block handed back: it writes
    /// every byte.
    fn owner_reuse(&self) {
        for o in &self.objs {
            o.with_mut(|p| {
                // SAFETY: the block is dead (checked by loom).
                unsafe { *p = 0xAA }
            });
        }
    }

    fn claimed(&self) {
        self.claims.fetch_add(1, SeqCst);
    }

    // ---- the owner ----

    /// `retire_tiny`: the owner stops carving after `carved` objects, `freed` of which it freed
    /// itself while the block was current.
    fn retire(&self, carved: u8, freed: u8) {
        if freed == carved {
            self.claimed();
            self.owner_reuse();
            return;
        }
        self.local.store(freed, Ordering::Relaxed);
        if proto::retire(&self.word, freed, carved) {
            self.claimed();
            self.owner_reuse();
        }
    }

    /// `free_tiny` by the owner of object `i` of a retired block.
    fn owner_free(&self, i: usize) {
        self.touch(i);
        let n = self.local.load(Ordering::Relaxed).wrapping_add(1);
        let order = match self.store {
            LocalStore::Relaxed => Ordering::Relaxed,
            LocalStore::Release => Ordering::Release,
        };
        self.local.store(n, order);
        if proto::owner_free(&self.word, n) {
            self.claimed();
            self.owner_reuse();
        }
    }

    /// The owner's slow path: takes the span's remote list (`collect_remote_tiny`): the token
    /// (`take_token`: re-check the dirty block) and a block handed back.
    fn owner_collect(&self) {
        if self.token_queued.swap(false, Ordering::Acquire) {
            // heap.rs stores 0; a swap here because loom can misorder a plain store against a
            // concurrent read-modify-write of the same atomic (tokio-rs/loom#254).
            self.sent.swap(0, Ordering::Release);
            if self.dirty.swap(false, Ordering::Acquire) {
                let local = self.local.load(Ordering::Relaxed);
                if proto::owner_free(&self.word, local) {
                    self.claimed();
                    self.owner_reuse();
                }
            }
        }
        if self.block_queued.swap(false, Ordering::Acquire) {
            self.owner_reuse();
        }
    }

    // ---- other threads ----

    /// `free_tiny_remote` of object `i`.
    fn remote_free(&self, i: usize) {
        self.touch(i);
        match proto::remote_free(&self.word, &self.local) {
            Some(true) => {
                self.claimed();
                // `free_small` from a thread that does not own the span: `free_remote` writes
                // the block's link word and pushes it on the span's remote list.
                for o in &self.objs[..2] {
                    o.with_mut(|p| {
                        // SAFETY: the block is dead and claimed by us (checked by loom).
                        unsafe { *p = 0x55 }
                    });
                }
                // The remote list's push is a compare-and-swap: a read-modify-write here too.
                self.block_queued.swap(true, Ordering::Release);
            }
            Some(false) => {}
            None => {
                self.dirty.fetch_or(true, Ordering::Release);
                if self.sent.swap(1, Ordering::AcqRel) == 0 {
                    self.token_queued.swap(true, Ordering::Release);
                }
            }
        }
    }

    /// After everything joined: the owner's last look, then the books.
    fn finish(&self) {
        self.owner_collect();
        assert_eq!(
            self.claims.load(SeqCst),
            1,
            "the block must be claimed exactly once"
        );
        assert!(!self.dirty.load(Ordering::Relaxed) || self.word.load(Ordering::Relaxed) == DEAD);
    }
}

/// The owner retires a block it carved `carved` objects from (after freeing the objects of
/// `owner_current` itself while it was current), then frees the objects of `owner_retired`,
/// while each inner slice of `remote` is a thread freeing those objects; the owner looks at its
/// remote list once meanwhile and once after everything joined.
fn race(
    store: LocalStore,
    carved: u8,
    owner_current: &'static [usize],
    owner_retired: &'static [usize],
    remote: &'static [&'static [usize]],
) {
    loom::model(move || {
        let b = Arc::new(Block::new(0, store));
        for &i in owner_current {
            b.touch(i);
        }
        let threads: Vec<_> = remote
            .iter()
            .map(|objs| {
                let b = b.clone();
                loom::thread::spawn(move || {
                    for &i in objs.iter() {
                        b.remote_free(i);
                    }
                })
            })
            .collect();
        b.retire(carved, owner_current.len() as u8);
        for &i in owner_retired {
            b.owner_free(i);
        }
        b.owner_collect();
        for t in threads {
            t.join().unwrap();
        }
        b.finish();
    });
}

/// Two objects, each freed by its own thread, while the owner retires the block.
#[test]
fn two_objects_two_freers_vs_retire() {
    race(LocalStore::Release, 2, &[], &[], &[&[0], &[1]]);
}

/// Three objects: one freed by the owner while current, two by two other threads, racing the
/// retirement.
#[test]
fn three_objects_owner_frees_current_one_vs_two_freers() {
    race(LocalStore::Release, 3, &[0], &[], &[&[1], &[2]]);
}

/// Three objects: one thread frees two of them while the owner retires the block and then frees
/// the third itself. The owner's local-count store is `Release` (as in heap.rs): a remote free
/// that reads it and claims the block is ordered after the owner's last use of its object (with
/// a `Relaxed` store loom reports a data race here, the bug this model found). Exactly one claim.
#[test]
fn owner_frees_retired_object_vs_remote_claim_release() {
    race(LocalStore::Release, 3, &[], &[0], &[&[1, 2]]);
}

/// Two objects, the owner frees one after retiring, another thread the other.
#[test]
fn owner_and_remote_free_after_retire_release() {
    race(LocalStore::Release, 2, &[], &[1], &[&[0]]);
}

/// Every object is freed by other threads before the owner retires the block: no free claims
/// it (a current block never dies), the retirement does.
#[test]
fn all_freed_remotely_before_retire() {
    loom::model(|| {
        let b = Arc::new(Block::new(0, LocalStore::Release));
        let b1 = b.clone();
        let t1 = loom::thread::spawn(move || {
            b1.remote_free(0);
            b1.remote_free(2);
        });
        let b2 = b.clone();
        let t2 = loom::thread::spawn(move || b2.remote_free(1));
        t1.join().unwrap();
        t2.join().unwrap();
        assert_eq!(b.claims.load(SeqCst), 0, "a free claimed a current block");
        b.retire(3, 0);
        assert_eq!(
            b.claims.load(SeqCst),
            1,
            "the retirement must claim the dead block"
        );
        assert_eq!(b.word.load(Ordering::Relaxed), DEAD);
    });
}

/// The owner freed every object itself while the block was current: the retirement frees it
/// without touching its word.
#[test]
fn all_freed_by_owner_before_retire() {
    loom::model(|| {
        let b = Block::new(0, LocalStore::Release);
        b.touch(0);
        b.touch(1);
        b.retire(2, 2);
        b.finish();
    });
}

/// A block that never was current holds one object: its free by another thread claims it.
#[test]
fn lone_block_freed_remotely() {
    loom::model(|| {
        let b = Arc::new(Block::new(1, LocalStore::Relaxed));
        b.touch(0);
        let b1 = b.clone();
        let t = loom::thread::spawn(move || b1.remote_free(0));
        b.owner_collect();
        t.join().unwrap();
        b.finish();
        assert_eq!(b.word.load(Ordering::Relaxed), DEAD);
    });
}

/// A lone block freed by its owner.
#[test]
fn lone_block_freed_by_owner() {
    loom::model(|| {
        let b = Block::new(1, LocalStore::Relaxed);
        b.owner_free(0);
        b.finish();
    });
}
