//! The rewritten sites allocate in the size classes their types map to: `stats()` counts the
//! allocations per class, and `sites()` (`#[specialize(report)]`) shows each site's route. One
//! test in this binary, since the statistics are process-wide.

use specalloc::size_class::class_of;
use specalloc::{specialize, SiteRoute};

specalloc::install!(static GLOBAL);

const N: usize = 1000;

/// 200 bytes: no other allocation of this test binary is that size.
#[derive(Clone)]
struct Payload([u64; 25]);

type Allocated = (Vec<Box<Payload>>, Vec<Box<[u16; 300]>>, Vec<Box<u32>>);

#[specialize(report)]
fn allocate() -> Allocated {
    let mut boxes = Vec::with_capacity(N);
    let mut vecs = Vec::with_capacity(N);
    let mut tiny = Vec::with_capacity(N);
    for i in 0..N {
        boxes.push(Box::new(Payload([i as u64; 25])));
        vecs.push(Box::new([7u16; 300]));
        tiny.push(Box::new(i as u32));
    }
    (boxes, vecs, tiny)
}

#[test]
fn rewritten_sites_allocate_in_their_classes() {
    let box_class = class_of(200, 8);
    let vec_class = class_of(600, 2);
    assert_ne!(box_class, vec_class);

    let before = specalloc::stats();
    let kept = allocate();
    let after = specalloc::stats();

    let delta = |c: usize| after.classes[c].allocs - before.classes[c].allocs;
    assert!(
        delta(box_class) >= N as u64,
        "class {box_class}: {}",
        delta(box_class)
    );
    assert!(
        delta(vec_class) >= N as u64,
        "class {vec_class}: {}",
        delta(vec_class)
    );
    assert!(after.tiny_allocs - before.tiny_allocs >= N as u64);

    let sites = specalloc::sites();
    for s in &sites {
        println!("{s}");
    }
    let site = |what: &str, size: usize| {
        sites
            .iter()
            .find(|s| s.what == what && s.size == size)
            .unwrap_or_else(|| panic!("no {what} site of {size} B in {sites:#?}"))
    };
    let specialised = specalloc::spec::SIZE_SPECIALIZED;
    let route = |r: SiteRoute| if specialised { r } else { SiteRoute::Generic };
    let b = site("Box::new", 200);
    assert_eq!(
        (b.hits, b.route),
        (N as u64, route(SiteRoute::Class(box_class)))
    );
    let v = site("Box::new", 600);
    assert_eq!(
        (v.hits, v.route),
        (N as u64, route(SiteRoute::Class(vec_class)))
    );
    let t = site("Box::new", 4);
    assert_eq!((t.hits, t.route), (N as u64, route(SiteRoute::Tiny)));
    // `Vec::with_capacity(N)` is left to std: not a site.
    assert!(sites.iter().all(|s| s.what != "Vec::with_capacity"));
    assert_eq!(kept.0[N - 1].0[24], N as u64 - 1);
    drop(kept);
}
