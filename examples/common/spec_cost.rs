//! The body of the `spec_cost_*` examples: binary-trees (see `binary_trees.rs`) with its
//! constructor twice, plain and under `#[specialize]`, chosen by the first argument, so that
//! one binary per global allocator measures both (`bench/scripts/spec_cost.sh` runs them under
//! callgrind in each profile).

use specalloc::specialize;

/// A node of a perfect binary tree.
pub struct Node {
    left: Option<Box<Node>>,
    right: Option<Box<Node>>,
}

/// The constructor as written, without the attribute.
fn plain(depth: u32) -> Box<Node> {
    if depth == 0 {
        return Box::new(Node {
            left: None,
            right: None,
        });
    }
    Box::new(Node {
        left: Some(plain(depth - 1)),
        right: Some(plain(depth - 1)),
    })
}

/// The same constructor, annotated.
#[specialize]
fn annotated(depth: u32) -> Box<Node> {
    if depth == 0 {
        return Box::new(Node {
            left: None,
            right: None,
        });
    }
    Box::new(Node {
        left: Some(annotated(depth - 1)),
        right: Some(annotated(depth - 1)),
    })
}

fn check(n: &Node) -> u32 {
    match (&n.left, &n.right) {
        (Some(l), Some(r)) => 1 + check(l) + check(r),
        _ => 1,
    }
}

/// `spec_cost_* plain|annotated [max_depth]`: binary-trees with the chosen constructor.
pub fn main(allocator: &str) {
    let mut args = std::env::args().skip(1);
    let which = args.next().unwrap_or_else(|| "annotated".to_string());
    let max_depth: u32 = args.next().map_or(16, |d| d.parse().expect("a depth"));
    let build: fn(u32) -> Box<Node> = match which.as_str() {
        "plain" => plain,
        "annotated" => annotated,
        other => panic!("usage: spec_cost plain|annotated [max_depth], not {other}"),
    };
    let stretch = max_depth + 1;
    let mut total = check(&build(stretch));
    let long_lived = build(max_depth);
    for depth in (4..=max_depth).step_by(2) {
        let iterations = 1u32 << (max_depth - depth + 4);
        total += (0..iterations).map(|_| check(&build(depth))).sum::<u32>();
    }
    total += check(&long_lived);
    println!(
        "{which} ({allocator}, installed: {}): {total} nodes",
        specalloc::spec::installed()
    );
}
