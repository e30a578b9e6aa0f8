//! Thread churn across threads: short-lived threads allocate mixed objects (tiny, small, medium
//! and large), hand them to long-lived threads and exit; the long-lived threads free half of
//! each hand-off at once (racing with the producer's exit) and the other half only after the
//! producers have exited, so those frees land in spans of exited threads (abandoned to the
//! central pools, or already adopted by a new thread). 20,000 short threads by default;
//! `SPECALLOC_STRESS_SCALE=10` runs 200,000. Every object's contents are checked before it is
//! freed, and at the end `stats()` shows every object and heap back at the baseline.

mod common;

use std::alloc::Layout;
use std::sync::mpsc;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// Sizes the short threads allocate: tiny, the 8- and 16-byte classes, small classes, a
/// medium (page-run) object and a huge one (its own mapping), with some over-alignment.
const SHAPES: [(usize, usize); 16] = [
    (1, 1),
    (2, 2),
    (3, 1),
    (4, 4),
    (5, 1),
    (8, 8),
    (12, 4),
    (15, 1),
    (16, 16),
    (24, 8),
    (48, 16),
    (100, 4),
    (777, 8),
    (4096, 64),
    (40_000, 8),
    (1_200_000, 8),
];

/// A raw object that may cross threads.
struct Obj {
    p: *mut u8,
    size: usize,
    align: usize,
}
// SAFETY: the object is owned by whoever holds the `Obj`; the allocator allows frees from any
// thread.
unsafe impl Send for Obj {}

fn fill_byte(p: usize, size: usize) -> u8 {
    ((p >> 3) ^ size ^ 0xA5) as u8
}

impl Obj {
    fn new(size: usize, align: usize) -> Obj {
        let l = Layout::from_size_align(size, align).unwrap();
        let p = specalloc::alloc(l);
        assert!(!p.is_null(), "allocation of {l:?} failed");
        assert_eq!(p as usize % align, 0);
        let n = size.min(64);
        // SAFETY: `p` holds `size` bytes; we write the first and last `n`.
        unsafe {
            p.write_bytes(fill_byte(p as usize, size), n);
            p.add(size - n).write_bytes(fill_byte(p as usize, size), n);
        }
        Obj { p, size, align }
    }

    fn check_and_free(self) {
        let n = self.size.min(64);
        let f = fill_byte(self.p as usize, self.size);
        // SAFETY: the object is live and holds `size` bytes.
        let (head, tail) = unsafe {
            (
                std::slice::from_raw_parts(self.p, n),
                std::slice::from_raw_parts(self.p.add(self.size - n), n),
            )
        };
        assert!(
            head.iter().chain(tail).all(|&b| b == f),
            "object of {} bytes at {:p} was overwritten",
            self.size,
            self.p
        );
        let l = Layout::from_size_align(self.size, self.align).unwrap();
        // SAFETY: allocated with this layout, freed once.
        unsafe { specalloc::dealloc(self.p, l) };
    }
}

enum Msg {
    Objects(Vec<Obj>),
    /// Free everything received so far (its producers have exited).
    Flush,
}

fn scale() -> usize {
    std::env::var("SPECALLOC_STRESS_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1)
        .max(1)
}

#[test]
fn short_threads_hand_objects_to_long_lived_ones() {
    const CONSUMERS: usize = 4;
    const BATCH: usize = 8;
    const PER_THREAD: usize = 60;
    let threads = 20_000 * scale();

    // Warm up the thread machinery, then take the baseline.
    std::thread::spawn(|| ()).join().unwrap();
    let base = common::quiet_stats(usize::MAX);

    let mut senders = Vec::new();
    let mut consumers = Vec::new();
    for _ in 0..CONSUMERS {
        let (tx, rx) = mpsc::channel::<Msg>();
        senders.push(tx);
        consumers.push(std::thread::spawn(move || {
            let mut pending: Vec<Obj> = Vec::new();
            let mut freed = 0usize;
            for m in rx {
                match m {
                    Msg::Objects(mut v) => {
                        // Half at once, racing with the producer's exit; half after it.
                        let later = v.split_off(v.len() / 2);
                        freed += v.len();
                        v.into_iter().for_each(Obj::check_and_free);
                        pending.extend(later);
                    }
                    Msg::Flush => {
                        freed += pending.len();
                        pending.drain(..).for_each(Obj::check_and_free);
                    }
                }
            }
            assert!(pending.is_empty());
            freed
        }));
    }

    let mut spawned = 0usize;
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    while spawned < threads {
        let batch: Vec<_> = (0..BATCH)
            .map(|k| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let s = seed;
                let tx = senders[(spawned + k) % CONSUMERS].clone();
                std::thread::spawn(move || {
                    let objs: Vec<Obj> = (0..PER_THREAD)
                        .map(|i| {
                            // Mostly tiny and small; a huge object now and then.
                            let r = (s >> (i % 48)) as usize ^ i;
                            let (size, align) = SHAPES[if i % 29 == 0 { r % 16 } else { r % 14 }];
                            Obj::new(size, align)
                        })
                        .collect();
                    tx.send(Msg::Objects(objs)).unwrap();
                })
            })
            .collect();
        for h in batch {
            h.join().unwrap();
        }
        spawned += BATCH;
        // The producers have exited: now the consumers free what they sent.
        for tx in &senders {
            tx.send(Msg::Flush).unwrap();
        }
    }
    drop(senders);
    let freed: usize = consumers.into_iter().map(|c| c.join().unwrap()).sum();
    assert_eq!(freed, spawned * PER_THREAD);

    // Joined threads may still be running their thread-local destructors (which free): wait
    // until their heaps are torn down.
    let end = common::quiet_stats(base.threads);
    println!(
        "{spawned} short threads, {} objects freed across threads; heaps made {}, live objects {} (baseline {})",
        freed, end.heaps, end.live_objects, base.live_objects
    );
    let moved: Vec<String> = (0..end.classes.len())
        .filter(|&c| end.classes[c].live_objects != base.classes[c].live_objects)
        .map(|c| {
            format!(
                "class {c} ({} B): {} -> {}",
                end.classes[c].size, base.classes[c].live_objects, end.classes[c].live_objects
            )
        })
        .collect();
    assert_eq!(
        end.live_objects, base.live_objects,
        "objects leaked: {moved:?}, large {} -> {}, tiny {} -> {}",
        base.large_objects, end.large_objects, base.tiny_objects, end.tiny_objects
    );
    assert_eq!(
        end.large_objects, base.large_objects,
        "large objects leaked"
    );
    assert_eq!(end.tiny_objects, base.tiny_objects, "tiny objects leaked");
    // Heaps are reused: at most one per thread alive at once (the batch, the consumers, this
    // thread and the test harness), never one per thread spawned.
    assert!(
        end.heaps <= base.heaps + BATCH + CONSUMERS + 4,
        "{} heaps made for {spawned} threads",
        end.heaps
    );
}
