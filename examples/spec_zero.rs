//! Issue 22's zero-fill case: `vec![0u8; N]` plain against `#[specialize]`-annotated, installed,
//! for one 256 MiB vector and for 20,000 vectors of 64 KiB (sizes no routine serves: the
//! annotated code must take `alloc_zeroed` as std does, whose fresh pages are zero untouched).
//! `#[specialize]` leaves `vec!` to std, so the annotated side is std's code.
//!
//! ```text
//! cargo run --release --example spec_zero plain|annotated
//! ```

use std::hint::black_box;
use std::time::Instant;

use specalloc::specialize;

specalloc::install!(static GLOBAL);

const HUGE: usize = 256 << 20;
const MID: usize = 65536;

fn plain_huge() -> Vec<u8> {
    vec![0u8; HUGE]
}

fn plain_mid() -> Vec<u8> {
    vec![0u8; MID]
}

#[specialize]
fn annotated_huge() -> Vec<u8> {
    vec![0u8; HUGE]
}

#[specialize]
fn annotated_mid() -> Vec<u8> {
    vec![0u8; MID]
}

/// Peak resident memory, in KiB.
fn max_rss_kib() -> i64 {
    // SAFETY: `getrusage` fills the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        u.ru_maxrss
    }
}

fn main() {
    let which = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "annotated".to_string());
    type Make = fn() -> Vec<u8>;
    let (huge, mid): (Make, Make) = match which.as_str() {
        "plain" => (plain_huge, plain_mid),
        "annotated" => (annotated_huge, annotated_mid),
        other => panic!("usage: spec_zero plain|annotated, not {other}"),
    };
    let start = Instant::now();
    let v = black_box(huge());
    let t_huge = start.elapsed();
    assert_eq!(v[HUGE - 1], 0);
    drop(v);
    let start = Instant::now();
    for _ in 0..20_000 {
        let v = black_box(mid());
        assert_eq!(v[123], 0);
    }
    let t_mid = start.elapsed();
    println!(
        "{which}: vec![0u8; 256 MiB] {:.1} us, vec![0u8; 64 KiB] x 20000 {:.1} ms, peak RSS {:.1} MiB",
        t_huge.as_secs_f64() * 1e6,
        t_mid.as_secs_f64() * 1e3,
        max_rss_kib() as f64 / 1024.0
    );
}
