//! An idle thread pool gives its memory back without being called: threads allocate blocks of
//! 64 B to 4 KiB, free them all (half their own, half another thread's), and block; the
//! program calls nothing of the allocator. The default background trimmer (started by the
//! second thread) gives back what the blocked threads' heaps held but did not use, and the
//! page-return clock returns the freed pages to the OS: what stays is at most one span per class
//! each thread allocated from.

use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use specalloc_runtime::size_class::{class_of, span_bytes};
use specalloc_runtime::stats;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

const THREADS: usize = 8;
const PER_THREAD: usize = 2 << 20;
const MIB: usize = 1 << 20;

/// A block size from 64 to 4,096 bytes, from a small generator (the same run every time).
fn size_at(seed: &mut u64) -> usize {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    64 + (*seed % (4096 - 64 + 1) as u64) as usize
}

/// The most that the spans `threads` threads allocate from can hold: one span per class of 64 B
/// to 4 KiB, per thread.
fn current_spans_bound(threads: usize) -> usize {
    let mut classes = std::collections::BTreeSet::new();
    for size in 64..=4096 {
        classes.insert(class_of(size, 1));
    }
    classes.iter().map(|&c| span_bytes(c)).sum::<usize>() * threads
}

#[test]
fn an_idle_pool_gives_its_memory_back_without_being_called() {
    if std::env::var_os("SPECALLOC_BACKGROUND_PURGE_MS").is_some() {
        eprintln!("skipped: SPECALLOC_BACKGROUND_PURGE_MS is set (the default is tested)");
        return;
    }
    let ready = Arc::new(Barrier::new(THREADS + 1));
    let freed = Arc::new(Barrier::new(THREADS + 1));
    let (wake_tx, wake_rx) = mpsc::channel::<()>();
    let wake_rx = Arc::new(std::sync::Mutex::new(wake_rx));
    // Each thread hands the second half of its blocks to the next thread through these.
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for _ in 0..THREADS {
        let (tx, rx) = mpsc::channel::<Vec<Box<[u8]>>>();
        senders.push(tx);
        receivers.push(rx);
    }
    receivers.rotate_left(1);
    let mut workers = Vec::new();
    for (t, (tx, rx)) in senders.into_iter().zip(receivers).enumerate() {
        let (ready, freed, wake_rx) = (ready.clone(), freed.clone(), wake_rx.clone());
        workers.push(std::thread::spawn(move || {
            let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ t as u64;
            let mut mine = Vec::new();
            let mut bytes = 0;
            while bytes < PER_THREAD {
                let n = size_at(&mut seed);
                mine.push(vec![t as u8; n].into_boxed_slice());
                bytes += n;
            }
            let theirs = mine.split_off(mine.len() / 2);
            tx.send(theirs).unwrap();
            let other = rx.recv().unwrap();
            ready.wait();
            drop(mine);
            drop(other);
            freed.wait();
            // Idle: blocked until the main thread has measured.
            let _ = wake_rx.lock().unwrap().recv();
        }));
    }
    ready.wait();
    let peak = stats().pages_in_use;
    freed.wait();
    // The workers', and those of this thread and the test harness's main thread.
    let bound = current_spans_bound(stats().threads);
    // The trimmer wakes every 100 ms at most; pages go back after the decommit delay (1 s).
    let start = Instant::now();
    let mut s = stats();
    while start.elapsed() < Duration::from_secs(6) {
        std::thread::sleep(Duration::from_millis(100));
        s = stats();
        if s.pages_in_use <= bound + MIB && s.free_resident <= 8 * MIB {
            break;
        }
    }
    if std::env::var_os("IDLE_POOL_DEBUG").is_some() {
        eprintln!("{s:#?}");
    }
    drop(wake_tx);
    for w in workers {
        w.join().unwrap();
    }
    assert!(
        peak >= THREADS * PER_THREAD,
        "the threads held {peak} bytes of pages at their peak"
    );
    assert!(
        s.pages_in_use <= bound + MIB,
        "pages in use {} after the pool went idle (peak {peak}, current spans at most {bound})",
        s.pages_in_use
    );
    assert!(
        s.free_resident <= 8 * MIB,
        "{} bytes of free pages still resident after the pool went idle",
        s.free_resident
    );
}
