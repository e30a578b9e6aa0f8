//! A larson-style server: worker threads that each hold a table of live
//! objects (8 to 1,000 bytes), replace objects at random (every replacement
//! frees an object, often one another thread allocated), and are themselves
//! replaced: a worker that has done its share hands its table to a new thread
//! and exits, so objects outlive the thread that allocated them. At the end
//! the main thread frees what the last workers left.
//!
//! Each lineage of workers (a table and the threads that hold it in turn) has
//! its own random stream, so the checksum does not depend on how the threads
//! interleave. [`run_joined`] (`server-joined`) does the same work with each
//! worker joined before its successor starts, so that no finished worker is
//! still exiting (holding what it allocated) while the next one runs: on a
//! machine with fewer cores than busy threads, exiting threads wait for a core.
//!
//! [`chain`] (`threads`) is the other shape of a server: a thread per connection, thousands of
//! them alive and blocked at once, each holding a few objects.

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

/// A lineage's state as it passes from worker to worker: its random stream, its table and the
/// checksum so far.
type Lineage = (SplitMix64, Vec<Box<[u8]>>, u64);

/// One worker's share: `OPS_PER_WORKER` replacements in the lineage's table.
fn serve((mut r, mut table, mut h): Lineage) -> Lineage {
    for _ in 0..OPS_PER_WORKER {
        let i = (r.next_u64() % SLOTS as u64) as usize;
        let new = object(&mut r);
        let old = std::mem::replace(&mut table[i], new);
        h = mix(h, old.len() as u64 ^ (old[old.len() - 1] as u64) << 16);
    }
    (r, table, h)
}

/// One worker of [`run`]: its share, then the lineage goes to the next worker (a new thread,
/// started before this one exits, as larson's workers do), or back to the main thread after the
/// last one.
fn worker(generation: u64, generations: u64, lineage: Lineage, done: mpsc::Sender<Lineage>) {
    let lineage = serve(lineage);
    if generation + 1 == generations {
        done.send(lineage).expect("main thread");
        return;
    }
    std::thread::spawn(move || worker(generation + 1, generations, lineage, done));
}

/// A lineage's first state: its table of `SLOTS` objects, filled by the calling thread.
fn first(lineage: u64) -> Lineage {
    let mut r = rng(0x5e7e_0000 + lineage);
    let table: Vec<Box<[u8]>> = (0..SLOTS).map(|_| object(&mut r)).collect();
    (r, table, lineage)
}

/// Fills the `LINEAGES` tables on the calling thread, starts each lineage on a thread of its
/// own with `start(generations, first state, channel back)`, then sums the lineages the workers
/// send back, whatever their order, and frees their tables on the calling thread.
fn lineages(scale: u32, start: fn(u64, Lineage, mpsc::Sender<Lineage>)) -> u64 {
    let generations = WORKERS_PER_SCALE * scale.max(1) as u64;
    let (tx, rx) = mpsc::channel();
    for lineage in 0..LINEAGES {
        let state = first(lineage);
        let done = tx.clone();
        std::thread::spawn(move || start(generations, state, done));
    }
    drop(tx);
    let mut sum = 0u64;
    let mut tables = Vec::new();
    for (_, table, h) in rx {
        let last = table
            .iter()
            .fold(0u64, |a, o| a.wrapping_add(o.len() as u64 * o[0] as u64));
        sum = sum.wrapping_add(mix(h, last));
        tables.push(table);
    }
    assert_eq!(tables.len() as u64, LINEAGES, "a lineage's worker failed");
    sum
}

/// `LINEAGES` tables of `SLOTS` objects, filled by the main thread, each passed through
/// `2 × scale` worker threads in turn, each worker starting its successor and exiting.
pub fn run(scale: u32) -> u64 {
    lineages(scale, |generations, state, done| {
        worker(0, generations, state, done)
    })
}

/// [`run`] with each worker joined before the next of its lineage starts (a thread per task, as
/// a pool that spawns and joins does): the same work and checksum, with no worker left exiting
/// while its successor runs. One driver thread per lineage starts and joins its workers.
pub fn run_joined(scale: u32) -> u64 {
    lineages(scale, |generations, mut state, done| {
        for _ in 0..generations {
            state = std::thread::spawn(move || serve(state))
                .join()
                .expect("worker");
        }
        done.send(state).expect("main thread");
    })
}

/// Threads of [`chain`] per unit of scale.
const CHAIN_PER_SCALE: u32 = 250;

/// A thread per connection: a chain of `250 × scale` threads (64 KiB stacks), each of which
/// allocates a few blocks of 16 to 255 bytes, starts the next thread and waits for it, then
/// reads and frees its blocks, so that every thread of the chain is alive, blocked, when the
/// last one starts. What it measures is what each live thread holds of the allocator's memory.
pub fn chain(scale: u32) -> u64 {
    link(CHAIN_PER_SCALE * scale.max(1), rng(0xc4a1_0000))
}

/// One thread of [`chain`], with `left` threads still to start after it.
fn link(left: u32, mut r: SplitMix64) -> u64 {
    let blocks: Vec<Box<[u8]>> = (0..4)
        .map(|i| {
            let len = 16 + (r.next_u64() % 240) as usize;
            vec![i as u8 ^ len as u8; len].into_boxed_slice()
        })
        .collect();
    let mut h = mix(u64::from(left), blocks.len() as u64);
    if left > 0 {
        let next = std::thread::Builder::new()
            .stack_size(64 << 10)
            .spawn(move || link(left - 1, r))
            .expect("starting the next thread of the chain");
        h = mix(h, next.join().expect("a thread of the chain"));
    }
    blocks.iter().fold(h, |h, b| {
        mix(h, b.len() as u64 ^ u64::from(b[b.len() - 1]) << 8)
    })
}
