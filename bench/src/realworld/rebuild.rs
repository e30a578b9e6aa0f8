//! Programs whose heap grows large and shrinks again, the case where an
//! allocator's page-return policy shows: memory returned to the OS too soon
//! is faulted in again, page by page, on the next build.
//!
//! - [`run`] (`rebuild`): builds a document-like tree of boxed records
//!   (names, tag strings, value vectors, child lists) of about 20 MB per
//!   unit of scale, walks it, drops it, and does it again: ten builds per
//!   run. At the default scale (10) each build is about 200 MB. [`once`]
//!   (`rebuild1`) is its first build alone.
//! - [`grow`] (`grow`): realloc-heavy growth: vectors and strings grown by
//!   `push` from empty to a few MiB (through the medium and huge sizes, where
//!   growth is `realloc`), read, dropped, ten rounds per unit of scale.

use super::{hash_str, mix, rng, word};
use crate::harness::SplitMix64;

// The program, compiled twice: `plain` as written, `annotated` under `#[specialize]`
// (see `super::plain_and_annotated!`). The suite runs `plain`.
pub use plain::{once, run};

plain_and_annotated! {
    /// One record of the tree. Children are boxed on purpose: a node allocated
    /// on its own, as trees of boxed nodes are in real programs.
    #[allow(clippy::vec_box)]
    struct Record {
        name: String,
        tags: Vec<String>,
        values: Vec<u64>,
        children: Vec<Box<Record>>,
    }

    /// Builds a record and, below `depth`, its children.
    fn record(r: &mut SplitMix64, depth: u32) -> Box<Record> {
        let x = r.next_u64();
        let name = format!("{}-{}", word(r), x % 10_000);
        let tags = (0..x % 4).map(|_| word(r)).collect();
        let values = (0..4 + (x >> 8) % 28)
            .map(|i| x.rotate_left(i as u32))
            .collect();
        let children = if depth == 0 {
            Vec::new()
        } else {
            (0..2 + (x >> 16) % 5)
                .map(|_| record(r, depth - 1))
                .collect()
        };
        Box::new(Record {
            name,
            tags,
            values,
            children,
        })
    }

    /// A checksum of the tree, walked depth first.
    fn walk(rec: &Record) -> u64 {
        let mut h = hash_str(&rec.name);
        for t in &rec.tags {
            h = mix(h, hash_str(t));
        }
        h = mix(h, rec.values.iter().fold(0, |a, &v| a ^ v));
        rec.children.iter().fold(h, |h, c| mix(h, walk(c)))
    }

    /// Builds per unit of scale: top-level records of depth 4 (about 20 MB).
    const RECORDS_PER_SCALE: u32 = 160;

    /// Ten builds of a tree of `160 × scale` top-level records, each walked and
    /// dropped before the next.
    pub fn run(scale: u32) -> u64 {
        builds(scale, 10)
    }

    /// The first build of [`run`] alone (`rebuild1`): the page faults a build
    /// takes from a fresh process, against which [`run`]'s ten are judged.
    pub fn once(scale: u32) -> u64 {
        builds(scale, 1)
    }

    fn builds(scale: u32, n: u64) -> u64 {
        let mut h = 0;
        for build in 0..n {
            let mut r = rng(0x4eb1_0000 + build);
            let forest: Vec<Box<Record>> = (0..RECORDS_PER_SCALE * scale)
                .map(|_| record(&mut r, 4))
                .collect();
            h = forest.iter().fold(h, |h, rec| mix(h, walk(rec)));
            drop(forest);
        }
        h
    }
}

/// `10 × scale` rounds of growing 8 vectors and 8 strings by `push` to up to
/// 4 MiB each, reading and dropping them.
pub fn grow(scale: u32) -> u64 {
    let mut h = 0;
    let mut r = rng(0x6a0e_0000);
    for _ in 0..10 * scale {
        let mut vecs: Vec<Vec<u64>> = Vec::new();
        let mut strings: Vec<String> = Vec::new();
        for _ in 0..8 {
            let n = 1000 + r.next_u64() % (512 << 10);
            let mut v = Vec::new();
            for i in 0..n {
                v.push(i ^ n);
            }
            vecs.push(v);
            let mut s = String::new();
            let w = word(&mut r);
            while s.len() < n as usize {
                s.push_str(&w);
                s.push(' ');
            }
            strings.push(s);
        }
        for v in &vecs {
            h = mix(h, v.len() as u64 ^ v[v.len() / 2]);
        }
        for s in &strings {
            h = mix(h, s.len() as u64 ^ s.as_bytes()[s.len() / 3] as u64);
        }
    }
    h
}

/// Live buffers of [`largebuf`].
const LARGE_BUFFERS: usize = 20;

/// `100 × scale` random replacements of one of 20 live buffers of 5 to 25 MiB
/// (the pattern of mimalloc-bench's malloc-large): each new buffer, written
/// whole (`vec![x; n]`), is made before the one it replaces is dropped.
pub fn largebuf(scale: u32) -> u64 {
    const MIB: u64 = 1 << 20;
    let mut r = rng(0x1a26_0000);
    let mut bufs: Vec<Vec<u8>> = (0..LARGE_BUFFERS).map(|_| Vec::new()).collect();
    let mut h = 0;
    for k in 0..100 * u64::from(scale) {
        let i = (r.next_u64() % LARGE_BUFFERS as u64) as usize;
        let n = (5 * MIB + r.next_u64() % (20 * MIB)) as usize;
        bufs[i] = vec![k as u8; n];
        h = mix(h, bufs[i][n / 2] as u64 ^ n as u64);
    }
    bufs.iter().fold(h, |h, b| {
        mix(h, b.len() as u64 ^ b.last().map_or(0, |&x| x as u64))
    })
}
