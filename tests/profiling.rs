//! The heap profiler (feature `profiling`): known amounts allocated from known functions come
//! back in the profile within their sampling error, live and freed apart, from every thread;
//! the allocator's own frames are dropped; dumps never overwrite; and `go tool pprof` reads
//! the dump (where `go` is installed; skipped with a line otherwise).
#![cfg(feature = "profiling")]
// Boxes on purpose: one allocation per element, from a known function.
#![allow(clippy::vec_box)]

use specalloc::profile::{self, Profile, ProfileSample};
use std::hint::black_box;
use std::sync::Mutex;

mod common;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// The profiler is process-wide: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

/// Keeps 8,000 blocks of 1,000 B live (8 MB) and returns them.
#[inline(never)]
fn keep_kilobytes() -> Vec<Box<[u8; 1000]>> {
    (0..8000)
        .map(|_| black_box(Box::new([7u8; 1000])))
        .collect()
}

/// Allocates 40,000 blocks of 48 B and keeps them (1.92 MB).
#[inline(never)]
fn keep_small() -> Vec<Box<[u64; 6]>> {
    (0..40_000)
        .map(|i| black_box(Box::new([i as u64; 6])))
        .collect()
}

/// Allocates and frees 20,000 blocks of 4,096 B (81.92 MB allocated, none live).
#[inline(never)]
fn churn_pages() {
    for _ in 0..20_000 {
        black_box(vec![1u8; 4096]);
    }
}

/// Whether any frame of `s` is in a function whose name contains `name`.
fn has(s: &ProfileSample, name: &str) -> bool {
    s.frames
        .iter()
        .any(|f| f.function.as_deref().is_some_and(|n| n.contains(name)))
}

/// The sum of `f` over the samples with a frame in `name`.
fn total(p: &Profile, name: &str, f: fn(&ProfileSample) -> u64) -> f64 {
    p.samples
        .iter()
        .filter(|s| has(s, name))
        .map(f)
        .sum::<u64>() as f64
}

/// `got` within `tol` (relative) of `want`.
fn near(what: &str, got: f64, want: f64, tol: f64) {
    assert!(
        (got - want).abs() <= want * tol,
        "{what}: estimated {got:.0}, allocated {want:.0} (tolerance {:.0} %)",
        tol * 100.0
    );
}

#[test]
fn estimates_match_what_was_allocated() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // 16 KiB: about 500 samples of the 8 MB kept, 5,000 of the 82 MB churned; a relative
    // standard error of 4.5 % and 1.4 %, well inside the tolerances below (over 4 errors).
    profile::start(16 << 10);
    let big = keep_kilobytes();
    let small = keep_small();
    churn_pages();
    let p = profile::profile();
    profile::stop();
    assert_eq!(p.rate, 16 << 10);
    near(
        "live bytes of keep_kilobytes",
        total(&p, "keep_kilobytes", |s| s.inuse_bytes),
        8e6,
        0.2,
    );
    near(
        "objects of keep_kilobytes",
        total(&p, "keep_kilobytes", |s| s.alloc_objects),
        8000.0,
        0.2,
    );
    near(
        "live bytes of keep_small",
        total(&p, "keep_small", |s| s.inuse_bytes),
        1.92e6,
        0.25,
    );
    near(
        "bytes of churn_pages",
        total(&p, "churn_pages", |s| s.alloc_bytes),
        81.92e6,
        0.1,
    );
    assert!(
        total(&p, "churn_pages", |s| s.inuse_bytes) < 81.92e6 * 0.01,
        "churn_pages freed everything it allocated"
    );
    // The allocator's own frames are gone: no stack starts inside it.
    for s in &p.samples {
        if let Some(f) = s.frames.first().and_then(|f| f.function.as_deref()) {
            assert!(
                !f.contains("specalloc_runtime") && !f.starts_with("__rust_alloc"),
                "a stack starts in the allocator: {f}"
            );
        }
    }
    // The blocks the profile sampled are whole and freed as usual.
    assert!(big.iter().all(|b| b.iter().all(|&x| x == 7)));
    assert!(small.iter().enumerate().all(|(i, b)| b[5] == i as u64));
    drop(big);
    drop(small);
    let after = profile::profile();
    assert!(
        total(&after, "keep_kilobytes", |s| s.inuse_bytes) == 0.0,
        "freed blocks are no longer live"
    );
    assert!(specalloc::stats().profiler_bytes > 0);
}

