//! A multi-threaded, allocation-heavy workload on the global allocator, ending with its
//! statistics (`stats()`, with specalloc).
//!
//! ```text
//! cargo run --release --example workload
//! cargo run --release --example workload --features compare-mimalloc   # against mimalloc
//! ```
//!
//! Four producer threads build boxed binary trees, hash maps of vectors and strings; part of what
//! they build is sent to a consumer thread that checks and drops it (cross-thread frees); the
//! producers exit while their blocks are still alive elsewhere (thread-exit reclaim). It takes
//! no argument.

#[path = "common/args.rs"]
mod args;

use std::collections::HashMap;
use std::sync::mpsc;
use std::time::Instant;

#[cfg(not(feature = "compare-mimalloc"))]
specalloc::install!(static GLOBAL);

#[cfg(feature = "compare-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

enum Tree {
    Leaf,
    Node(Box<Tree>, Box<Tree>),
}

fn build(depth: u32) -> Tree {
    if depth == 0 {
        Tree::Leaf
    } else {
        Tree::Node(Box::new(build(depth - 1)), Box::new(build(depth - 1)))
    }
}

fn count(t: &Tree) -> u64 {
    match t {
        Tree::Leaf => 1,
        Tree::Node(l, r) => 1 + count(l) + count(r),
    }
}

fn main() {
    let [] = args::numbers(
        "workload",
        "usage: workload   (no arguments)",
        [],
        |_, _| true,
    );
    let threads = 4;
    let start = Instant::now();
    let (tx, rx) = mpsc::channel::<(Tree, HashMap<u64, Vec<u8>>, Vec<String>)>();
    let consumer = std::thread::spawn(move || {
        let mut nodes = 0;
        let mut bytes = 0;
        for (tree, map, strings) in rx {
            nodes += count(&tree);
            bytes += map.values().map(|v| v.len()).sum::<usize>();
            bytes += strings.iter().map(|s| s.len()).sum::<usize>();
        }
        (nodes, bytes)
    });
    let producers: Vec<_> = (0..threads)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut local_nodes = 0;
                for round in 0..20u64 {
                    let tree = build(14);
                    local_nodes += count(&tree);
                    let map: HashMap<u64, Vec<u8>> = (0..2000u64)
                        .map(|i| (i, vec![t as u8; ((i * 37 + round) % 700) as usize]))
                        .collect();
                    let strings: Vec<String> = (0..2000)
                        .map(|i| format!("thread {t} round {round} item {i}"))
                        .collect();
                    let kept = build(12); // dropped locally
                    local_nodes += count(&kept);
                    tx.send((tree, map, strings)).unwrap();
                }
                local_nodes
            })
        })
        .collect();
    drop(tx);
    let local: u64 = producers.into_iter().map(|p| p.join().unwrap()).sum();
    let (remote_nodes, bytes) = consumer.join().unwrap();
    let elapsed = start.elapsed();
    println!(
        "{threads} producers + 1 consumer: {} tree nodes built, {} consumed remotely, {} payload bytes, {:.2?}",
        local, remote_nodes, bytes, elapsed
    );
    if cfg!(feature = "compare-mimalloc") {
        println!("(mimalloc as the global allocator: no specalloc statistics)");
    } else {
        println!("{}", specalloc::stats());
    }
}
