//! The tiny class with the allocator installed: objects of 1 to 4 bytes take 4-byte blocks,
//! packed densely; objects of 1 to 15 bytes never overlap and keep their contents; and objects
//! freed in any order, from any thread, all come back (the live counts return to where they
//! were, and the freed blocks are handed out again).

use std::alloc::Layout;

use specalloc::stats;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// A raw object that may cross threads.
struct Obj(*mut u8, usize);
// SAFETY: the object is owned by whoever holds the `Obj`; the allocator allows frees from any
// thread.
unsafe impl Send for Obj {}

fn alloc(size: usize, fill: u8) -> Obj {
    let l = Layout::from_size_align(size, 1).unwrap();
    let p = specalloc::alloc(l);
    assert!(!p.is_null());
    // SAFETY: `p` holds `size` bytes.
    unsafe { p.write_bytes(fill, size) };
    Obj(p, size)
}

fn check_and_free(o: Obj, fill: u8) {
    // SAFETY: `o` is live and holds `o.1` bytes.
    let bytes = unsafe { std::slice::from_raw_parts(o.0, o.1) };
    assert!(bytes.iter().all(|&b| b == fill), "object contents changed");
    // SAFETY: allocated with this layout, freed once.
    unsafe { specalloc::dealloc(o.0, Layout::from_size_align(o.1, 1).unwrap()) };
}

/// All the checks run in one function: the tiny counts are process-wide.
#[test]
fn tiny_objects() {
    // Warm up (the thread machinery allocates once, also for threads alive at once).
    let warm: Vec<_> = (0..3).map(|_| std::thread::spawn(|| ())).collect();
    warm.into_iter().for_each(|h| h.join().unwrap());
    let base = stats();

    // 1. Objects of 1..=15 bytes never overlap and keep their contents; those of 1 to 4 bytes
    // are 4-byte blocks, packed: most neighbours are exactly 4 bytes apart.
    let objs: Vec<(Obj, u8)> = (0..3000)
        .map(|i| {
            let size = 1 + i % 15;
            (alloc(size, i as u8), i as u8)
        })
        .collect();
    let mut ranges: Vec<(usize, usize)> = objs
        .iter()
        .map(|(o, _)| (o.0 as usize, o.0 as usize + o.1))
        .collect();
    ranges.sort();
    for w in ranges.windows(2) {
        assert!(w[0].1 <= w[1].0, "objects overlap: {:x?}", w);
    }
    let mut tiny: Vec<usize> = objs
        .iter()
        .filter(|(o, _)| o.1 <= 4)
        .map(|(o, _)| o.0 as usize)
        .collect();
    assert!(
        tiny.iter().all(|p| p % 4 == 0),
        "tiny blocks are 4-byte aligned"
    );
    tiny.sort();
    let packed = tiny.windows(2).filter(|w| w[1] - w[0] == 4).count();
    assert!(
        packed * 10 >= tiny.len() * 9,
        "tiny objects are not packed: {packed} of {} neighbours 4 bytes apart",
        tiny.len()
    );
    let mid = stats();
    assert_eq!(mid.tiny_objects, base.tiny_objects + tiny.len() as u64);
    for (o, f) in objs {
        check_and_free(o, f);
    }
    assert_eq!(stats().tiny_objects, base.tiny_objects);

    // 2. A freed tiny block is handed out again (LIFO on its span's free list).
    let a = alloc(3, 1);
    let addr = a.0;
    check_and_free(a, 1);
    let b = alloc(2, 2);
    assert_eq!(b.0, addr, "a freed tiny block is reused first");
    check_and_free(b, 2);

    // 3. Every object freed, in any order, from other threads: they all come back.
    for round in 0..4u32 {
        let mut objs: Vec<(Obj, u8)> = (0..4000u32)
            .map(|i| {
                let f = (i ^ round) as u8;
                (alloc(1 + (i as usize * 7 + round as usize) % 15, f), f)
            })
            .collect();
        // A shuffled order, split across three freeing threads (and this one).
        let mut x = 0x9E37_79B9u32 ^ round;
        for i in (1..objs.len()).rev() {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            objs.swap(i, x as usize % (i + 1));
        }
        let mut parts: Vec<Vec<(Obj, u8)>> = (0..4).map(|_| Vec::new()).collect();
        for (i, o) in objs.into_iter().enumerate() {
            parts[i % 4].push(o);
        }
        let mine = parts.pop().unwrap();
        let handles: Vec<_> = parts
            .into_iter()
            .map(|part| {
                std::thread::spawn(move || {
                    for (o, f) in part {
                        check_and_free(o, f);
                    }
                })
            })
            .collect();
        for (o, f) in mine {
            check_and_free(o, f);
        }
        for h in handles {
            h.join().unwrap();
        }
    }
    let after = stats();
    assert_eq!(after.tiny_objects, base.tiny_objects, "tiny objects leaked");
    // Objects of 5 to 15 bytes live in the 8- and 16-byte classes. (Other classes may move:
    // std allocates lazily for threads of its own.)
    for c in [1, 2] {
        assert_eq!(
            after.classes[c].live_objects, base.classes[c].live_objects,
            "class {c} objects leaked"
        );
    }
}
