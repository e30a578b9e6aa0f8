//! Out of memory.
//!
//! - Under the default overcommit policy (heuristic, `vm.overcommit_memory = 0`), requests the
//!   machine cannot back (2^36 .. 2^46 bytes where RAM + swap is smaller) return null the way
//!   glibc's `malloc` does, and `Vec::try_reserve` of such sizes reports an error; a huge object
//!   that cannot grow keeps its contents.
//! - With the address space capped (`RLIMIT_AS`), impossible and too-large requests return null
//!   (or `Err` from `try_reserve`) instead of aborting, an allocation loop ends with a null rather
//!   than a crash, and after freeing some memory the program goes on allocating, with every block
//!   still holding what was written to it; freed huge mappings the allocator keeps for reuse are
//!   given back to the OS when it refuses a new mapping.
//!
//! A cap would starve the test harness and any other test, so the capped checks run in a child
//! process: the test re-executes its own binary for just this test, with `SPECALLOC_OOM_CHILD`
//! set to the test's name, and checks that the child exited 0 after printing its marker line.
#![deny(unsafe_op_in_unsafe_fn)]

mod common;

use std::alloc::Layout;

use specalloc::SpecAlloc;

#[global_allocator]
static GLOBAL: SpecAlloc = SpecAlloc;

const CHILD_ENV: &str = "SPECALLOC_OOM_CHILD";
const MARKER: &str = "specalloc-oom-child: all checks passed";
const MIB: usize = 1 << 20;
/// Address space the child may add to what it has when it sets the cap.
const HEADROOM: usize = 256 * MIB;

/// Bytes of address space this process has mapped (`VmSize`).
fn vm_size() -> usize {
    let s = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let line = s
        .lines()
        .find(|l| l.starts_with("VmSize:"))
        .expect("VmSize in /proc/self/status");
    let kb: usize = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmSize value");
    kb * 1024
}

/// Caps this process's address space at `bytes`.
fn cap_address_space(bytes: usize) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid out-pointer for getrlimit.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) }, 0);
    lim.rlim_cur = (bytes as libc::rlim_t).min(lim.rlim_max);
    // SAFETY: a valid rlimit, lowering only the soft limit.
    let r = unsafe { libc::setrlimit(libc::RLIMIT_AS, &lim) };
    assert_eq!(r, 0, "setrlimit: {}", std::io::Error::last_os_error());
}

/// Lifts the cap [`cap_address_space`] set (the soft limit back to the hard one).
fn uncap_address_space() {
    cap_address_space(usize::MAX);
}

/// A live block filled with a pattern of its own.
struct Filled {
    ptr: *mut u8,
    layout: Layout,
    seed: u64,
}

impl Filled {
    /// Allocates and fills a block; `None` when the allocator returns null.
    fn new(size: usize, seed: u64) -> Option<Filled> {
        let layout = Layout::from_size_align(size, 8).unwrap();
        let ptr = specalloc::alloc(layout);
        if ptr.is_null() {
            return None;
        }
        assert_eq!(ptr as usize % 8, 0);
        let mut f = Filled { ptr, layout, seed };
        for (i, w) in f.words_mut().iter_mut().enumerate() {
            *w = i as u64 ^ seed;
        }
        // The bytes past the last whole word.
        for i in size / 8 * 8..size {
            // SAFETY: inside the block.
            unsafe { *ptr.add(i) = seed as u8 ^ i as u8 };
        }
        Some(f)
    }

    fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: the block is live, 8-aligned, at least `size / 8` words long, and owned by
        // this value, borrowed mutably here.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u64, self.layout.size() / 8) }
    }

    fn words(&self) -> &[u64] {
        // SAFETY: as in `words_mut`, borrowed shared.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u64, self.layout.size() / 8) }
    }

    fn intact(&self) -> bool {
        let size = self.layout.size();
        self.words()
            .iter()
            .enumerate()
            .all(|(i, &w)| w == i as u64 ^ self.seed)
            && (size / 8 * 8..size).all(|i| {
                // SAFETY: inside the block.
                unsafe { *self.ptr.add(i) == self.seed as u8 ^ i as u8 }
            })
    }
}

