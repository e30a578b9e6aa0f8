//! Multi-threaded stress of specalloc as the global allocator, with exact accounting.
//!
//! One `#[test]` only, so nothing else in this binary allocates while it measures: statistics
//! are per-thread counters merged on read, exact once every other thread is quiet.
//!
//! Phases:
//! 1. exact statistics of a single thread (small, medium and huge objects, in-place resizes);
//! 2. churn: overlapping generations of workers allocate random sizes (small, medium, rarely
//!    huge, some over-aligned), check and free blocks, resize them, swap them with each other
//!    through shared transfer slots (remote frees), and hand what they still hold on exit to the
//!    next generation (frees into spans of exited threads);
//! 3. producer/consumer pairs over `mpsc` channels (one thread allocates, another frees: spans
//!    parked full and woken by remote frees), with the consumers' leftovers freed after both
//!    threads exited, by a thread that never allocates;
//! 4. everything is freed and joined: live objects, bytes in use, large objects and threads are
//!    back exactly at the baseline, and remote frees happened.
//!
//! `SPECALLOC_STRESS_SCALE=N` multiplies the amount of work (generations and batches).
#![deny(unsafe_op_in_unsafe_fn)]

mod common;

use common::Rng;
use std::alloc::Layout;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

use specalloc::size_class::{class_objects, class_of, class_size, MAX_SMALL_SIZE, NUM_CLASSES};
use specalloc::{stats, Stats};

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// Workers alive at once.
const THREADS: usize = 4;
/// Worker generations at scale 1 (each generation is `THREADS` workers).
const GENERATIONS: usize = 16;
/// Operations per worker, on average.
const OPS: usize = 20_000;
/// Blocks a worker holds at most.
const WORKING_SET: usize = 160;
/// Shared transfer slots.
const SLOTS: usize = 256;
/// Blocks up to this size carry their pattern throughout; larger ones in 8-byte windows (at the
/// start, at every 4 KiB, at the end).
const DENSE: usize = 1024;

/// A random layout: mostly small (skewed towards tiny), some medium, rarely huge; mostly
/// naturally aligned, sometimes over-aligned (up to 64 KiB, which is never a size class).
fn random_layout(rng: &mut Rng) -> Layout {
    let r = rng.below(1000);
    // (Large objects are few: touching their pages is most of the test's system time.)
    let size = if r < 988 {
        let bits = 3 + rng.below(13);
        1 + rng.below(1 << bits)
    } else if r < 999 {
        MAX_SMALL_SIZE + 1 + rng.below(MIB - MAX_SMALL_SIZE)
    } else {
        MIB + 1 + rng.below(2 * MIB)
    };
    let align = if rng.below(10) == 0 {
        [
            1, 2, 4, 16, 32, 64, 128, 256, 1024, 4096, 8192, 16384, 65536,
        ][rng.below(13)]
    } else {
        8
    };
    Layout::from_size_align(size, align).unwrap()
}

/// The pattern byte at offset `i` of a block with `cookie`.
fn pat(cookie: u64, i: usize) -> u8 {
    ((cookie >> ((i & 7) * 8)) as u8) ^ ((i >> 3) as u8) ^ ((i >> 11) as u8)
}

/// Calls `f(lo, hi)` for each byte range of a `size`-byte block that carries the pattern.
fn for_each_window(size: usize, mut f: impl FnMut(usize, usize)) {
    if size <= DENSE {
        f(0, size);
        return;
    }
    f(0, 8);
    let mut off = 4096;
    while off + 8 <= size {
        f(off, off + 8);
        off += 4096;
    }
    f(size - 8, size);
}

/// Blocks allocated by this test and not yet freed (to tell a leak in the test from an error in
/// the allocator's books).
static LIVE_BLOCKS: AtomicUsize = AtomicUsize::new(0);

/// A live allocation: the only handle to it anywhere.
struct Block {
    ptr: *mut u8,
    layout: Layout,
    cookie: u64,
}

// SAFETY: a `Block` is the sole owner of its allocation (no other pointer to it is kept), the
// bytes are plain data, and specalloc lets any thread free any block, so moving a `Block` to
// another thread moves the ownership with it.
unsafe impl Send for Block {}

