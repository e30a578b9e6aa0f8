//! Out of memory: with the address space capped (`RLIMIT_AS`), impossible and too-large requests
//! return null (or `Err` from `try_reserve`) instead of aborting, an allocation loop ends with a
//! null rather than a crash, and after freeing some memory the program goes on allocating, with
//! every block still holding what was written to it.
//!
//! The cap would starve the test harness and any other test, so the checks run in a child
//! process: the test re-executes its own binary for just this test, with `SPECALLOC_OOM_CHILD`
//! set, and checks that the child exited 0 after printing its marker line.
#![deny(unsafe_op_in_unsafe_fn)]

use std::alloc::Layout;
use std::process::Command;

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

#[test]
fn oom_returns_null_and_recovers() {
    if std::env::var_os(CHILD_ENV).is_some() {
        child();
        return;
    }
    let exe = std::env::current_exe().expect("current_exe");
    let out = Command::new(exe)
        .args(["--exact", "oom_returns_null_and_recovers", "--nocapture"])
        .args(["--test-threads", "1"])
        .env(CHILD_ENV, "1")
        .output()
        .expect("run the child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains(MARKER),
        "no marker from the child\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
}