impl Drop for Filled {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with `layout`, freed once.
        unsafe { specalloc::dealloc(self.ptr, self.layout) };
    }
}

/// Allocates `size`-byte blocks until the allocator returns null (at most `max`); returns them.
fn exhaust(size: usize, max: usize, seed: u64) -> Vec<Filled> {
    let mut v = Vec::with_capacity(max);
    for i in 0..max {
        match Filled::new(size, seed + i as u64) {
            Some(f) => v.push(f),
            None => return v,
        }
    }
    panic!(
        "{max} blocks of {size} bytes and still no null: the address-space cap is not in effect"
    );
}

fn child() {
    cap_address_space(vm_size() + HEADROOM);

    // Impossible or too-large requests: null, not an abort.
    for (size, align) in [(1usize << 40, 8), (1 << 40, 4096), (HEADROOM * 2, 8)] {
        let layout = Layout::from_size_align(size, align).unwrap();
        assert!(specalloc::alloc(layout).is_null(), "alloc({size}, {align})");
        assert!(
            specalloc::alloc_zeroed(layout).is_null(),
            "alloc_zeroed({size}, {align})"
        );
    }
    let near_max = Layout::from_size_align(isize::MAX as usize - 4095, 4096).unwrap();
    assert!(specalloc::alloc(near_max).is_null());
    let mut v: Vec<u8> = Vec::new();
    assert!(v.try_reserve(1 << 40).is_err());
    assert!(v.try_reserve_exact(HEADROOM * 2).is_err());
    v.extend_from_slice(b"still usable");
    assert!(v.try_reserve(HEADROOM * 2).is_err());
    assert_eq!(v, b"still usable");
    // A failed growth leaves the block as it was.
    let small = Filled::new(1000, 77).unwrap();
    // SAFETY: a live block of `small.layout`; the new size is far below isize::MAX.
    let grown = unsafe { specalloc::realloc(small.ptr, small.layout, HEADROOM * 2) };
    assert!(grown.is_null());
    assert!(small.intact());

    // 8 MiB blocks until the allocator says no.
    let mut big = exhaust(8 * MIB, 1024, 1 << 32);
    let n = big.len();
    assert!(
        n >= 4,
        "only {n} blocks of 8 MiB fit in {HEADROOM} bytes of headroom"
    );
    assert!(big.iter().all(Filled::intact));

    // Free every other one; the rest keep their contents.
    let mut i = 0;
    big.retain(|_| {
        i += 1;
        i % 2 == 0
    });
    assert!(big.iter().all(Filled::intact));

    // Smaller blocks of every kind fit in what was freed.
    let mut smaller: Vec<Filled> = Vec::new();
    for k in 0..200u64 {
        smaller.push(Filled::new(64 * 1024 + k as usize, 2 << 32 | k).expect("medium block"));
    }
    for k in 0..20_000u64 {
        smaller.push(Filled::new(24 + (k as usize % 1000), 3 << 32 | k).expect("small block"));
    }
    let tiny: Vec<Box<[u8; 3]>> = (0..10_000).map(|i| Box::new([i as u8; 3])).collect();
    let again = Filled::new(8 * MIB, 4 << 32).expect("an 8 MiB block after freeing half");
    assert!(big.iter().all(Filled::intact), "an 8 MiB block changed");
    assert!(
        smaller.iter().all(Filled::intact),
        "a smaller block changed"
    );
    assert!(again.intact());
    assert!(tiny.iter().enumerate().all(|(i, b)| **b == [i as u8; 3]));
    assert!(small.intact());

    // Exhaust the size classes too (chunks of the page heap): null again, not an abort.
    let pages = exhaust(4096, 100_000, 5 << 32);
    assert!(!pages.is_empty());
    assert!(pages.iter().all(Filled::intact));
    assert!(big.iter().all(Filled::intact));
    drop(pages);
    // Freed class memory is reused.
    let reuse: Vec<Filled> = (0..1000u64)
        .map(|k| Filled::new(4096, 6 << 32 | k).expect("4 KiB block after freeing"))
        .collect();
    assert!(reuse.iter().all(Filled::intact));
    assert!(smaller.iter().all(Filled::intact));

    drop((reuse, smaller, tiny, again, big, small));
    let s = specalloc::stats();
    assert!(s.allocs >= s.frees);
    println!("{MARKER} ({n} blocks of 8 MiB before the first null)");
}