impl Block {
    /// Allocates a block for `layout`, sometimes zeroed (and then checked to read zero), and
    /// writes its pattern.
    fn new(rng: &mut Rng, layout: Layout) -> Block {
        let zeroed = rng.below(8) == 0;
        let ptr = if zeroed {
            specalloc::alloc_zeroed(layout)
        } else {
            specalloc::alloc(layout)
        };
        assert!(!ptr.is_null(), "out of memory for {layout:?}");
        assert_eq!(ptr as usize % layout.align(), 0, "{layout:?} at {ptr:p}");
        let b = Block {
            ptr,
            layout,
            cookie: rng.next() | 1,
        };
        LIVE_BLOCKS.fetch_add(1, Ordering::Relaxed);
        if zeroed {
            b.check_zero();
        }
        b.write(0);
        b
    }

    /// Writes the pattern over the windows of the block that lie at or beyond `from`.
    fn write(&self, from: usize) {
        for_each_window(self.layout.size(), |lo, hi| {
            for i in lo.max(from)..hi {
                // SAFETY: `i < size`, and the block is live and ours.
                unsafe { self.ptr.add(i).write(pat(self.cookie, i)) };
            }
        });
    }

    /// Panics unless the windows of a `size`-byte block, clipped to `limit`, hold the pattern.
    fn check_as(&self, size: usize, limit: usize, what: &str) {
        for_each_window(size, |lo, hi| {
            for i in lo..hi.min(limit) {
                // SAFETY: `i < limit <= self.layout.size()`; the byte was written.
                let got = unsafe { self.ptr.add(i).read() };
                if got != pat(self.cookie, i) {
                    panic!(
                        "{what}: {:?} at {:p}: byte {i} is {got:#04x}, expected {:#04x}",
                        self.layout,
                        self.ptr,
                        pat(self.cookie, i)
                    );
                }
            }
        });
    }

    fn check(&self, what: &str) {
        self.check_as(self.layout.size(), self.layout.size(), what);
    }

    fn check_zero(&self) {
        for_each_window(self.layout.size(), |lo, hi| {
            for i in lo..hi {
                // SAFETY: `i < size`; a zeroed block is initialised.
                let got = unsafe { self.ptr.add(i).read() };
                assert_eq!(got, 0, "alloc_zeroed {:?}: byte {i}", self.layout);
            }
        });
    }

    /// Resizes the block, checking the preserved prefix.
    fn resize(&mut self, new_size: usize) {
        self.check("before realloc");
        let old = self.layout;
        // SAFETY: the block is live for `old`; `new_size` is at most 3 MiB, far below isize::MAX.
        let q = unsafe { specalloc::realloc(self.ptr, old, new_size) };
        assert!(!q.is_null(), "realloc {old:?} -> {new_size}");
        assert_eq!(
            q as usize % old.align(),
            0,
            "realloc {old:?} -> {new_size} at {q:p}"
        );
        self.ptr = q;
        self.layout = Layout::from_size_align(new_size, old.align()).unwrap();
        self.check_as(old.size(), old.size().min(new_size), "after realloc");
        self.write(0);
    }

