//! Graph and tree work: a random graph stored as adjacency `Vec`s grown by
//! pushes, with per-node label `String`s, searched breadth-first and by
//! Dijkstra's algorithm (`BinaryHeap`); then boxed binary trees built,
//! checked and dropped (the binary-trees benchmark's shape).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use super::{hash_str, mix, rng, word};

/// Nodes per unit of scale.
const NODES: usize = 3_000;
/// Depth of the binary trees.
const DEPTH: u32 = 12;

// The program, compiled twice: `plain` as written, `annotated` under `#[specialize]`
// (see `super::plain_and_annotated!`). The suite runs `plain`.
pub use plain::run;

plain_and_annotated! {
    /// A boxed binary tree node.
    struct Tree {
        left: Option<Box<Tree>>,
        right: Option<Box<Tree>>,
    }

    fn tree(depth: u32) -> Box<Tree> {
        if depth == 0 {
            Box::new(Tree {
                left: None,
                right: None,
            })
        } else {
            Box::new(Tree {
                left: Some(tree(depth - 1)),
                right: Some(tree(depth - 1)),
            })
        }
    }

    fn check(t: &Tree) -> u64 {
        1 + t.left.as_deref().map_or(0, check) + t.right.as_deref().map_or(0, check)
    }

    /// One random graph: BFS hop counts and Dijkstra distances from node 0.
    fn graph(seed: u64) -> u64 {
        let mut r = rng(seed);
        let mut adj: Vec<Vec<(u32, u32)>> = (0..NODES).map(|_| Vec::new()).collect();
        let labels: Vec<String> = (0..NODES).map(|i| format!("{}{i}", word(&mut r))).collect();
        for _ in 0..NODES * 4 {
            let (a, b) = (r.next_u64() as usize % NODES, r.next_u64() as usize % NODES);
            let w = 1 + (r.next_u64() % 100) as u32;
            adj[a].push((b as u32, w));
            adj[b].push((a as u32, w));
        }
        // BFS.
        let mut hops = vec![u32::MAX; NODES];
        let mut queue = VecDeque::new();
        hops[0] = 0;
        queue.push_back(0usize);
        while let Some(n) = queue.pop_front() {
            for &(m, _) in &adj[n] {
                if hops[m as usize] == u32::MAX {
                    hops[m as usize] = hops[n] + 1;
                    queue.push_back(m as usize);
                }
            }
        }
        // Dijkstra, with the path to each node kept as a String of labels'
        // initials (allocation per improvement).
        let mut dist = vec![u64::MAX; NODES];
        let mut path: Vec<String> = vec![String::new(); NODES];
        let mut heap = BinaryHeap::new();
        dist[0] = 0;
        heap.push(Reverse((0u64, 0u32)));
        while let Some(Reverse((d, n))) = heap.pop() {
            if d > dist[n as usize] {
                continue;
            }
            for &(m, w) in &adj[n as usize] {
                let nd = d + w as u64;
                if nd < dist[m as usize] {
                    dist[m as usize] = nd;
                    let mut p = path[n as usize].clone();
                    p.push_str(&labels[m as usize][..1]);
                    path[m as usize] = p;
                    heap.push(Reverse((nd, m)));
                }
            }
        }
        let reach = hops.iter().filter(|&&h| h != u32::MAX).count() as u64;
        let dsum = dist
            .iter()
            .filter(|&&d| d != u64::MAX)
            .fold(0u64, |a, &d| a.wrapping_add(d));
        let psum = path.iter().fold(0u64, |a, p| a.wrapping_add(hash_str(p)));
        mix(mix(reach, dsum), psum)
    }

    /// `scale` graphs and `scale` rounds of binary trees.
    pub fn run(scale: u32) -> u64 {
        let mut h = 0;
        for round in 0..scale {
            h = mix(h, graph(0x94a9_0000 + round as u64));
            let long_lived = tree(DEPTH);
            let mut d = 4;
            while d <= DEPTH {
                let iterations = 1u64 << (DEPTH - d);
                let mut c = 0;
                for _ in 0..iterations {
                    c += check(&tree(d));
                }
                h = mix(h, c);
                d += 2;
            }
            h = mix(h, check(&long_lived));
        }
        h
    }
}