/// Runs `test` (this binary's test of that name) in a child process with `SPECALLOC_OOM_CHILD`
/// set, and checks that it exited 0 after printing the marker.
fn run_child(test: &str) {
    let out = common::rerun_test(test, CHILD_ENV, test);
    common::assert_child_ok(&out, MARKER);
}

/// Whether this process is the child started by [`run_child`] for `test`.
fn is_child(test: &str) -> bool {
    std::env::var(CHILD_ENV).is_ok_and(|v| v == test)
}

#[test]
fn oom_returns_null_and_recovers() {
    if is_child("oom_returns_null_and_recovers") {
        child();
        return;
    }
    run_child("oom_returns_null_and_recovers");
}

/// The kernel's overcommit policy (`vm.overcommit_memory`): 0 heuristic (the default),
/// 1 always, 2 strict accounting.
fn overcommit_mode() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/vm/overcommit_memory")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Whether glibc's `malloc` refuses `size` bytes on this machine.
fn glibc_refuses(size: usize) -> bool {
    // SAFETY: plain malloc/free of glibc's own heap, freed at once.
    unsafe {
        // black_box: LLVM knows malloc and would fold away an unused malloc/free pair, taking
        // the pointer for non-null.
        let p = std::hint::black_box(libc::malloc(std::hint::black_box(size)));
        libc::free(p);
        p.is_null()
    }
}

/// The sizes the review found mapped where glibc returns null.
const IMPOSSIBLE_SHIFTS: [u32; 4] = [36, 40, 44, 46];

#[test]
fn requests_the_machine_cannot_back_return_null_like_glibc() {
    if overcommit_mode() == Some(1) {
        println!(
            "vm.overcommit_memory = 1: every mapping is granted, to glibc too; nothing to check"
        );
        return;
    }
    // 2^46 bytes (64 TiB) is more than any machine's RAM + swap: a check that refuses nothing
    // would be vacuous.
    assert!(glibc_refuses(1 << 46), "glibc's malloc granted 2^46 bytes");
    let mut checked = 0;
    for shift in IMPOSSIBLE_SHIFTS {
        let size = 1usize << shift;
        if !glibc_refuses(size) {
            continue;
        }
        checked += 1;
        for align in [8, 4096, 2 << 20] {
            let layout = Layout::from_size_align(size, align).unwrap();
            let p = specalloc::alloc(layout);
            assert!(
                p.is_null(),
                "alloc(2^{shift}, {align}) = {p:?}; glibc returns null"
            );
            let p = specalloc::alloc_zeroed(layout);
            assert!(p.is_null(), "alloc_zeroed(2^{shift}, {align}) = {p:?}");
        }
        // Growing a huge object (a mapping of its own, grown with mremap) to that size fails
        // too, and the object keeps its contents.
        let big = Filled::new(3 * MIB, u64::from(shift)).expect("a 3 MiB block");
        // SAFETY: a live block of `big.layout`; the new size is below isize::MAX.
        let grown = unsafe { specalloc::realloc(big.ptr, big.layout, size) };
        assert!(grown.is_null(), "realloc(3 MiB -> 2^{shift}) = {grown:?}");
        assert!(big.intact());
    }
    assert!(checked >= 1);
}

