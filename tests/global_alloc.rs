//! specalloc as the process's global allocator: boundaries, alignment, zeroing, resizing,
//! non-overlap, impossible requests, and ordinary collections on top of it.
//!
//! The tests of this binary run in parallel on several threads and statistics are global, so the
//! statistics test here compares only counters that other threads cannot move backwards; exact
//! accounting is checked in `tests/stress.rs`, whose single test has its binary to itself.
#![deny(unsafe_op_in_unsafe_fn)]

mod common;

use common::Rng;
use std::alloc::{GlobalAlloc, Layout};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::rc::Rc;
use std::sync::{mpsc, Arc};

use specalloc::size_class::{
    class_align, class_of, class_size, CLASS_SIZE, MAX_SMALL_SIZE, NUM_CLASSES, PAGE_SIZE,
};
use specalloc::SpecAlloc;

#[global_allocator]
static GLOBAL: SpecAlloc = SpecAlloc;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// The pattern byte at offset `i` of a block tagged `seed`: depends on both, so a block that
/// overlaps another, or a copy that lands at the wrong offset, shows up.
fn pat(seed: u64, i: usize) -> u8 {
    ((seed >> ((i & 7) * 8)) as u8) ^ ((i >> 3) as u8) ^ ((i >> 11) as u8)
}

/// Writes the pattern of `seed` over `[from, to)`.
///
/// # Safety
/// `p` must be valid for writes of `to` bytes.
unsafe fn fill_range(p: *mut u8, from: usize, to: usize, seed: u64) {
    for i in from..to {
        // SAFETY: `i < to`, and the caller guarantees `to` writable bytes.
        unsafe { p.add(i).write(pat(seed, i)) };
    }
}

/// Writes the pattern of `seed` over `[0, len)`.
///
/// # Safety
/// `p` must be valid for writes of `len` bytes.
unsafe fn fill(p: *mut u8, len: usize, seed: u64) {
    // SAFETY: forwarded from the caller.
    unsafe { fill_range(p, 0, len, seed) }
}

/// Panics unless `[0, len)` holds the pattern of `seed`.
///
/// # Safety
/// `p` must be valid for reads of `len` bytes, all initialised.
unsafe fn check(p: *const u8, len: usize, seed: u64, what: &str) {
    // SAFETY: the caller guarantees `len` initialised, readable bytes.
    let s = unsafe { std::slice::from_raw_parts(p, len) };
    if let Some(i) = (0..len).find(|&i| s[i] != pat(seed, i)) {
        panic!(
            "{what}: byte {i} of {len} at {p:p} is {:#04x}, expected {:#04x}",
            s[i],
            pat(seed, i)
        );
    }
}

/// Panics unless `[0, len)` reads zero.
///
/// # Safety
/// `p` must be valid for reads of `len` bytes, all initialised.
unsafe fn check_zero(p: *const u8, len: usize, what: &str) {
    // SAFETY: the caller guarantees `len` initialised, readable bytes.
    let s = unsafe { std::slice::from_raw_parts(p, len) };
    if let Some(i) = s.iter().position(|&b| b != 0) {
        panic!(
            "{what}: byte {i} of {len} at {p:p} is {:#04x}, not zero",
            s[i]
        );
    }
}

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

/// Allocates through `specalloc::alloc` or, when `via_std`, through `std::alloc::alloc` (the
/// global allocator, i.e. `SpecAlloc`'s `GlobalAlloc` impl). `l.size()` must not be zero.
fn alloc_via(l: Layout, via_std: bool) -> *mut u8 {
    if via_std {
        // SAFETY: callers never pass a zero-sized layout.
        unsafe { std::alloc::alloc(l) }
    } else {
        specalloc::alloc(l)
    }
}

/// Frees a block from [`alloc_via`] through the same entry point.
///
/// # Safety
/// `p` was allocated for `l` and is not used any more.
unsafe fn dealloc_via(p: *mut u8, l: Layout, via_std: bool) {
    if via_std {
        // SAFETY: forwarded from the caller.
        unsafe { std::alloc::dealloc(p, l) }
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { specalloc::dealloc(p, l) }
    }
}

