//! What keeping each thread's size classes apart costs `mallocthread` (`bench/c/mallocthread.c`):
//! its own sequence of allocations and frees, replayed without allocating, with specalloc's
//! routing of C requests.
//!
//! ```text
//! cargo run --release -p specalloc-bench --bin classbound -- --threads 2,16
//! ```
//!
//! For each thread it follows the program's generator (the same seeds, slots and sizes) and
//! counts, per size class, the blocks live at each step. It prints, summed over the threads:
//!
//! * the peak of the bytes the program asked for;
//! * the peak of the bytes of the blocks that hold them (each request rounded up to its class);
//! * the *per-class high-water*: for each class, its most blocks live at once times its block
//!   size, rounded up to 4 KiB pages. An allocator that gives each thread spans of its own per
//!   class, hands out the blocks a class freed before it touches new ones, and never lets
//!   another class or thread use pages of a span that still holds a live block (specalloc,
//!   mimalloc, snmalloc) touches at least this much; one that coalesces freed blocks of
//!   different sizes (glibc) need not.
//!
//! Each thread's peaks are summed, so the figures are what the threads hold if their peaks
//! coincide; the threads run the same number of steps side by side, so they nearly do. The
//! process's peak RSS adds what every process holds (the libraries' pages, the threads' stacks,
//! the heaps' own pages).

use specalloc_bench::cli::{self, Token, Usage};
use specalloc_runtime::cabi::default_align;
use specalloc_runtime::size_class::{class_size, route, Route, NUM_CLASSES};

/// `mallocthread`'s slots per thread.
const SLOTS: usize = 1000;
/// `mallocthread`'s replacements at scale 1, split between the threads.
const OPS: f64 = 20_000_000.0;
/// Bytes of a tiny-class block.
const TINY_BLOCK: usize = 4;
/// The OS page the high-water is rounded to.
const OS_PAGE: usize = 4096;

/// The program's generator (`rng_next` in `bench/c/common.h`): xorshift64.
fn rng_next(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// Where a C request of `n` bytes goes: the index of its class (`NUM_CLASSES` for the tiny
/// class) and its block's bytes.
fn block_of(n: usize) -> (usize, usize) {
    match route(n, default_align(n)) {
        Route::Tiny => (NUM_CLASSES, TINY_BLOCK),
        Route::Small(c) => (c, class_size(c)),
        Route::Large => panic!("mallocthread asks for at most 4 KiB; {n} bytes is large"),
    }
}

/// One thread's peaks, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Peaks {
    /// Bytes asked for.
    requested: usize,
    /// Bytes of the blocks that hold them.
    blocks: usize,
    /// The per-class high-water, rounded up to OS pages per class.
    high_water: usize,
}

/// Replays thread `index`'s `ops` replacements of `mallocthread`.
fn replay(index: usize, ops: usize) -> Peaks {
    let mut rng = index as u64 + 3;
    let mut len = [0usize; SLOTS];
    let mut live = [0usize; NUM_CLASSES + 1];
    let mut most = [0usize; NUM_CLASSES + 1];
    let (mut requested, mut blocks) = (0usize, 0usize);
    let mut peaks = Peaks::default();
    for _ in 0..ops {
        let r = rng_next(&mut rng);
        let k = ((r >> 40) % SLOTS as u64) as usize;
        let n = 1 + ((r >> 8) % (2u64 << (r % 12))) as usize;
        if len[k] != 0 {
            let (c, b) = block_of(len[k]);
            live[c] -= 1;
            requested -= len[k];
            blocks -= b;
        }
        let (c, b) = block_of(n);
        live[c] += 1;
        most[c] = most[c].max(live[c]);
        requested += n;
        blocks += b;
        len[k] = n;
        peaks.requested = peaks.requested.max(requested);
        peaks.blocks = peaks.blocks.max(blocks);
    }
    peaks.high_water = (0..=NUM_CLASSES)
        .map(|c| {
            let block = if c == NUM_CLASSES {
                TINY_BLOCK
            } else {
                class_size(c)
            };
            (most[c] * block).next_multiple_of(OS_PAGE)
        })
        .sum();
    peaks
}

/// The threads' peaks summed, for `threads` threads at `scale`.
fn model(threads: usize, scale: f64) -> Peaks {
    let ops = ((OPS * scale / threads as f64) as usize).max(1);
    (0..threads)
        .map(|i| replay(i, ops))
        .fold(Peaks::default(), |a, p| Peaks {
            requested: a.requested + p.requested,
            blocks: a.blocks + p.blocks,
            high_water: a.high_water + p.high_water,
        })
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

fn main() {
    let usage = Usage {
        name: "classbound",
        synopsis: "[--threads N,N,...] [--scale S]",
        flags: "  --threads LIST  thread counts (default 2,16)\n  \
                --scale S       mallocthread's scale (default 1)\n"
            .to_string(),
    };
    let mut threads = vec![2usize, 16];
    let mut scale = 1.0f64;
    cli::parse_env(&usage, |arg, p| {
        match arg {
            Token::Flag(f) if f == "--threads" => {
                let list: String = cli::value(p)?;
                threads = list
                    .split(',')
                    .map(|t| match t.trim().parse::<usize>() {
                        Ok(n) if (1..=1024).contains(&n) => Ok(n),
                        _ => Err(lexopt::Error::from(format!(
                            "not a thread count from 1 to 1024: {t}"
                        ))),
                    })
                    .collect::<Result<_, _>>()?;
            }
            Token::Flag(f) if f == "--scale" => {
                scale = cli::value(p)?;
                if scale.is_nan() || scale <= 0.0 {
                    return Err(lexopt::Error::from("--scale must be positive"));
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    });
    println!("mallocthread's sequence at scale {scale}, summed over its threads (MiB)");
    println!("threads  requested  blocks  per-class high-water  high-water / blocks");
    for &t in &threads {
        let p = model(t, scale);
        println!(
            "{t:>7}  {:>9.2}  {:>6.2}  {:>20.2}  {:>18.2}×",
            mib(p.requested),
            mib(p.blocks),
            mib(p.high_water),
            p.high_water as f64 / p.blocks as f64
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_the_ones_the_c_path_hands_out() {
        for n in [
            1, 3, 4, 5, 8, 9, 16, 17, 24, 25, 100, 1000, 1025, 2049, 4096,
        ] {
            let p = specalloc_runtime::cabi::malloc(n);
            assert!(!p.is_null());
            // SAFETY: `p` is a live block from `cabi::malloc`, freed once below.
            let usable = unsafe { specalloc_runtime::cabi::usable_size(p) };
            // SAFETY: as above.
            unsafe { specalloc_runtime::cabi::free(p) };
            assert_eq!(block_of(n).1, usable, "{n} bytes");
        }
    }

    #[test]
    fn each_peak_bounds_the_one_before() {
        for threads in [1, 3] {
            let p = model(threads, 0.001);
            assert!(p.requested > 0);
            assert!(p.blocks >= p.requested, "{p:?}");
            assert!(p.high_water >= p.blocks, "{p:?}");
        }
    }

    #[test]
    fn the_sums_are_the_threads_own() {
        let one = [replay(0, 5000), replay(1, 5000)];
        let both = model(2, 10_000.0 / OPS);
        assert_eq!(both.requested, one[0].requested + one[1].requested);
        assert_eq!(both.high_water, one[0].high_water + one[1].high_water);
    }
}
