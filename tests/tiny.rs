//! The tiny allocator with the allocator installed: objects of one block never overlap and keep
//! their contents; the thread's current block survives frees of its earlier objects; and a block
//! whose objects are all freed, in any order and from any thread, goes back to its span (the
//! tiny-block count returns to where it was).

use std::alloc::Layout;

use specalloc::stats;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// A raw tiny object that may cross threads.
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

/// All the tests run in one function: the tiny-block count is process-wide.
#[test]
fn tiny_blocks() {
    // Warm up (the thread machinery allocates once).
    std::thread::spawn(|| ()).join().unwrap();

    // 1. Objects of 1..=15 bytes share blocks, never overlap, keep their contents.
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
        assert!(w[0].1 <= w[1].0, "tiny objects overlap: {:x?}", w);
    }
    let shared = ranges
        .windows(2)
        .filter(|w| w[0].0 / 16 == w[1].0 / 16)
        .count();
    assert!(shared > 0, "no two objects share a 16-byte block");
    for (o, f) in objs {
        check_and_free(o, f);
    }

    // 2. The current block survives frees of its earlier objects: free the first objects of a
    // fresh block, then keep carving from it.
    let a = alloc(3, 1);
    let b = alloc(3, 2);
    let block = a.0 as usize / 16;
    assert_eq!(
        b.0 as usize / 16,
        block,
        "3-byte objects share the current block"
    );
    check_and_free(a, 1);
    let c = alloc(3, 3);
    assert_eq!(
        c.0 as usize / 16,
        block,
        "the current block was kept after a free"
    );
    check_and_free(b, 2);
    check_and_free(c, 3);

    // 3. Every object freed, in any order, from other threads: the blocks come back.
    let base = stats().tiny_blocks;
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
    // Blocks that died under another thread's free may wait for this thread (their owner) to
    // look at them: the owner re-checks them when it next refills. Allocate a few more tiny
    // blocks' worth to give it the chance, then free those too.
    let extra: Vec<Obj> = (0..5000).map(|_| alloc(15, 9)).collect();
    for o in extra {
        check_and_free(o, 9);
    }
    let after = stats().tiny_blocks;
    assert!(
        after <= base + 1,
        "tiny blocks did not come back: {base} before, {after} after"
    );
}