/// Allocates 4 MB in blocks of 2,000 B on a thread of its own, and keeps them.
#[inline(never)]
fn keep_on_a_thread() -> Vec<Vec<u8>> {
    (0..2000).map(|_| vec![3u8; 2000]).collect()
}

#[test]
fn other_threads_are_sampled_and_their_frees_counted() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    profile::start(16 << 10);
    let kept = std::thread::spawn(keep_on_a_thread).join().unwrap();
    let p = profile::profile();
    near(
        "live bytes of keep_on_a_thread",
        total(&p, "keep_on_a_thread", |s| s.inuse_bytes),
        4e6,
        0.3,
    );
    // Freed here, on another thread than the one that allocated.
    drop(kept);
    let p = profile::profile();
    profile::stop();
    assert_eq!(total(&p, "keep_on_a_thread", |s| s.inuse_bytes), 0.0);
}

/// A thread's first blocks: 6 of 2,000 B, kept. While many threads have a heap, a new thread
/// makes its first allocations from the shared heap.
#[inline(never)]
fn first_blocks_of_a_thread() -> Vec<Box<[u8; 2000]>> {
    let mut v = Vec::with_capacity(6);
    for _ in 0..6 {
        v.push(black_box(Box::new([5u8; 2000])));
    }
    v
}

#[test]
fn a_threads_first_blocks_from_the_shared_heap_are_sampled() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let idle = common::Idle::start();
    profile::start(16 << 10);
    // 600 threads, 4 at a time, keep 6 blocks of 2,000 B each: 7.2 MB, about 440 samples.
    let mut kept = Vec::new();
    for _ in 0..150 {
        let batch: Vec<_> = (0..4)
            .map(|_| std::thread::spawn(first_blocks_of_a_thread))
            .collect();
        kept.extend(batch.into_iter().map(|t| t.join().expect("thread")));
    }
    let p = profile::profile();
    profile::stop();
    idle.finish();
    near(
        "live bytes of first_blocks_of_a_thread",
        total(&p, "first_blocks_of_a_thread", |s| s.inuse_bytes),
        7.2e6,
        0.3,
    );
    assert!(kept.iter().flatten().all(|b| b[1999] == 5));
}

#[test]
fn large_objects_are_sampled() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    profile::start(64 << 10);
    // 200 objects of 300 KiB and 20 of 2 MiB: each is sampled with probability near 1.
    let medium: Vec<Vec<u8>> = (0..200).map(|_| vec![1u8; 300 << 10]).collect();
    let huge: Vec<Vec<u8>> = (0..20).map(|_| vec![1u8; 2 << 20]).collect();
    let p = profile::profile();
    profile::stop();
    let live: f64 = p.samples.iter().map(|s| s.inuse_bytes as f64).sum();
    near(
        "live large bytes",
        live,
        (200.0 * 300.0 * 1024.0) + 20.0 * 2097152.0,
        0.1,
    );
    drop((medium, huge));
}

