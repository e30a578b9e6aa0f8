//! One run of one memory workload under the global allocator this binary was built with (the
//! same `global-*` features as the sweep's worker; specalloc when none). Prints one CSV line:
//! `workload,allocator,wall_ms,peak_rss_kb,extra_name,extra_value`.
//!
//! Workloads (issue "Memory"):
//! - `putget`: 3 million inserts over 50,000 `HashMap` keys, then every key read back;
//! - `push`: 3 million integers pushed onto a `Vec`, then summed;
//! - `tiny:N`: 2^20 objects of N bytes kept live; `extra` = resident bytes gained per object
//!   (`tiny:mixed`: the objects cycle through 1 to 15 bytes);
//! - `churn`: 4 threads allocate mixed sizes (16 B to 64 KiB) up to about 256 MiB in all, free
//!   90% of it in random order, then idle 200 ms; `extra` = resident bytes after the drop,
//!   and the live bytes are printed on stderr.
//!
//! Built and run by `bench/scripts/memory.sh`, which interleaves allocators and takes medians.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Instant;

use specalloc_bench::cli::{self, Stop, Token, Usage, ValueExt};

specalloc_bench::select_global_allocator!();

/// Current resident set size in bytes (/proc/self/statm).
fn rss_bytes() -> u64 {
    let s = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = s
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    pages * 4096
}

fn putget() -> (String, f64) {
    let mut m: HashMap<u64, u64> = HashMap::new();
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..3_000_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *m.entry(x % 50_000).or_insert(0) += i;
    }
    let sum: u64 = (0..50_000u64)
        .map(|k| m.get(&k).copied().unwrap_or(0))
        .sum();
    black_box(sum);
    ("keys".into(), m.len() as f64)
}

fn push() -> (String, f64) {
    let mut v = Vec::new();
    for i in 0..3_000_000u64 {
        v.push(black_box(i));
    }
    let sum: u64 = v.iter().sum();
    black_box(sum);
    ("len".into(), v.len() as f64)
}

/// `tiny:N` (every object `size` bytes) or `tiny:mixed` (`size` 0: the objects cycle through
/// 1 to 15 bytes, as a mix of short strings and small boxes would).
fn tiny(size: usize) -> (String, f64) {
    const N: usize = 1 << 20;
    let layout_of = |i: usize| {
        let n = if size == 0 { 1 + i % 15 } else { size };
        std::alloc::Layout::from_size_align(n, 1).unwrap()
    };
    // The pointer array is written in full first, so its own pages are not counted.
    let mut ptrs: Vec<*mut u8> = vec![std::ptr::null_mut(); N];
    let before = rss_bytes();
    for (i, slot) in ptrs.iter_mut().enumerate() {
        // SAFETY: a valid non-zero layout.
        let p = unsafe { std::alloc::alloc(layout_of(i)) };
        assert!(!p.is_null());
        // Touch it, as a program would.
        // SAFETY: `p` holds `size` bytes.
        unsafe { p.write(1) };
        *slot = p;
    }
    let after = rss_bytes();
    let per = after.saturating_sub(before) as f64 / N as f64;
    for (i, p) in ptrs.into_iter().enumerate() {
        // SAFETY: allocated above with this layout.
        unsafe { std::alloc::dealloc(p, layout_of(i)) };
    }
    ("rss_bytes_per_object".into(), per)
}

fn churn() -> (String, f64) {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 64 << 20;
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            std::thread::spawn(move || {
                let mut x = 0x2545_F491_4F6C_DD1Du64 ^ t as u64;
                let mut next = move || {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x
                };
                let mut blocks: Vec<Vec<u8>> = Vec::new();
                let mut total = 0;
                while total < PER_THREAD {
                    let r = next();
                    let size = match r % 16 {
                        0..=9 => 16 + (r >> 8) as usize % 240,
                        10..=13 => 256 + (r >> 8) as usize % 3840,
                        _ => 4096 + (r >> 8) as usize % 61440,
                    };
                    blocks.push(vec![r as u8; size]);
                    total += size;
                }
                // Free 90% in random order, keep 10%.
                let mut kept = Vec::new();
                let mut live = 0;
                for b in blocks {
                    if next() % 10 == 0 {
                        live += b.len();
                        kept.push(b);
                    }
                }
                (kept, live)
            })
        })
        .collect();
    let mut kept = Vec::new();
    let mut live = 0;
    for h in handles {
        let (k, l) = h.join().unwrap();
        kept.push(k);
        live += l;
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    let rss = rss_bytes();
    eprintln!("churn: live {live} B, resident after the drop {rss} B");
    black_box(&kept);
    ("rss_after_drop".into(), rss as f64)
}

fn main() {
    let usage = Usage {
        name: "memory_worker",
        synopsis: "putget | push | churn | tiny:N | tiny:mixed",
        flags: "(run by bench/scripts/memory.sh, which interleaves allocators and takes medians)\n"
            .to_string(),
    };
    let mut workload = None;
    cli::parse_env(&usage, |arg, _| match arg {
        Token::Value(v) if workload.is_none() => {
            workload = Some(v.clone().string()?);
            Ok(true)
        }
        _ => Ok(false),
    });
    let Some(workload) = workload else {
        Stop::Error(format!(
            "memory_worker: error: no workload\n{}",
            usage.line()
        ))
        .exit()
    };
    let start = Instant::now();
    let (name, value) = match workload.as_str() {
        "putget" => putget(),
        "push" => push(),
        "churn" => churn(),
        "tiny:mixed" => tiny(0),
        w => match w.strip_prefix("tiny:").map(str::parse) {
            Some(Ok(n)) if n > 0 => tiny(n),
            _ => Stop::Error(format!(
                "memory_worker: error: unknown workload {w:?}\n{}",
                usage.line()
            ))
            .exit(),
        },
    };
    let wall = start.elapsed().as_secs_f64() * 1000.0;
    println!(
        "{workload},{},{wall:.1},{},{name},{value:.3}",
        GLOBAL_NAME,
        specalloc_bench::peak_rss_kb()
    );
}
