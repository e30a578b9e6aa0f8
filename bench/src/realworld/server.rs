//! A larson-style server: worker threads that each hold a table of live
//! objects (8 to 1,000 bytes), replace objects at random (every replacement
//! frees an object, often one another thread allocated), and are themselves
//! replaced: a worker that has done its share hands its table to a new thread
//! and exits, so objects outlive the thread that allocated them. At the end
//! the main thread frees what the last workers left.
//!
//! Each lineage of workers (a table and the threads that hold it in turn) has
//! its own random stream, so the checksum does not depend on how the threads
//! interleave.

use std::sync::mpsc;

use super::{mix, rng};
use crate::harness::SplitMix64;

/// Lineages running at once (each one thread at a time).
const LINEAGES: u64 = 4;
/// Live objects per lineage.
const SLOTS: usize = 5_000;
/// Replacements per worker thread before it hands its table on.
const OPS_PER_WORKER: u64 = 10_000;
/// Workers per lineage per unit of scale.
const WORKERS_PER_SCALE: u64 = 2;

/// An object of 8 to 1,000 bytes, every byte `tag`.
fn object(r: &mut SplitMix64) -> Box<[u8]> {
    let x = r.next_u64();
    let len = 8 + (x % 993) as usize;
    vec![(x >> 32) as u8 | 1; len].into_boxed_slice()
}

/// One worker: `OPS_PER_WORKER` replacements in `table`, then the table goes to the next
/// worker of the lineage (a new thread), or back to the main thread after the last one.
fn worker(
    generation: u64,
    generations: u64,
    mut r: SplitMix64,
    mut table: Vec<Box<[u8]>>,
    mut h: u64,
    done: mpsc::Sender<(u64, Vec<Box<[u8]>>)>,
) {
    for _ in 0..OPS_PER_WORKER {
        let i = (r.next_u64() % SLOTS as u64) as usize;
        let new = object(&mut r);
        let old = std::mem::replace(&mut table[i], new);
        h = mix(h, old.len() as u64 ^ (old[old.len() - 1] as u64) << 16);
    }
    if generation + 1 == generations {
        done.send((h, table)).expect("main thread");
        return;
    }
    std::thread::spawn(move || worker(generation + 1, generations, r, table, h, done));
}

/// `LINEAGES` tables of `SLOTS` objects, filled by the main thread, each passed through
/// `2 × scale` worker threads in turn.
pub fn run(scale: u32) -> u64 {
    let generations = WORKERS_PER_SCALE * scale.max(1) as u64;
    let (tx, rx) = mpsc::channel();
    for lineage in 0..LINEAGES {
        let mut r = rng(0x5e7e_0000 + lineage);
        let table: Vec<Box<[u8]>> = (0..SLOTS).map(|_| object(&mut r)).collect();
        let done = tx.clone();
        std::thread::spawn(move || worker(0, generations, r, table, lineage, done));
    }
    drop(tx);
    // Arrival order varies between runs: a commutative sum.
    let mut sum = 0u64;
    let mut tables = Vec::new();
    for (h, table) in rx {
        let last = table
            .iter()
            .fold(0u64, |a, o| a.wrapping_add(o.len() as u64 * o[0] as u64));
        sum = sum.wrapping_add(mix(h, last));
        tables.push(table);
    }
    assert_eq!(tables.len() as u64, LINEAGES, "a lineage's worker failed");
    sum
}