    /// Checks the pattern and frees the block.
    fn free(self) {
        self.check("before free");
        // SAFETY: allocated for `self.layout`, and this was the only handle to it.
        unsafe { specalloc::dealloc(self.ptr, self.layout) };
        LIVE_BLOCKS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Transfer slots shared by all workers of all generations.
struct Shared {
    slots: Vec<Mutex<Option<Block>>>,
}

impl Shared {
    /// Puts `b` in a random slot; returns what was there.
    fn swap(&self, rng: &mut Rng, b: Block) -> Option<Block> {
        self.slots[rng.below(SLOTS)].lock().unwrap().replace(b)
    }

    fn take(&self, rng: &mut Rng) -> Option<Block> {
        self.slots[rng.below(SLOTS)].lock().unwrap().take()
    }
}

/// One worker: `ops` random operations starting from the blocks `inherited` from an earlier
/// generation. Returns part of what it still holds, for the next generation.
fn worker(shared: &Shared, seed: u64, ops: usize, inherited: Vec<Block>) -> Vec<Block> {
    let mut rng = Rng::new(seed);
    let mut mine = inherited;
    mine.reserve(WORKING_SET + 1);
    for _ in 0..ops {
        let r = rng.below(100);
        if r < 45 {
            let l = random_layout(&mut rng);
            mine.push(Block::new(&mut rng, l));
            if mine.len() > WORKING_SET {
                let i = rng.below(mine.len());
                mine.swap_remove(i).free();
            }
        } else if r < 70 {
            if !mine.is_empty() {
                let i = rng.below(mine.len());
                mine.swap_remove(i).free();
            }
        } else if r < 85 {
            // Swap one of ours for whatever another thread left in a slot.
            if !mine.is_empty() {
                let i = rng.below(mine.len());
                let b = mine.swap_remove(i);
                if let Some(other) = shared.swap(&mut rng, b) {
                    if rng.below(2) == 0 {
                        other.free();
                    } else {
                        other.check("taken from a slot");
                        mine.push(other);
                    }
                }
            }
        } else if r < 92 {
            if !mine.is_empty() {
                let i = rng.below(mine.len());
                let new_size = random_layout(&mut rng).size();
                mine[i].resize(new_size);
            }
        } else if let Some(other) = shared.take(&mut rng) {
            other.free();
        }
    }
    // On exit: free a third, leave a third in the slots, hand a third to the next generation.
    let mut handed = Vec::new();
    for b in mine {
        match rng.below(3) {
            0 => b.free(),
            1 => {
                if let Some(other) = shared.swap(&mut rng, b) {
                    other.free();
                }
            }
            _ => handed.push(b),
        }
    }
    handed
}

/// Phase 2: overlapping generations of workers; returns the work done (operations).
fn churn(scale: usize) -> usize {
    let shared = Arc::new(Shared {
        slots: (0..SLOTS).map(|_| Mutex::new(None)).collect(),
    });
    let mut rng = Rng::new(0x5EED);
    let mut running = VecDeque::new();
    let mut carry: Vec<Block> = Vec::new();
    let mut total_ops = 0;
    let workers = GENERATIONS * THREADS * scale;
    for w in 0..workers {
        if running.len() == THREADS {
            // The oldest worker ends while the others keep going; what it still held goes to
            // the next one started.
            let h: thread::JoinHandle<Vec<Block>> = running.pop_front().unwrap();
            carry.extend(h.join().expect("worker panicked"));
        }
        let ops = OPS / 2 + rng.below(OPS);
        total_ops += ops;
        let take = carry.len().min(WORKING_SET / 2);
        let inherited: Vec<Block> = carry.drain(..take).collect();
        let sh = Arc::clone(&shared);
        let seed = rng.next();
        let h = thread::Builder::new()
            .name(format!("worker-{w}"))
            .spawn(move || worker(&sh, seed, ops, inherited))
            .unwrap();
        running.push_back(h);
    }
    for h in running {
        carry.extend(h.join().expect("worker panicked"));
    }
    // The main thread frees what is left: blocks of exited threads, in spans now in the
    // central pools.
    for b in carry {
        b.free();
    }
    let shared = Arc::try_unwrap(shared)
        .ok()
        .expect("workers still hold the slots");
    for slot in shared.slots {
        if let Some(b) = slot.into_inner().unwrap() {
            b.free();
        }
    }
    total_ops
}

/// Phase 3: producer/consumer pairs. Returns the number of blocks sent.
fn producer_consumer(scale: usize) -> usize {
    const PAIRS: usize = 2;
    const BATCH: usize = 64;
    let batches = 500 * scale;
    let mut consumers = Vec::new();
    let mut producers = Vec::new();
    for pair in 0..PAIRS {
        let (tx, rx) = mpsc::sync_channel::<Vec<Block>>(4);
        producers.push(thread::spawn(move || {
            let mut rng = Rng::new(pair as u64 + 100);
            for _ in 0..batches {
                let batch: Vec<Block> = (0..BATCH)
                    .map(|_| {
                        let size = [8, 16, 48, 200, 1024, 3000, 20000][rng.below(7)];
                        let l = Layout::from_size_align(size, 8).unwrap();
                        Block::new(&mut rng, l)
                    })
                    .collect();
                tx.send(batch).unwrap();
            }
        }));
        consumers.push(thread::spawn(move || {
            let mut rng = Rng::new(pair as u64 + 200);
            let mut kept = Vec::new();
            for batch in rx {
                for b in batch {
                    if rng.below(16) == 0 {
                        kept.push(b);
                    } else {
                        b.free();
                    }
                }
            }
            kept
        }));
    }
    for p in producers {
        p.join().expect("producer panicked");
    }
    let mut kept = Vec::new();
    for c in consumers {
        kept.extend(c.join().expect("consumer panicked"));
    }
    // Both ends have exited. A thread that allocates nothing frees the leftovers: it may have
    // no heap of its own at all.
    thread::spawn(move || {
        for b in kept {
            b.free();
        }
    })
    .join()
    .expect("freeing thread panicked");
    PAIRS * batches * BATCH
}

/// Phase 1: exact figures for one thread's allocations (nothing else runs).
fn exact_single_thread() {
    const N: usize = 1000;
    let l = Layout::from_size_align(200, 8).unwrap();
    let c = class_of(200, 8);
    let size = class_size(c);
    let mut ptrs = Vec::with_capacity(N);
    let s0 = stats();
    for _ in 0..N {
        let p = specalloc::alloc(l);
        assert!(!p.is_null());
        ptrs.push(p);
    }
    let s1 = stats();
    assert_eq!(s1.classes[c].allocs - s0.classes[c].allocs, N as u64);
    assert_eq!(
        s1.classes[c].live_objects - s0.classes[c].live_objects,
        N as u64
    );
    assert_eq!(s1.allocs - s0.allocs, N as u64);
    assert_eq!(s1.live_objects - s0.live_objects, N as u64);
    assert_eq!(s1.bytes_in_use - s0.bytes_in_use, N * size);
    assert_eq!(s1.large_objects, s0.large_objects);
    assert!(s1.classes[c].spans * class_objects(c) >= s1.classes[c].live_objects as usize);
    assert!(s1.bytes_mapped >= s1.bytes_in_use);
    for p in ptrs.drain(..) {
        // SAFETY: allocated above for `l`.
        unsafe { specalloc::dealloc(p, l) };
    }
    let s2 = stats();
    assert_eq!(s2.classes[c].frees - s1.classes[c].frees, N as u64);
    assert_eq!(s2.live_objects, s0.live_objects);
    assert_eq!(s2.bytes_in_use, s0.bytes_in_use);

    // Medium objects count at their page-rounded size, huge ones at their mapping.
    let medium = Layout::from_size_align(100_000, 8).unwrap();
    let medium_bytes = 100_000usize.div_ceil(8192) * 8192;
    let huge = Layout::from_size_align(3 * MIB + 1, 8).unwrap();
    let m: [*mut u8; 3] = std::array::from_fn(|_| specalloc::alloc(medium));
    let h = specalloc::alloc(huge);
    assert!(m.iter().all(|p| !p.is_null()) && !h.is_null());
    let s3 = stats();
    assert_eq!(s3.large_objects - s2.large_objects, 4);
    assert_eq!(s3.live_objects - s2.live_objects, 4);
    assert_eq!(s3.allocs - s2.allocs, 4);
    let huge_bytes = s3.large_bytes - s2.large_bytes - 3 * medium_bytes;
    assert!(
        (huge.size()..=huge.size() + 2 * 4096).contains(&huge_bytes),
        "huge object counted as {huge_bytes} bytes"
    );
    assert_eq!(
        s3.bytes_in_use - s2.bytes_in_use,
        s3.large_bytes - s2.large_bytes
    );
    // SAFETY: `m[0]` and `h` are live for their layouts; the new sizes are small.
    let (m0, h2) = unsafe {
        (
            specalloc::realloc(m[0], medium, 100_100),
            specalloc::realloc(h, huge, 5 * MIB),
        )
    };
    assert_eq!(m0, m[0], "same page count, same place");
    assert!(!h2.is_null());
    let s4 = stats();
    assert_eq!(s4.large_objects, s3.large_objects);
    let grown = s4.large_bytes - s3.large_bytes;
    assert!(
        (2 * MIB - 4096..=2 * MIB + 4096).contains(&grown),
        "huge realloc 3 MiB -> 5 MiB changed large_bytes by {grown}"
    );
    // SAFETY: each pointer is live for the layout given, and freed once.
    unsafe {
        specalloc::dealloc(m0, Layout::from_size_align(100_100, 8).unwrap());
        specalloc::dealloc(m[1], medium);
        specalloc::dealloc(m[2], medium);
        specalloc::dealloc(h2, Layout::from_size_align(5 * MIB, 8).unwrap());
    }
    let s5 = stats();
    assert_eq!(s5.large_objects, s0.large_objects);
    assert_eq!(s5.large_bytes, s0.large_bytes);
    assert_eq!(s5.live_objects, s0.live_objects);
    assert_eq!(s5.bytes_in_use, s0.bytes_in_use);
    assert_eq!(s5.frees - s0.frees, N as u64 + 4);
}

fn live_per_class(s: &Stats) -> Vec<u64> {
    s.classes.iter().map(|c| c.live_objects).collect()
}

#[test]
fn stress_threads_and_accounting() {
    let scale: usize = std::env::var("SPECALLOC_STRESS_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n >= 1)
        .unwrap_or(1);

    // Warm-up: whatever std allocates once, lazily, for spawning threads, channels and locks
    // (and whatever the test harness has in flight) is allocated before the baseline.
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    thread::Builder::new()
        .name("warm-up".into())
        .spawn(move || tx.send(vec![1; 100]).unwrap())
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(rx.recv().unwrap(), vec![1; 100]);
    drop(rx);

    let base = common::quiet_stats(usize::MAX);
    assert_eq!(base.classes.len(), NUM_CLASSES);

    exact_single_thread();
    let ops = churn(scale);
    let sent = producer_consumer(scale);

    let end = common::quiet_stats(base.threads);
    // Everything allocated since the baseline has been freed, and every thread started since
    // has exited (its heap torn down, current tiny block included, before `join` returned): the
    // books balance exactly, no slack needed. Nothing else allocates meanwhile: std's lazily
    // made thread state was made by the warm-up, output capture stays empty (nothing is printed
    // before this point), and the harness's main thread only waits for this test (its
    // "running for over 60 seconds" note, in long scaled runs, allocates and frees at once).
    let leaked = LIVE_BLOCKS.load(Ordering::Relaxed);
    let report = format!("test blocks never freed: {leaked}\nbaseline:\n{base}\nend:\n{end}");
    assert_eq!(leaked, 0, "{report}");
    assert_eq!(end.live_objects, base.live_objects, "{report}");
    assert_eq!(end.bytes_in_use, base.bytes_in_use, "{report}");
    assert_eq!(end.large_objects, base.large_objects, "{report}");
    assert_eq!(end.large_bytes, base.large_bytes, "{report}");
    assert_eq!(live_per_class(&end), live_per_class(&base), "{report}");
    assert_eq!(end.threads, base.threads, "{report}");
    assert_eq!(end.allocs - base.allocs, end.frees - base.frees, "{report}");
    assert!(
        end.allocs - base.allocs >= (ops / 3 + sent) as u64,
        "{report}"
    );
    // Slot swaps, hand-overs between generations and the consumers all free remotely.
    assert!(
        end.remote_frees - base.remote_frees >= (sent / 2) as u64,
        "{report}"
    );
    assert!(end.bytes_mapped >= end.bytes_in_use);
    eprintln!("{report}");
    eprintln!(
        "stress: scale {scale}: {ops} random operations by {} churning threads, {sent} \
         producer/consumer messages; {} allocations and {} frees ({} remote) since the baseline, \
         nothing lost",
        GENERATIONS * THREADS * scale,
        end.allocs - base.allocs,
        end.frees - base.frees,
        end.remote_frees - base.remote_frees
    );
}