/// Sizes around every class boundary: 1, and c - 1, c, c + 1 for every class size c.
fn boundary_sizes() -> Vec<usize> {
    let mut sizes = vec![1];
    for &c in &CLASS_SIZE[1..] {
        let c = c as usize;
        sizes.extend([c - 1, c, c + 1]);
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

#[test]
fn every_class_boundary() {
    assert_eq!(CLASS_SIZE.len(), NUM_CLASSES);
    let mut seed = 1u64;
    for size in boundary_sizes() {
        for align in [1usize, 8, 16] {
            let l = layout(size, align);
            let usable = specalloc::usable_size(l);
            assert!(usable >= size, "usable_size({l:?}) = {usable}");
            let class = class_of(size, align);
            // A small request gets a whole block of its class, except that objects of 1 to 4
            // bytes aligned to at most 4 get a 4-byte block of the tiny class.
            let whole_block = class != 0 && usable == class_size(class);
            if size <= MAX_SMALL_SIZE {
                assert_ne!(class, 0, "{l:?} has no class");
                assert!(
                    whole_block || (size <= 4 && align <= 4 && usable == 4),
                    "{l:?}: usable {usable}"
                );
                assert!(
                    (1..class)
                        .all(|k| class_size(k) < size || !class_size(k).is_multiple_of(align)),
                    "{l:?}: class {class} is not the tightest"
                );
            } else {
                assert_eq!(class, 0, "{l:?}");
                assert_eq!(usable, size, "{l:?}");
            }
            // Several blocks of the layout at once, from both entry points, each filled over its
            // whole usable size: neighbours in a span must not share a byte.
            let mut blocks = Vec::with_capacity(6);
            for i in 0..6 {
                let via_std = i % 2 == 1;
                let p = alloc_via(l, via_std);
                assert!(!p.is_null(), "{l:?} via_std={via_std}");
                assert_eq!(p as usize % align, 0, "{l:?} at {p:p}");
                if whole_block {
                    // A class's blocks all have the class's natural alignment.
                    assert_eq!(p as usize % class_align(class), 0, "{l:?} at {p:p}");
                }
                seed += 1;
                // SAFETY: the block is live and at least `usable` bytes long.
                unsafe { fill(p, usable, seed) };
                blocks.push((p, seed, via_std));
            }
            for &(p, s, _) in &blocks {
                // SAFETY: filled above, still live.
                unsafe { check(p, usable, s, &format!("{l:?}")) };
            }
            for (p, _, via_std) in blocks {
                // SAFETY: allocated above for `l`, freed once.
                unsafe { dealloc_via(p, l, via_std) };
            }
        }
    }
}

#[test]
fn every_power_of_two_alignment() {
    let sizes = [1, 8, 24, 100, 4096, 5000, 32768, 40000, 300_000, 2 * MIB];
    let mut aligns: Vec<usize> = (0..=16).map(|s| 1 << s).collect();
    aligns.extend([MIB, 4 * MIB]);
    let mut seed = 0x1000u64;
    for &align in &aligns {
        let mut live = Vec::new();
        for (k, &size) in sizes.iter().enumerate() {
            let l = layout(size, align);
            let p = match k % 3 {
                0 => specalloc::alloc(l),
                // SAFETY: the layout is not zero-sized.
                1 => unsafe { std::alloc::alloc(l) },
                _ => specalloc::alloc_zeroed(l),
            };
            assert!(!p.is_null(), "{l:?}");
            assert_eq!(p as usize % align, 0, "{l:?} at {p:p}");
            assert!(specalloc::usable_size(l) >= size);
            if k % 3 == 2 {
                // SAFETY: a zeroed block of `size` bytes.
                unsafe { check_zero(p, size, &format!("alloc_zeroed {l:?}")) };
            }
            seed += 1;
            // SAFETY: the block is live and `size` bytes long.
            unsafe {
                p.add(size - 1).write(0x5A);
                p.write(0xA5);
                assert_eq!(p.read(), 0xA5);
                if size > 1 {
                    assert_eq!(p.add(size - 1).read(), 0x5A);
                }
                fill(p, size, seed);
            }
            live.push((p, l, seed));
        }
        // All coexist: every block still holds its own pattern.
        for &(p, l, s) in &live {
            // SAFETY: filled above, still live.
            unsafe { check(p, l.size(), s, &format!("{l:?}")) };
        }
        // Moving blocks keeps their alignment: grow the 5000-byte block past 1 MiB, then shrink
        // it into a small class.
        let (p, l, s) = live[5];
        assert_eq!(l.size(), 5000);
        // SAFETY: `p` is live for `l`; the new sizes are valid for the alignment.
        unsafe {
            let q = specalloc::realloc(p, l, 1536 * KIB);
            assert!(
                !q.is_null() && (q as usize).is_multiple_of(align),
                "grow {l:?} -> {q:p}"
            );
            check(q, 5000, s, "realloc grow");
            fill_range(q, 5000, 1536 * KIB, s);
            let l2 = layout(1536 * KIB, align);
            let r = std::alloc::realloc(q, l2, 64);
            assert!(
                !r.is_null() && (r as usize).is_multiple_of(align),
                "shrink {l2:?} -> {r:p}"
            );
            check(r, 64, s, "realloc shrink");
            live[5] = (r, layout(64, align), s);
        }
        for (p, l, s) in live {
            // SAFETY: still live; checked one last time, then freed once for its layout.
            unsafe {
                check(p, l.size(), s, &format!("{l:?} before free"));
                specalloc::dealloc(p, l);
            }
        }
    }
}

#[test]
fn zeroed_memory_reads_zero() {
    let mut sizes: Vec<usize> = (1..=128).collect();
    sizes.extend(boundary_sizes());
    sizes.extend([40000, 100_000, MIB - 1, MIB, MIB + 1, 3 * MIB + 5]);
    for align in [1usize, 8, 64, 4096, 16384] {
        for &size in &sizes {
            let l = layout(size, align);
            let p = specalloc::alloc_zeroed(l);
            assert!(!p.is_null() && (p as usize).is_multiple_of(align), "{l:?}");
            // SAFETY: a zeroed block of `size` bytes; dirtied before it is freed so that the
            // next zeroed request of a nearby size is likely to get dirty memory.
            unsafe {
                check_zero(p, size, &format!("alloc_zeroed {l:?}"));
                p.write_bytes(0xEE, size);
                specalloc::dealloc(p, l);
            }
        }
    }
}

#[test]
fn zeroed_after_reuse_of_dirty_blocks() {
    let cases = [
        (1, 1),
        (8, 8),
        (24, 8),
        (100, 4),
        (1000, 8),
        (4096, 16),
        (5000, 64),
        (8192, 8192),
        (32768, 8),
        (40000, 8),
        (300_000, 8),
        (2 * MIB, 8),
        (100, 65536),
    ];
    for (size, align) in cases {
        let l = layout(size, align);
        let n = if size <= MAX_SMALL_SIZE { 64 } else { 6 };
        let mut dirty = HashSet::new();
        for round in 0..4 {
            let blocks: Vec<*mut u8> = (0..n)
                .map(|i| {
                    let p = if round == 0 {
                        specalloc::alloc(l)
                    } else if i % 2 == 0 {
                        specalloc::alloc_zeroed(l)
                    } else {
                        // SAFETY: not zero-sized.
                        unsafe { std::alloc::alloc_zeroed(l) }
                    };
                    assert!(!p.is_null() && (p as usize).is_multiple_of(align), "{l:?}");
                    p
                })
                .collect();
            let mut reused = 0;
            for &p in &blocks {
                if round > 0 {
                    reused += dirty.contains(&(p as usize)) as usize;
                    // SAFETY: a zeroed block of `size` bytes.
                    unsafe { check_zero(p, size, &format!("round {round}, {l:?}")) };
                }
                dirty.insert(p as usize);
                // SAFETY: the block is live and `size` bytes long.
                unsafe { p.write_bytes(0xFF, size) };
            }
            if round > 0 && size <= MAX_SMALL_SIZE && align <= PAGE_SIZE {
                // Freed small blocks (tiny ones too) go back on this thread's free lists, so the
                // next requests of the class get (some of) them again.
                assert!(reused > 0, "{l:?}: no dirty block was reused");
            }
            for p in blocks {
                // SAFETY: allocated above for `l`.
                unsafe { specalloc::dealloc(p, l) };
            }
        }
    }

    // Pages dirtied by one class, given back to the page heap, then used by another class or by
    // a medium object.
    let l256 = layout(256, 8);
    let blocks: Vec<*mut u8> = (0..4000)
        .map(|_| {
            let p = specalloc::alloc(l256);
            assert!(!p.is_null());
            // SAFETY: 256 live bytes.
            unsafe { p.write_bytes(0xFF, 256) };
            p
        })
        .collect();
    for p in blocks {
        // SAFETY: allocated above for `l256`.
        unsafe { specalloc::dealloc(p, l256) };
    }
    let others = [layout(448, 8), layout(2048, 8), layout(40000, 8)];
    let mut blocks = Vec::new();
    for i in 0..600 {
        let l = others[i % others.len()];
        let p = specalloc::alloc_zeroed(l);
        assert!(!p.is_null());
        // SAFETY: a zeroed block of `l.size()` bytes.
        unsafe { check_zero(p, l.size(), &format!("recycled pages, {l:?}")) };
        blocks.push((p, l));
    }
    for (p, l) in blocks {
        // SAFETY: allocated above for `l`.
        unsafe { specalloc::dealloc(p, l) };
    }

    // `vec![0; n]` asks the global allocator for zeroed memory.
    for n in [10, 1000, 30000, 200_000, 3 * MIB] {
        let mut v = vec![0u8; n];
        assert!(v.iter().all(|&b| b == 0), "vec![0; {n}]");
        v.fill(0xFF);
        drop(v);
        let v = vec![0u8; n];
        assert!(v.iter().all(|&b| b == 0), "vec![0; {n}] after reuse");
    }
}

/// Grows a block from 1 byte to 8 MiB and shrinks it back to 8 bytes, checking the prefix at
/// every step.
fn grow_and_shrink(align: usize, via_std: bool, seed: u64) {
    let mut size = 1;
    let mut p = alloc_via(layout(size, align), via_std);
    assert!(!p.is_null());
    // SAFETY: one live byte.
    unsafe { fill(p, 1, seed) };
    let step = |p: *mut u8, size: usize, new: usize| -> *mut u8 {
        let l = layout(size, align);
        // SAFETY: `p` is live for `l`; `new` is a valid size for the alignment.
        let q = unsafe {
            if via_std {
                std::alloc::realloc(p, l, new)
            } else {
                specalloc::realloc(p, l, new)
            }
        };
        assert!(!q.is_null(), "realloc {size} -> {new} (align {align})");
        assert_eq!(q as usize % align, 0, "realloc {size} -> {new} at {q:p}");
        // SAFETY: `q` holds `min(size, new)` bytes of the old block; it is `new` bytes long.
        unsafe {
            check(q, size.min(new), seed, &format!("realloc {size} -> {new}"));
            if new > size {
                fill_range(q, size, new, seed);
            }
        }
        q
    };
    let mut visited = Vec::new();
    while size < 8 * MIB {
        let new = (size + size / 2 + 1).min(8 * MIB);
        p = step(p, size, new);
        size = new;
        visited.push(size);
    }
    assert!(visited.iter().any(|&s| s > MAX_SMALL_SIZE && s <= MIB));
    while size > 8 {
        let new = (size * 2 / 3).max(8);
        p = step(p, size, new);
        size = new;
    }
    // SAFETY: `p` holds `size` bytes for this layout.
    unsafe {
        check(p, size, seed, "after shrinking");
        dealloc_via(p, layout(size, align), via_std);
    }
}

#[test]
fn realloc_keeps_contents() {
    for (i, align) in [1usize, 8, 16, 64, 4096, 8192, 16384]
        .into_iter()
        .enumerate()
    {
        grow_and_shrink(align, i % 2 == 1, 0xC0FFEE + i as u64);
    }

    // Vec growth goes through realloc too.
    let n = 3 * MIB + 123;
    let mut v: Vec<u8> = Vec::new();
    for i in 0..n {
        v.push(pat(77, i));
    }
    let check_vec = |v: &[u8]| {
        if let Some(i) = (0..v.len()).find(|&i| v[i] != pat(77, i)) {
            panic!("Vec byte {i} of {} lost", v.len());
        }
    };
    check_vec(&v);
    for keep in [MIB + 7, 100_000, 4000, 100, 5, 0] {
        v.truncate(keep);
        v.shrink_to_fit();
        assert_eq!(v.capacity(), keep);
        check_vec(&v);
    }
    let mut w: Vec<u64> = (0..100_000).collect();
    w.truncate(10);
    w.shrink_to_fit();
    w.extend(10..500_000u64);
    assert!(w.iter().enumerate().all(|(i, &x)| x == i as u64));

    // Resizing within a class (or a medium object's page count) stays in place.
    let l = layout(20, 8);
    let p = specalloc::alloc(l);
    assert!(!p.is_null());
    // SAFETY: `p` is live for each layout in turn; sizes stay in the 24-byte class.
    unsafe {
        fill(p, 20, 5);
        let q = specalloc::realloc(p, l, 24);
        assert_eq!(q, p, "20 -> 24 bytes left its class");
        fill_range(q, 20, 24, 5);
        let r = std::alloc::realloc(q, layout(24, 8), 17);
        assert_eq!(r, p, "24 -> 17 bytes left its class");
        check(r, 17, 5, "in-place realloc");
        specalloc::dealloc(r, layout(17, 8));
    }
    let l = layout(40000, 8);
    let p = specalloc::alloc(l);
    assert!(!p.is_null());
    // SAFETY: as above; 40000, 40960 and 33000 bytes all take 5 pages.
    unsafe {
        fill(p, 40000, 6);
        let q = specalloc::realloc(p, l, 40960);
        assert_eq!(q, p, "40000 -> 40960 bytes moved");
        let r = specalloc::realloc(q, layout(40960, 8), 33000);
        assert_eq!(r, p, "40960 -> 33000 bytes moved");
        check(r, 33000, 6, "in-place medium realloc");
        specalloc::dealloc(r, layout(33000, 8));
    }
}

/// A size from 1 to `max`, skewed small (most under 4 KiB, a few above 32 KiB).
fn skewed_size(rng: &mut Rng, max: usize) -> usize {
    let r = rng.below(100);
    let cap = if r < 90 {
        1 << (1 + rng.below(12))
    } else if r < 99 {
        MAX_SMALL_SIZE
    } else {
        max
    };
    (1 + rng.below(cap)).min(max)
}

#[test]
fn random_blocks_do_not_overlap() {
    const N: usize = 20_000;
    let mut rng = Rng::new(0xFEED);
    let byte_of = |i: usize| (i.wrapping_mul(0x9E37_79B9) >> 7) as u8;
    let mut blocks = Vec::with_capacity(N);
    for i in 0..N {
        let size = skewed_size(&mut rng, 70_000);
        let align = [1, 2, 4, 8, 8, 8, 16, 32][rng.below(8)];
        let l = layout(size, align);
        let via_std = i % 2 == 1;
        let p = alloc_via(l, via_std);
        assert!(!p.is_null() && (p as usize).is_multiple_of(align), "{l:?}");
        // SAFETY: `size` live bytes.
        unsafe { p.write_bytes(byte_of(i), size) };
        blocks.push((p, l, via_std));
    }
    for (i, &(p, l, _)) in blocks.iter().enumerate() {
        // SAFETY: every byte was written above and the block is still live.
        let s = unsafe { std::slice::from_raw_parts(p, l.size()) };
        if let Some(j) = s.iter().position(|&b| b != byte_of(i)) {
            panic!("block {i} ({l:?} at {p:p}) was overwritten at byte {j}");
        }
    }
    // Whole usable ranges are disjoint, not just the requested bytes.
    let mut ranges: Vec<(usize, usize)> = blocks
        .iter()
        .map(|&(p, l, _)| (p as usize, p as usize + specalloc::usable_size(l)))
        .collect();
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        assert!(w[0].1 <= w[1].0, "{:#x?} overlaps {:#x?}", w[0], w[1]);
    }
    // Free in a shuffled order.
    for i in (1..blocks.len()).rev() {
        blocks.swap(i, rng.below(i + 1));
    }
    for (p, l, via_std) in blocks {
        // SAFETY: allocated above for `l` through the same entry point.
        unsafe { dealloc_via(p, l, via_std) };
    }
}

#[test]
fn zero_sized_and_impossible_requests() {
    // A zero-sized layout gets a real, distinct, aligned block.
    let mut seen = HashSet::new();
    let mut blocks = Vec::new();
    for shift in 0..=13 {
        let l = layout(0, 1 << shift);
        assert!(specalloc::usable_size(l) >= 16, "{l:?}");
        for zeroed in [false, true] {
            for _ in 0..8 {
                let p = if zeroed {
                    specalloc::alloc_zeroed(l)
                } else {
                    specalloc::alloc(l)
                };
                assert!(
                    !p.is_null() && (p as usize).is_multiple_of(l.align()),
                    "{l:?}"
                );
                assert!(seen.insert(p as usize), "{l:?}: {p:p} handed out twice");
                // SAFETY: usable_size() bytes are usable.
                unsafe { p.write_bytes(0x11, specalloc::usable_size(l)) };
                blocks.push((p, l));
            }
        }
    }
    // Over-aligned zero-sized layouts: each gets a page of its own (a page run at 64 KiB, a
    // mapping at 4 MiB), so its address is never the start of a neighbouring block or chunk
    // (which checked mode would flag).
    let zero_huge: &[usize] = &[64 * KIB, 4 * MIB];
    for &align in zero_huge {
        let l = layout(0, align);
        let p = specalloc::alloc(l);
        assert!(!p.is_null() && (p as usize).is_multiple_of(align), "{l:?}");
        blocks.push((p, l));
    }
    for (p, l) in blocks {
        // SAFETY: allocated above for `l`.
        unsafe { specalloc::dealloc(p, l) };
    }

    // Sizes no machine can satisfy: null, no crash.
    let impossible = [
        (isize::MAX as usize - 4095, 4096),
        (isize::MAX as usize - 7, 8),
        (isize::MAX as usize, 1),
        (isize::MAX as usize / 2, 16),
        (1 << 62, 8),
        (100, 1 << 62),
        (1 << 60, 1 << 20),
    ];
    for (size, align) in impossible {
        let l = layout(size, align);
        assert!(specalloc::alloc(l).is_null(), "{l:?}");
        assert!(specalloc::alloc_zeroed(l).is_null(), "{l:?} zeroed");
        // Through `std::alloc`, the compiler may drop an allocation whose pointer is only
        // compared with null (and assume it succeeded): `black_box` keeps the call.
        // SAFETY: not zero-sized.
        let p = std::hint::black_box(unsafe { std::alloc::alloc(l) });
        assert!(p.is_null(), "{l:?} via std");
        // SAFETY: as above.
        let p = std::hint::black_box(unsafe { GLOBAL.alloc(l) });
        assert!(p.is_null(), "{l:?} via GlobalAlloc");
    }

    // A failed realloc returns null and leaves the block as it was.
    for (k, size) in [100, 40_000, 2 * MIB].into_iter().enumerate() {
        for align in [8, 16384] {
            let l = layout(size, align);
            let p = specalloc::alloc(l);
            assert!(!p.is_null());
            let seed = 900 + k as u64;
            // SAFETY: `p` is live for `l`; the new size rounded up to the alignment does not
            // exceed isize::MAX.
            unsafe {
                fill(p, size, seed);
                let big = isize::MAX as usize + 1 - align;
                assert!(specalloc::realloc(p, l, big).is_null(), "{l:?} -> {big}");
                let q = std::hint::black_box(std::alloc::realloc(p, l, big));
                assert!(q.is_null(), "{l:?} -> {big} via std");
                check(p, size, seed, "after failed realloc");
                specalloc::dealloc(p, l);
            }
        }
    }

    let mut v: Vec<u8> = Vec::new();
    assert!(v.try_reserve(usize::MAX / 4).is_err());
    assert!(v.try_reserve_exact(isize::MAX as usize - 1).is_err());
    v.extend_from_slice(b"still works");
    assert!(v.try_reserve(usize::MAX / 4).is_err());
    assert_eq!(v, b"still works");
    let mut w: Vec<u64> = Vec::new();
    assert!(w.try_reserve(usize::MAX / 32).is_err());
    let mut s = String::from("x");
    assert!(s.try_reserve(isize::MAX as usize / 2).is_err());
    assert_eq!(s, "x");
}

trait Shape {
    fn area(&self) -> u64;
}

struct Rect(u64, u64);

impl Shape for Rect {
    fn area(&self) -> u64 {
        self.0 * self.1
    }
}

#[test]
fn std_collections_workload() {
    // Boxes, including trait objects and big arrays.
    let boxes: Vec<Box<u64>> = (0..50_000).map(Box::new).collect();
    assert_eq!(boxes.iter().map(|b| **b).sum::<u64>(), 50_000 * 49_999 / 2);
    let shapes: Vec<Box<dyn Shape>> = (1..1000).map(|i| Box::new(Rect(i, 2)) as _).collect();
    assert_eq!(shapes.iter().map(|s| s.area()).sum::<u64>(), 999 * 1000);
    let big = Box::new([7u64; 10_000]);
    assert_eq!(big.iter().sum::<u64>(), 70_000);
    drop(boxes);

    // Strings.
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(&format!("{i},"));
    }
    let parsed: Vec<u64> = text
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect();
    assert_eq!(parsed.len(), 20_000);
    assert_eq!(parsed.iter().sum::<u64>(), 20_000 * 19_999 / 2);

    // HashMap with owned keys and growing values.
    let mut map: HashMap<String, Vec<usize>> = HashMap::new();
    for i in 0..40_000usize {
        map.entry(format!("key-{}", i % 5000)).or_default().push(i);
    }
    assert_eq!(map.len(), 5000);
    for i in (0..5000).step_by(2) {
        assert!(map.remove(&format!("key-{i}")).is_some());
    }
    assert_eq!(map.len(), 2500);
    let total: usize = map.values().map(|v| v.len()).sum();
    assert_eq!(total, 20_000);
    assert_eq!(
        map["key-4999"],
        vec![4999, 9999, 14999, 19999, 24999, 29999, 34999, 39999]
    );

    // BTreeMap with boxed slices of varied sizes.
    let mut tree: BTreeMap<u64, Box<[u8]>> = BTreeMap::new();
    for i in 0..20_000u64 {
        let len = (i % 700) as usize;
        tree.insert(
            i * 7 % 20_011,
            vec![(i % 251) as u8; len].into_boxed_slice(),
        );
    }
    assert_eq!(tree.len(), 20_000);
    for (k, v) in tree.range(1000..1100) {
        let i = (0..20_000u64).find(|i| i * 7 % 20_011 == *k).unwrap();
        assert_eq!(v.len(), (i % 700) as usize);
        assert!(v.iter().all(|&b| b == (i % 251) as u8));
    }
    tree.retain(|k, _| k % 3 == 0);
    assert!(tree.keys().all(|k| k % 3 == 0));

    // VecDeque rotation, Rc sharing.
    let mut dq: VecDeque<String> = (0..10_000).map(|i| i.to_string()).collect();
    for _ in 0..25_000 {
        let s = dq.pop_front().unwrap();
        dq.push_back(s);
    }
    assert_eq!(dq.front().map(String::as_str), Some("5000"));
    let shared = Rc::new(vec![1u32; 1000]);
    let holders: Vec<Rc<Vec<u32>>> = (0..1000).map(|_| Rc::clone(&shared)).collect();
    assert_eq!(Rc::strong_count(&shared), 1001);
    drop(holders);
    assert_eq!(Rc::strong_count(&shared), 1);

    // Collections built on other threads and dropped here (cross-thread frees).
    let (tx, rx) = mpsc::channel();
    let workers: Vec<_> = (0..3u64)
        .map(|t| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                let m: HashMap<u64, String> =
                    (0..20_000).map(|i| (i, format!("{t}:{i}"))).collect();
                tx.send(m).unwrap();
            })
        })
        .collect();
    drop(tx);
    let maps: Vec<HashMap<u64, String>> = rx.iter().collect();
    for w in workers {
        w.join().unwrap();
    }
    assert_eq!(maps.len(), 3);
    for m in &maps {
        assert_eq!(m.len(), 20_000);
        let t = m[&0].split(':').next().unwrap().to_string();
        assert!(m.iter().all(|(i, s)| *s == format!("{t}:{i}")));
    }
    let arc = Arc::new(maps);
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let a = Arc::clone(&arc);
            std::thread::spawn(move || a.iter().map(|m| m.len()).sum::<usize>())
        })
        .collect();
    for r in readers {
        assert_eq!(r.join().unwrap(), 60_000);
    }
}

