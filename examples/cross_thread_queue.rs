//! A linked queue whose nodes are allocated on producer threads and freed on a consumer thread:
//! every free is a cross-thread free. The node constructor is annotated with `#[specialize]`.
//!
//! ```text
//! cargo run --release --example cross_thread_queue [messages_per_producer]
//! cargo run --release --example cross_thread_queue --features no-size-specialized   # the A/B
//! cargo run --release --example cross_thread_queue --features compare-mimalloc     # against mimalloc
//! ```

#[path = "common/args.rs"]
mod args;

use std::sync::mpsc;
use std::time::Instant;

use specalloc::specialize;

#[cfg(not(feature = "compare-mimalloc"))]
specalloc::install!(static GLOBAL);

#[cfg(feature = "compare-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Which configuration this binary was built in.
fn config() -> &'static str {
    if cfg!(feature = "compare-mimalloc") {
        "mimalloc as the global allocator"
    } else if specalloc::spec::SIZE_SPECIALIZED {
        "specalloc, size-specialised"
    } else {
        "specalloc, opt-out: generic path"
    }
}

/// A message node: a small header and a payload.
struct Node {
    seq: u64,
    producer: u32,
    payload: [u8; 20],
    next: Option<Box<Node>>,
}

/// A batch of nodes, linked, built on the producer.
#[specialize]
fn batch(producer: u32, first: u64, len: u64) -> Option<Box<Node>> {
    let mut head: Option<Box<Node>> = None;
    for seq in (first..first + len).rev() {
        head = Some(Box::new(Node {
            seq,
            producer,
            payload: [seq as u8; 20],
            next: head,
        }));
    }
    head
}

const USAGE: &str = "usage: cross_thread_queue [messages_per_producer]
  messages_per_producer  messages each of the two producers sends (default 2000000)";

/// The one optional argument (see `common/args.rs`).
fn arg() -> u64 {
    let [n] = args::numbers("cross_thread_queue", USAGE, [2_000_000], |_, _| true);
    n
}

fn main() {
    let per_producer = arg();
    let producers = 2u32;
    let start = Instant::now();
    let (tx, rx) = mpsc::sync_channel::<Box<Node>>(64);
    let consumer = std::thread::spawn(move || {
        let (mut n, mut sum) = (0u64, 0u64);
        for head in rx {
            let mut cur = Some(head);
            while let Some(mut node) = cur {
                assert_eq!(node.payload[19], node.seq as u8);
                sum = sum.wrapping_add(node.seq ^ node.producer as u64);
                n += 1;
                cur = node.next.take();
                // `node` is dropped here: freed on this thread, allocated on a producer.
            }
        }
        (n, sum)
    });
    let handles: Vec<_> = (0..producers)
        .map(|p| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut seq = 0;
                while seq < per_producer {
                    let len = 256.min(per_producer - seq);
                    if let Some(b) = batch(p, seq, len) {
                        tx.send(b).unwrap();
                    }
                    seq += len;
                }
            })
        })
        .collect();
    drop(tx);
    for h in handles {
        h.join().unwrap();
    }
    let (n, sum) = consumer.join().unwrap();
    let elapsed = start.elapsed();
    println!("{n} nodes passed from {producers} producers to 1 consumer, checksum {sum}");
    println!("time: {:.3} s ({})", elapsed.as_secs_f64(), config());
    if !cfg!(feature = "compare-mimalloc") {
        println!("{}", specalloc::stats());
    }
}