#[test]
fn try_reserve_of_impossible_sizes_is_err() {
    if overcommit_mode() == Some(1) {
        println!(
            "vm.overcommit_memory = 1: every mapping is granted, to glibc too; nothing to check"
        );
        return;
    }
    assert!(glibc_refuses(1 << 45), "glibc's malloc granted 2^45 bytes");
    let mut v: Vec<u8> = Vec::new();
    assert!(v.try_reserve(1 << 45).is_err());
    assert!(v.try_reserve_exact(1 << 45).is_err());
    // From an existing small, medium and huge block: the growth fails and the contents stay.
    for len in [100, 200 * 1024, 5 * MIB] {
        let mut v: Vec<u8> = (0..len).map(|i| i as u8).collect();
        assert!(
            v.try_reserve(1 << 45).is_err(),
            "try_reserve from {len} bytes"
        );
        assert!(v.try_reserve_exact(1 << 45).is_err());
        assert!(v.iter().enumerate().all(|(i, &b)| b == i as u8));
        v.push(1);
        assert_eq!(v.len(), len + 1);
    }
    let mut s = String::from("text");
    assert!(s.try_reserve(1 << 45).is_err());
    assert_eq!(s, "text");
    let mut m: std::collections::HashMap<u64, u64> = std::collections::HashMap::new();
    assert!(m.try_reserve(1 << 41).is_err());
    let mut d: std::collections::VecDeque<u64> = std::collections::VecDeque::new();
    assert!(d.try_reserve(1 << 42).is_err());
}

/// Capped address space: freed huge objects' pages kept for reuse must not make later
/// allocations fail. Fills the cap with 8 MiB blocks, frees them all (their pages are kept up to
/// a bound), then asks for nearly as much again, once as huge blocks aligned above a page and
/// once as small blocks (new chunks, which the kept pages cannot serve): both must succeed.
fn cache_child() {
    // Every vector this child fills is reserved before the cap, so that only the allocations
    // under test can meet a null; a failure frees what it holds before panicking.
    let mut aligned: Vec<*mut u8> = Vec::with_capacity(1024);
    let mut small: Vec<Filled> = Vec::with_capacity(64 * 1024);
    cap_address_space(vm_size() + 512 * MIB);
    // 256 MiB in use, so that the bound of the kept pages (the bytes in use) is ~256 MiB.
    let base: Vec<Filled> = (0..4096u64)
        .map(|k| Filled::new(64 * 1024, 7 << 32 | k).expect("64 KiB block"))
        .collect();
    let huge = exhaust(8 * MIB, 1024, 8 << 32);
    let n = huge.len();
    assert!(n >= 16, "only {n} blocks of 8 MiB fit under the cap");
    assert!(huge.iter().all(Filled::intact));
    drop(huge);
    let cached = specalloc::stats().large_cache_bytes;
    assert!(
        cached > 0,
        "the cache kept nothing: this test checks nothing"
    );

    // Huge blocks aligned above a page.
    let layout = Layout::from_size_align(8 * MIB, 64 * 1024).unwrap();
    for k in 0..n - 1 {
        let p = specalloc::alloc(layout);
        if p.is_null() {
            let held = specalloc::stats().large_cache_bytes;
            for &p in &aligned {
                // SAFETY: allocated above with `layout`, freed once.
                unsafe { specalloc::dealloc(p, layout) };
            }
            panic!(
                "aligned 8 MiB block {k} of {}: null while the cache holds {held} bytes \
                 (it held {cached} after the first fill)",
                n - 1
            );
        }
        // SAFETY: a fresh block of 8 MiB.
        unsafe { p.write_bytes(k as u8, 8 * MIB) };
        aligned.push(p);
    }
    for (k, &p) in aligned.iter().enumerate() {
        // SAFETY: a live block of 8 MiB, filled above.
        let s = unsafe { std::slice::from_raw_parts(p, 8 * MIB) };
        assert!(s.iter().all(|&b| b == k as u8));
        // SAFETY: allocated above with `layout`, freed once.
        unsafe { specalloc::dealloc(p, layout) };
    }

    // Small blocks (new chunks of the page heap) in the space the huge blocks left, less 16 MiB
    // for chunk headers and alignment; the checked mode maps a side bitmap of 1/8 of each chunk.
    let mut want = (n - 1) * 8 * MIB - 16 * MIB;
    if cfg!(feature = "checked") {
        want = want / 9 * 8;
    }
    let count = want / (16 * 1024);
    assert!(count <= small.capacity());
    for k in 0..count {
        let Some(f) = Filled::new(16 * 1024, 9 << 32 | k as u64) else {
            let held = specalloc::stats().large_cache_bytes;
            drop(small);
            panic!("16 KiB block {k} of {count}: null while the cache holds {held} bytes");
        };
        small.push(f);
    }
    assert!(small.iter().all(Filled::intact));
    assert!(base.iter().all(Filled::intact));
    println!("{MARKER} ({n} blocks of 8 MiB under the cap)");
}

