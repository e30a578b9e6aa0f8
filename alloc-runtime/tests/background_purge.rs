//! The background purge: with it off (`SPECALLOC_BACKGROUND_PURGE_MS=0`), a program that frees
//! much memory and then allocates only from its thread's cache keeps the freed pages resident (the page heap reads its clock on its
//! own operations only); with the background purge on, set from code or by
//! `SPECALLOC_BACKGROUND_PURGE_MS`, the same pages go back to the OS on time, and the process's
//! resident set (`/proc/self/statm`) shrinks by them.
//!
//! The measuring test runs in a process of its own (this binary again, with one test
//! selected), so that no other test thread allocates while it measures.

mod common;

use std::hint::black_box;
use std::process::Command;
use std::time::{Duration, Instant};

use specalloc_runtime::{background_purge, set_background_purge, stats};

use common::rss;

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

const MIB: usize = 1 << 20;

/// Small allocations from the thread's cache for `dur` (no page-heap operation).
fn idle_small(dur: Duration) {
    let start = Instant::now();
    while start.elapsed() < dur {
        for i in 0..1000u64 {
            black_box(Box::new([i; 4]));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// 64 MiB of medium objects (page runs of 256 KiB), written and freed: free pages of the page
/// heap, resident. Returns (free resident bytes, RSS) right after.
fn free_64_mib() -> (usize, usize) {
    // Warm the thread's cache for the small allocations of `idle_small` first.
    idle_small(Duration::from_millis(10));
    let mut bufs: Vec<Vec<u8>> = (0..256).map(|_| vec![1u8; 256 << 10]).collect();
    black_box(&mut bufs);
    drop(bufs);
    (stats().free_resident, rss())
}

/// Waits up to `limit` for the free resident pages to drop under 8 MiB; returns how long it
/// took, `None` if they did not.
fn wait_returned(limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        idle_small(Duration::from_millis(50));
        if stats().free_resident < 8 * MIB {
            return Some(start.elapsed());
        }
    }
    None
}

/// The measurement, in the child process (see the module docs). With `from_env`, the purge
/// was turned on by the environment before `main`; else it is measured off (by the environment)
/// first, and then turned on from code.
fn measure(from_env: bool) {
    let (freed, rss_freed) = free_64_mib();
    assert!(
        freed >= 48 * MIB,
        "free resident {freed} after freeing 64 MiB"
    );
    if !from_env {
        // Turned off by the environment (`SPECALLOC_BACKGROUND_PURGE_MS=0`): no trimmer.
        assert_eq!(background_purge(), None);
        // No page-heap operation, no clock: the pages stay (three decommit delays of the
        // default policy).
        idle_small(Duration::from_millis(3000));
        let kept = stats().free_resident;
        assert!(kept >= 48 * MIB, "free resident {kept} without the purge");
        set_background_purge(Some(Duration::from_millis(20))).unwrap();
    } else {
        assert_eq!(background_purge(), Some(Duration::from_millis(20)));
    }
    let returned_before = stats().returned_to_os;
    // Advised after the purge delay (100 ms), returned after the decommit delay (1 s).
    let took = wait_returned(Duration::from_secs(20))
        .unwrap_or_else(|| panic!("free pages still resident: {}", stats()));
    let s = stats();
    assert!(s.returned_to_os >= returned_before + 48 * MIB as u64, "{s}");
    let rss_now = rss();
    assert!(
        rss_now + 40 * MIB <= rss_freed,
        "RSS {rss_now} after the purge, {rss_freed} before"
    );
    println!("returned in {took:?}; RSS {rss_freed} -> {rss_now}");
    set_background_purge(None).unwrap();
    assert_eq!(background_purge(), None);
}

/// Runs this binary again with only `test` selected and `env` set; asserts it passed.
fn in_child(test: &str, env: &[(&str, &str)]) {
    let exe = std::env::current_exe().unwrap();
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env("BACKGROUND_PURGE_CHILD", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && out.contains("returned in") && out.contains("1 passed"),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn is_child() -> bool {
    std::env::var_os("BACKGROUND_PURGE_CHILD").is_some()
}

#[test]
fn idle_memory_goes_back_only_with_the_background_purge() {
    if is_child() {
        measure(false);
    } else {
        in_child(
            "idle_memory_goes_back_only_with_the_background_purge",
            &[("SPECALLOC_BACKGROUND_PURGE_MS", "0")],
        );
    }
}

#[test]
fn the_environment_turns_it_on() {
    if is_child() {
        measure(true);
    } else {
        in_child(
            "the_environment_turns_it_on",
            &[("SPECALLOC_BACKGROUND_PURGE_MS", "20")],
        );
    }
}
