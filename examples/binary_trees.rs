//! The Benchmarks Game's binary-trees: build, check and drop many perfect binary trees of boxed
//! nodes. Its constructor is annotated with `#[specialize]`, so every `Box::new` of a node calls
//! the size-specialised routine of the node's size class.
//!
//! ```text
//! cargo run --release --example binary_trees [max_depth]
//! cargo run --release --example binary_trees --features no-size-specialized   # the A/B
//! cargo run --release --example binary_trees --features compare-mimalloc     # against mimalloc
//! ```

#[path = "common/args.rs"]
mod args;

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

struct Node {
    left: Option<Box<Node>>,
    right: Option<Box<Node>>,
}

#[specialize]
fn bottom_up(depth: u32) -> Box<Node> {
    if depth == 0 {
        return Box::new(Node {
            left: None,
            right: None,
        });
    }
    Box::new(Node {
        left: Some(bottom_up(depth - 1)),
        right: Some(bottom_up(depth - 1)),
    })
}

fn check(n: &Node) -> u32 {
    match (&n.left, &n.right) {
        (Some(l), Some(r)) => 1 + check(l) + check(r),
        _ => 1,
    }
}

const USAGE: &str = "usage: binary_trees [max_depth]
  max_depth  depth of the largest trees, 6 to 30 (default 18)";

/// The one optional argument (see `common/args.rs`).
fn arg() -> u64 {
    let [n] = args::numbers("binary_trees", USAGE, [18], |_, n| (6..=30).contains(&n));
    n
}

fn main() {
    let max_depth = arg() as u32;
    let start = Instant::now();
    let stretch = max_depth + 1;
    println!(
        "stretch tree of depth {stretch}\t check: {}",
        check(&bottom_up(stretch))
    );
    let long_lived = bottom_up(max_depth);
    for depth in (4..=max_depth).step_by(2) {
        let iterations = 1u32 << (max_depth - depth + 4);
        let sum: u32 = (0..iterations).map(|_| check(&bottom_up(depth))).sum();
        println!("{iterations}\t trees of depth {depth}\t check: {sum}");
    }
    println!(
        "long lived tree of depth {max_depth}\t check: {}",
        check(&long_lived)
    );
    let elapsed = start.elapsed();
    drop(long_lived);
    println!("time: {:.3} s ({})", elapsed.as_secs_f64(), config());
    if !cfg!(feature = "compare-mimalloc") {
        println!("{}", specalloc::stats());
    }
}