#[test]
fn dumps_never_overwrite() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    profile::start(profile::DEFAULT_RATE);
    let kept = keep_kilobytes();
    let dir = std::env::temp_dir().join(format!("specalloc-prof-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("heap.pb.gz");
    let _ = std::fs::remove_file(&path);
    profile::dump(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(&bytes[..2], &[0x1f, 0x8b], "gzip");
    let e = profile::dump(&path).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(
        std::fs::read(&path).unwrap(),
        bytes,
        "the first dump is untouched"
    );
    profile::stop();
    drop(kept);
    if let Some(go) = go() {
        let o = std::process::Command::new(go)
            .args(["tool", "pprof", "-top", "-sample_index=inuse_space"])
            .arg(&path)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        println!("{out}");
        assert!(
            out.contains("keep_kilobytes"),
            "pprof -top names the function:\n{out}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Keeps 40,000 nodes of 32 B through a site `#[specialize]` rewrites (a routine of the
/// allocator's own, dropped from the stacks like the rest of it).
#[specalloc::specialize]
#[inline(never)]
fn make_nodes() -> Vec<Box<[u64; 4]>> {
    let mut v = Vec::with_capacity(40_000);
    for i in 0..40_000u64 {
        v.push(Box::new([i; 4])); // the site
    }
    v
}

#[test]
fn a_specialised_site_is_named_at_its_line() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    profile::start(8 << 10);
    let nodes = make_nodes();
    let p = profile::profile();
    profile::stop();
    let site_line = include_str!("profiling.rs")
        .lines()
        .position(|l| l.ends_with("// the site"))
        .unwrap() as u32
        + 1;
    // The boxes' samples: stacks through make_nodes that do not come from the vector's buffer.
    let boxes: Vec<&ProfileSample> = p
        .samples
        .iter()
        .filter(|s| has(s, "make_nodes") && !has(s, "raw_vec"))
        .collect();
    let live: f64 = boxes.iter().map(|s| s.inuse_bytes as f64).sum();
    near(
        "live bytes of make_nodes' boxes",
        live,
        40_000.0 * 32.0,
        0.25,
    );
    for s in &boxes {
        let first = &s.frames[0];
        let name = first.function.as_deref().unwrap_or("");
        assert!(
            !name.contains("specalloc"),
            "the rewritten site's stack starts in the allocator: {:?}",
            s.frames
        );
        // The innermost frame in this file is the site's line.
        let here = s
            .frames
            .iter()
            .find(|f| {
                f.file
                    .as_deref()
                    .is_some_and(|f| f.ends_with("profiling.rs"))
            })
            .expect("a frame in this file");
        assert_eq!(here.line, Some(site_line), "{:?}", s.frames);
    }
    assert!(nodes.iter().enumerate().all(|(i, b)| b[3] == i as u64));
}

/// Grows one vector to 64 MiB by pushing (its buffer grows in place or moves, as `realloc`
/// does), and keeps it.
#[inline(never)]
fn grow_a_vector() -> Vec<u8> {
    let mut v = Vec::new();
    for i in 0..(64usize << 20) {
        v.push(i as u8);
    }
    v
}

#[test]
fn a_grown_buffer_is_counted_at_its_size() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    profile::start(profile::DEFAULT_RATE);
    let v = grow_a_vector();
    let p = profile::profile();
    profile::stop();
    near(
        "live bytes of grow_a_vector",
        total(&p, "grow_a_vector", |s| s.inuse_bytes),
        v.capacity() as f64,
        0.1,
    );
}

/// Allocates and frees blocks of 1,000 B until `stop` is set, counting them in `done`.
#[inline(never)]
fn steady_loop(stop: &std::sync::atomic::AtomicBool, done: &std::sync::atomic::AtomicU64) {
    use std::sync::atomic::Ordering::Relaxed;
    while !stop.load(Relaxed) {
        black_box(vec![5u8; 1000]);
        done.fetch_add(1, Relaxed);
    }
}

#[test]
fn a_thread_that_never_refills_is_sampled_after_start() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    use std::sync::Arc;
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let t = {
        let (stop, done) = (stop.clone(), done.clone());
        std::thread::spawn(move || steady_loop(&stop, &done))
    };
    // The loop runs on one block of its current span, before profiling starts and after.
    while done.load(Relaxed) < 100_000 {
        std::thread::yield_now();
    }
    profile::start(64 << 10);
    let at_start = done.load(Relaxed);
    // Within 65,536 allocations the thread sees the start; then 200,000 more.
    while done.load(Relaxed) < at_start + 300_000 {
        std::thread::yield_now();
    }
    let p = profile::profile();
    profile::stop();
    stop.store(true, Relaxed);
    t.join().unwrap();
    let bytes = total(&p, "steady_loop", |s| s.alloc_bytes);
    assert!(
        bytes > 150e6,
        "the running thread's allocations after the start: {bytes:.0} bytes estimated"
    );
}

/// Allocates in a thread-local's destructor, which runs as its thread exits.
struct AllocatesOnExit;

impl Drop for AllocatesOnExit {
    fn drop(&mut self) {
        let v: Vec<Vec<u8>> = (0..2000).map(|i| vec![i as u8; 700]).collect();
        assert!(v.iter().enumerate().all(|(i, b)| b[699] == i as u8));
    }
}

std::thread_local! {
    static ON_EXIT: AllocatesOnExit = const { AllocatesOnExit };
}

#[test]
fn thread_exit_destructors_allocate_while_sampled() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A sample every 1 KiB: the destructors' allocations (some after the thread's heap is torn
    // down, from the shared fallback heap) are sampled or skipped, never a crash.
    profile::start(1 << 10);
    for _ in 0..20 {
        std::thread::spawn(|| ON_EXIT.with(|_| ())).join().unwrap();
    }
    let p = profile::profile();
    profile::stop();
    assert!(p.samples.iter().any(|s| has(s, "AllocatesOnExit")));
}

/// `SPECALLOC_STRESS_SCALE` (1 by default): multiplies the stress test's rounds.
fn scale() -> usize {
    std::env::var("SPECALLOC_STRESS_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1)
}

/// Fills a block of `n` bytes with a pattern of `seed`.
fn fill(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| seed.wrapping_add(i as u8)).collect()
}

#[test]
fn stress_with_thread_churn_at_a_high_rate() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // A sample every 2 KiB on average: thousands of sampled blocks, small and large, made and
    // freed by threads that come and go, half of them freed by another thread.
    profile::start(2 << 10);
    for round in 0..20 * scale() {
        let (tx, rx) = std::sync::mpsc::channel::<Vec<Vec<u8>>>();
        let makers: Vec<_> = (0..4)
            .map(|t| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    let mut theirs = Vec::new();
                    for i in 0..2000 {
                        let n = [1, 8, 48, 300, 4000, 40_000][(i + t) % 6];
                        let v = fill(n, (i + t + round) as u8);
                        if i % 2 == 0 {
                            mine.push(v)
                        } else {
                            theirs.push(v)
                        }
                    }
                    tx.send(theirs).unwrap();
                    for (k, v) in mine.iter().enumerate() {
                        let i = 2 * k;
                        assert_eq!(v, &fill(v.len(), (i + t + round) as u8));
                    }
                })
            })
            .collect();
        drop(tx);
        let freer = std::thread::spawn(move || {
            let mut n = 0;
            for batch in rx {
                n += batch.len();
            }
            n
        });
        for m in makers {
            m.join().unwrap();
        }
        assert_eq!(freer.join().unwrap(), 4 * 1000);
    }
    let p = profile::profile();
    profile::stop();
    let allocated: u64 = p.samples.iter().map(|s| s.alloc_objects).sum();
    assert!(allocated > 100_000, "{allocated} allocations estimated");
    let live: u64 = p
        .samples
        .iter()
        .filter(|s| has(s, "stress_with_thread_churn"))
        .map(|s| s.inuse_bytes)
        .sum();
    assert_eq!(live, 0, "everything the threads allocated was freed");
}

/// The `go` binary, or `None` (with a line saying the check is skipped).
fn go() -> Option<&'static str> {
    let ok = std::process::Command::new("go")
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("skipped: `go` is not installed (apt-get install golang-go), so pprof's reading of the dump is not checked");
    }
    ok.then_some("go")
}
