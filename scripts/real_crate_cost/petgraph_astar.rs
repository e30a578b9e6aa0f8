//! The workload of `scripts/real_crate_cost.sh`: a 100,000-node petgraph `DiGraphMap` built
//! edge by edge (every node is first seen by `add_edge`) and three A* searches.

use petgraph::algo::astar;
use petgraph::graphmap::DiGraphMap;

specalloc::install!();

fn main() {
    const N: u32 = 100_000;
    let mut g = DiGraphMap::<u32, u32>::new();
    for i in 0..N {
        g.add_edge(i, (i + 1) % N, 1);
        g.add_edge(i, (i.wrapping_mul(7) + 3) % N, 3);
        g.add_edge(i, (i.wrapping_mul(13) + 5) % N, 2);
    }
    for (start, goal) in [(0, N / 2), (17, N - 1), (N / 3, 5)] {
        let found = astar(&g, start, |n| n == goal, |e| *e.2, |_| 0);
        match found {
            Some((cost, path)) => println!("{start} -> {goal}: cost {cost}, {} nodes", path.len()),
            None => println!("{start} -> {goal}: none"),
        }
    }
}
