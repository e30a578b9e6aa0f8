//! Times alloc+free pairs of a few sizes through the generic path (a development probe):
//! `cargo run --release -p specalloc-runtime --example tinyperf -- [pairs] [size]`.
use std::alloc::{GlobalAlloc, Layout};
use std::hint::black_box;
use std::time::Instant;

#[inline(never)]
fn pair(l: Layout, n: usize) {
    let a = specalloc_runtime::SpecAlloc;
    for _ in 0..n {
        // SAFETY: a valid layout; the block is freed once with it.
        unsafe {
            let p = a.alloc(l);
            black_box(p);
            a.dealloc(p, l);
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .map(|s| s.parse().unwrap())
        .unwrap_or(10_000_000);
    let sizes: Vec<usize> = match args.next() {
        Some(s) => vec![s.parse().unwrap()],
        None => vec![8, 16, 24],
    };
    for size in sizes {
        let l = Layout::from_size_align(size, 8).unwrap();
        pair(l, 1000);
        let t = Instant::now();
        pair(l, n);
        println!(
            "{size}: {:.2} ns/pair",
            t.elapsed().as_nanos() as f64 / n as f64
        );
    }
}