#[test]
fn cached_huge_mappings_do_not_cause_oom_under_a_cap() {
    if is_child("cached_huge_mappings_do_not_cause_oom_under_a_cap") {
        cache_child();
        return;
    }
    run_child("cached_huge_mappings_do_not_cause_oom_under_a_cap");
}

/// A thread whose refill finds no memory first gives back the runs of pages it reserved for
/// new spans of another length, and is served from them.
fn reserve_child() {
    let others = specalloc::stats().reserved;
    std::thread::spawn(move || {
        let big = Layout::from_size_align(3072, 8).unwrap();
        let small = Layout::from_size_align(1024, 8).unwrap();
        let mut keep: Vec<(Layout, *mut u8)> = Vec::with_capacity(1 << 20);
        // Spans of 3 KiB blocks until this thread holds runs of their length in reserve.
        while specalloc::stats().reserved == others {
            assert!(
                keep.len() < 1 << 16,
                "no reserve after 65,536 blocks of 3 KiB"
            );
            let p = specalloc::alloc(big);
            assert!(!p.is_null());
            keep.push((big, p));
        }
        let held = specalloc::stats().reserved - others;
        // No new chunk fits under the cap.
        cap_address_space(vm_size() + 2 * MIB);
        // Spans of 1 KiB blocks (runs of another length) until the page heap has none.
        let mut n = 0usize;
        loop {
            assert!(keep.len() < keep.capacity());
            let p = specalloc::alloc(small);
            if p.is_null() {
                break;
            }
            // SAFETY: a fresh block of 1 KiB.
            unsafe { p.write_bytes(0x5a, 1024) };
            keep.push((small, p));
            n += 1;
        }
        let left = specalloc::stats().reserved - others;
        for (l, p) in keep {
            // SAFETY: allocated above with `l`, freed once.
            unsafe { specalloc::dealloc(p, l) };
        }
        // A failure's report (and its backtrace) needs memory.
        uncap_address_space();
        assert_eq!(
            left, 0,
            "1 KiB blocks ran out after {n} while this thread held {left} bytes of runs in reserve \
             ({held} at the cap)"
        );
        println!("{MARKER} ({n} blocks of 1 KiB under the cap, {held} bytes reserved before)");
    })
    .join()
    .unwrap();
}

#[test]
fn a_refill_under_a_cap_takes_the_runs_its_thread_reserved() {
    if is_child("a_refill_under_a_cap_takes_the_runs_its_thread_reserved") {
        reserve_child();
        return;
    }
    run_child("a_refill_under_a_cap_takes_the_runs_its_thread_reserved");
}
