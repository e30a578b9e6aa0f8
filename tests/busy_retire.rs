//! A busy thread lets go of the size classes it stopped using: it allocates and frees one block
//! in each of many classes, then allocates in one class only. The spans it allocated from in the
//! other classes hold no live block, but stay its current spans (pinned) until its next refill
//! after a wake of the background trimmer sees that the class had no allocation since the wake
//! before: then they go back to the page heap. Without it, what a thread holds grows with the
//! number of classes it ever touched.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use specalloc_runtime::size_class::{class_of, span_bytes};
use specalloc_runtime::stats;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// Sizes of distinct classes from 64 B to 8 KiB, none of them the busy class (48 B).
fn touched_sizes() -> Vec<usize> {
    let mut seen = std::collections::BTreeSet::new();
    let mut sizes = Vec::new();
    for size in (64..=8192).step_by(64) {
        if seen.insert(class_of(size, 1)) {
            sizes.push(size);
        }
    }
    sizes
}

#[test]
fn a_busy_thread_lets_go_of_the_classes_it_stopped_using() {
    if std::env::var_os("SPECALLOC_BACKGROUND_PURGE_MS").is_some() {
        eprintln!("skipped: SPECALLOC_BACKGROUND_PURGE_MS is set (the default is tested)");
        return;
    }
    // A second thread with a heap starts the trimmer; it stays blocked to the end.
    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    let idle = std::thread::spawn(move || {
        let b = vec![1u8; 100];
        let _ = stop_rx.recv();
        drop(b);
    });
    let busy = std::thread::spawn(|| {
        let sizes = touched_sizes();
        let touched: usize = sizes.iter().map(|&s| span_bytes(class_of(s, 1))).sum();
        // One block in each class, written and freed: each class's current span now holds no
        // live block.
        for &size in &sizes {
            let v = std::hint::black_box(vec![7u8; size]);
            drop(v);
        }
        let before = stats().pages_in_use;
        // Busy in one class only: batches of 4,096 blocks of 48 B (three spans), freed, so that
        // the thread refills several times a batch.
        let start = Instant::now();
        let mut after = before;
        while start.elapsed() < Duration::from_secs(5) {
            let batch: Vec<Box<[u8; 48]>> = (0..4096).map(|i| Box::new([i as u8; 48])).collect();
            drop(std::hint::black_box(batch));
            after = stats().pages_in_use;
            if after + touched / 2 <= before {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        (before, after, touched, sizes.len())
    });
    let (before, after, touched, classes) = busy.join().unwrap();
    drop(stop_tx);
    idle.join().unwrap();
    assert!(
        after + touched / 2 <= before,
        "pages in use went from {before} to {after} bytes; the {classes} classes the thread \
         stopped using held spans of {touched} bytes"
    );
}