#[test]
fn stats_count_allocations() {
    // Other tests of this binary allocate and free concurrently, but per-class `allocs` and
    // `frees` only ever grow, so "grew by at least N" is robust; exact figures are checked in
    // tests/stress.rs.
    const N: usize = 500;
    let l = layout(200, 8);
    let c = class_of(200, 8);
    assert_eq!(class_size(c), 208);
    let mut ptrs = Vec::with_capacity(N);
    let s0 = specalloc::stats();
    for _ in 0..N {
        let p = specalloc::alloc(l);
        assert!(!p.is_null());
        ptrs.push(p);
    }
    let s1 = specalloc::stats();
    assert_eq!(s1.classes[c].size, 208);
    assert!(s1.classes[c].allocs >= s0.classes[c].allocs + N as u64);
    assert!(s1.allocs >= s0.allocs + N as u64);
    assert!(s1.classes[c].spans >= 1);
    assert!(s1.bytes_mapped >= N * 208);
    assert!(s1.threads >= 1 && s1.chunks >= 1);
    for p in ptrs.drain(..) {
        // SAFETY: allocated above for `l`.
        unsafe { specalloc::dealloc(p, l) };
    }
    let s2 = specalloc::stats();
    assert!(s2.classes[c].frees >= s1.classes[c].frees + N as u64);
    assert!(s2.frees >= s1.frees + N as u64);

    // Large objects count in the totals too.
    let ls = [layout(100_000, 8), layout(3 * MIB, 8), layout(64, 65536)];
    let big: Vec<*mut u8> = ls.iter().map(|&l| specalloc::alloc(l)).collect();
    let s3 = specalloc::stats();
    assert!(s3.allocs >= s2.allocs + 3);
    for (p, l) in big.into_iter().zip(ls) {
        assert!(!p.is_null());
        // SAFETY: allocated above for `l`.
        unsafe { specalloc::dealloc(p, l) };
    }
    assert!(specalloc::stats().frees >= s3.frees + 3);

    // Relations that hold within any single snapshot (objects outside the size classes, such as
    // large ones, only add to the totals).
    let s = specalloc::stats();
    for (c, cs) in s.classes.iter().enumerate().skip(1) {
        assert_eq!(cs.size, class_size(c));
        assert_eq!(cs.live_objects, cs.allocs.saturating_sub(cs.frees));
    }
    let small_live: u64 = s.classes.iter().map(|c| c.live_objects).sum();
    assert!(s.live_objects >= small_live + s.large_objects, "{s}");
    let small_bytes: usize = s
        .classes
        .iter()
        .map(|c| c.live_objects as usize * c.size)
        .sum();
    assert!(s.bytes_in_use >= small_bytes + s.large_bytes, "{s}");
    let text = s.to_string();
    assert!(text.contains("live objects"), "{text}");
}
