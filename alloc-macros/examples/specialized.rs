//! The walkthrough of `docs/macros.md`: a few allocation sites under `#[specialize]`.
//!
//! ```sh
//! cargo run -p specalloc-macros --example specialized              # run it: the per-site report
//! cargo expand -p specalloc-macros --example specialized           # see each rewritten site
//! cargo build --release -p specalloc-macros --example specialized
//! nm -C target/release/examples/specialized | grep specalloc_runtime::routines::   # the routines
//! ```

use specalloc::specialize;

specalloc::install!(static GLOBAL);

const LEN: usize = 16;

#[derive(Debug)]
struct Point {
    x: f64,
    y: f64,
}

/// The boxes and owned string literals are rewritten; `vec!` and `Vec::with_capacity` are left
/// to std.
#[specialize]
fn build(n: usize) -> (Box<Point>, Vec<u32>, Vec<u8>, String, Vec<u8>) {
    let p = Box::new(Point { x: 1.0, y: 2.0 }); // 16 B: size class 2
    let v = Vec::with_capacity(LEN); // std's (inlined here, as without the attribute)
    let z = vec![0u8; 1000]; // `vec!`: std's, zeroed memory from the global allocator
    let s = "size-specialised".to_string(); // 16 B: size class 2
    let r = vec![0u8; n]; // std's
    (p, v, z, s, r)
}

/// The same kinds of sites, counted: `#[specialize(report)]` lists them in `sites()`.
#[specialize(report)]
fn counted() -> (Box<Point>, Box<[u32; 3]>, String) {
    let v = Box::new([1, 2, 3]);
    (
        Box::new(Point { x: 3.0, y: 4.0 }),
        v,
        String::from("counted"),
    )
}

fn main() {
    for _ in 0..100 {
        let (p, v, z, s, r) = build(10);
        assert_eq!(
            (p.x + p.y, v.capacity(), z.len(), s.len(), r.len()),
            (3.0, LEN, 1000, 16, 10)
        );
        let (p, v, s) = counted();
        assert_eq!((p.x + p.y, v.len(), s.len()), (7.0, 3, 7));
    }
    // The counted sites, hottest first, with their share of the hits.
    print!("{}", specalloc::site_report());
}
