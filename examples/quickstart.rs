// The README's Quickstart, as a file: `bench/tests/readme.rs` checks the two are the same, and
// `scripts/test-all.sh`'s clippy run (warnings as errors) that it builds without a warning.
// Run it with `cargo run --release --example quickstart`.

use specalloc::specialize;

// `#[global_allocator] static …: SpecAlloc = SpecAlloc;`, marked so that the size-specialised
// routines may serve (a hand-written static or a wrapper gets the generic path).
specalloc::install!();

struct Node {
    left: Option<Box<Node>>,
    right: Option<Box<Node>>,
}

#[specialize] // Box::new below now calls the routine of Node's size class (16 B)
fn tree(depth: u32) -> Box<Node> {
    if depth == 0 {
        return Box::new(Node {
            left: None,
            right: None,
        });
    }
    Box::new(Node {
        left: Some(tree(depth - 1)),
        right: Some(tree(depth - 1)),
    })
}

fn count(node: &Node) -> usize {
    1 + node.left.as_deref().map_or(0, count) + node.right.as_deref().map_or(0, count)
}

fn main() {
    let t = tree(10);
    println!("{} nodes", count(&t));
    println!("{}", specalloc::stats()); // bytes in use, mapped, per-class live objects and spans
}
