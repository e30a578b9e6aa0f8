//! Helpers shared by the integration tests (each test file that needs them says `mod common;`).

#![allow(dead_code)]

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use specalloc_runtime::test_hooks::{HEAPLESS_FIRST, SHARED_FROM_THREADS};

/// xorshift64*: deterministic and allocation-free.
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Forks; the child runs `f` and `_exit`s with 0 if it returned true (1 if false or it
/// panicked). Returns the child's pid to the parent.
///
/// The child of a multi-threaded process may only use what `fork` leaves consistent: the
/// allocator under test (its fork handlers make that valid) and no lock another thread held.
pub fn fork_child(f: impl FnOnce() -> bool) -> libc::pid_t {
    // SAFETY: see above; the child never returns into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
    if pid == 0 {
        let ok = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or(false);
        // SAFETY: ends the child without running the parent's exit handlers or unwinding into
        // the test harness.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    pid
}

/// Waits for `pid` for at most `timeout`, polling; kills it if it is still running (a hang:
/// for the fork tests, a deadlock after fork).
pub fn wait_child(pid: libc::pid_t, timeout: Duration) -> Result<libc::c_int, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `pid` is our child; `status` is a valid out-pointer.
        let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if r == pid {
            return Ok(status);
        }
        if r == -1 {
            return Err(format!("waitpid: {}", std::io::Error::last_os_error()));
        }
        if Instant::now() > deadline {
            // SAFETY: `pid` is our child, not yet reaped.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
                libc::waitpid(pid, &mut status, 0);
            }
            return Err(format!(
                "child {pid} hung for {timeout:?}: deadlock after fork"
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Whether a wait status is a normal exit with code 0.
pub fn exited_ok(status: libc::c_int) -> bool {
    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0
}

/// Runs this test binary's test `test` alone in a child process, with the environment variable
/// `var` set to `value` (the test checks it to know it is the child), and returns its output.
pub fn rerun_test(test: &str, var: &str, value: &str) -> std::process::Output {
    let exe = std::env::current_exe().expect("current_exe");
    std::process::Command::new(exe)
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(var, value)
        .output()
        .expect("run the child")
}

/// Panics, with the child's output, unless it exited 0 and printed `marker` on stdout.
pub fn assert_child_ok(out: &std::process::Output, marker: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child failed: {}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(
        stdout.contains(marker),
        "no marker from the child\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

/// A `stats()` snapshot taken once the process is quiet: no more than `threads` threads hold a
/// heap (threads that `join` returned for have finished their thread-local destructors, which
/// may still free, and torn their heaps down) and two snapshots 25 ms apart agree on the
/// allocation and free counts.
pub fn quiet_stats(threads: usize) -> specalloc::Stats {
    let mut prev = specalloc::stats();
    let mut stable = 0;
    for _ in 0..2000 {
        std::thread::sleep(Duration::from_millis(25));
        let s = specalloc::stats();
        if s.threads <= threads && (s.allocs, s.frees) == (prev.allocs, prev.frees) {
            stable += 1;
            if stable == 2 {
                return s;
            }
        } else {
            stable = 0;
        }
        prev = s;
    }
    panic!("the process never became quiet:\n{prev}");
}

/// The work a re-arming key's destructor does in each round (see [`rearming_key`]).
static REARM_WORK: std::sync::OnceLock<fn(usize)> = std::sync::OnceLock::new();
/// The re-arming key.
static REARM_KEY: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// A pthread key whose destructor, at a thread's exit, calls `work(round)` (rounds from 1) and
/// asks for another round, up to round 8 (glibc runs 4: `PTHREAD_DESTRUCTOR_ITERATIONS`), so
/// that it also runs after specalloc tore the thread's heap down. specalloc's own key is made
/// first (by a thread that allocates), so that its destructor runs before this one in each
/// round. A thread arms the key with [`arm_rearming_key`]. One such key per test binary.
pub fn rearming_key(work: fn(usize)) -> libc::pthread_key_t {
    std::thread::spawn(|| drop(Box::new(1u64))).join().unwrap();
    assert!(
        REARM_WORK.set(work).is_ok(),
        "one re-arming key per test binary"
    );
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: `key` is a valid out-pointer and `rearm` has the destructor signature.
    assert_eq!(
        unsafe { libc::pthread_key_create(&mut key, Some(rearm)) },
        0
    );
    REARM_KEY.store(key as usize, std::sync::atomic::Ordering::Relaxed);
    key
}

/// Arms `key` (from [`rearming_key`]) on the calling thread: its destructor runs at the
/// thread's exit, from round 1.
pub fn arm_rearming_key(key: libc::pthread_key_t) {
    // SAFETY: the key is valid; 1 (the dangling address) is the first round.
    unsafe { libc::pthread_setspecific(key, std::ptr::dangling_mut::<libc::c_void>()) };
}

/// The re-arming key's destructor: the round is the key's value.
unsafe extern "C" fn rearm(arg: *mut libc::c_void) {
    let round = arg as usize;
    (REARM_WORK.get().expect("the key's work is set"))(round);
    if round < 8 {
        // SAFETY: the key is valid; a non-null value asks for another round.
        unsafe {
            libc::pthread_setspecific(
                REARM_KEY.load(std::sync::atomic::Ordering::Relaxed) as libc::pthread_key_t,
                (round + 1) as *mut libc::c_void,
            )
        };
    }
}

/// The size of a page of memory on the platforms the tests run on.
pub const PAGE: usize = 4096;

/// Which of the pages of `[start, start + len)` (page-aligned `start`) this process wrote: an
/// anonymous page mapped once, which `/proc/self/pagemap` marks present and exclusively mapped
/// (a page only read maps the kernel's shared zero page, which holds no memory of ours).
pub fn written_pages(start: usize, len: usize) -> Vec<bool> {
    use std::io::{Read, Seek, SeekFrom};
    const PRESENT: u64 = 1 << 63;
    const EXCLUSIVE: u64 = 1 << 56;
    let pages = len.div_ceil(PAGE);
    let mut f = std::fs::File::open("/proc/self/pagemap").expect("/proc/self/pagemap");
    f.seek(SeekFrom::Start((start / PAGE * 8) as u64))
        .expect("seek in pagemap");
    let mut raw = vec![0u8; pages * 8];
    f.read_exact(&mut raw).expect("read pagemap");
    raw.chunks_exact(8)
        .map(|e| {
            let v = u64::from_le_bytes(e.try_into().expect("8 bytes"));
            v & PRESENT != 0 && v & EXCLUSIVE != 0
        })
        .collect()
}

/// `SHARED_FROM_THREADS` threads with a heap of their own, alive until [`Idle::finish`]: with
/// them, at least that many threads have a heap, so that a thread's first allocations come from
/// the shared heap. Each makes more allocations than a thread makes without a heap, so that it
/// takes one whatever other threads hold (a thread's first allocation takes one only while
/// fewer than that many threads have one, and the trimmer's thread, which may hold one, can
/// stop meanwhile).
pub struct Idle {
    hold: Arc<Barrier>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Idle {
    /// Starts the threads and waits until each has allocated.
    pub fn start() -> Idle {
        let hold = Arc::new(Barrier::new(SHARED_FROM_THREADS + 1));
        let threads = (0..SHARED_FROM_THREADS)
            .map(|i| {
                let hold = hold.clone();
                std::thread::spawn(move || {
                    let b = Box::new([i as u8; 40]);
                    let heap: Vec<Box<u64>> =
                        (0..=u64::from(HEAPLESS_FIRST)).map(Box::new).collect();
                    assert_eq!(*heap[1], 1);
                    drop(heap);
                    // A heap of its own; then wait for `finish`.
                    hold.wait();
                    hold.wait();
                    assert_eq!(b[39], i as u8);
                })
            })
            .collect();
        hold.wait();
        Idle { hold, threads }
    }

    /// Lets the threads go and joins them.
    pub fn finish(self) {
        self.hold.wait();
        for t in self.threads {
            t.join().expect("idle thread");
        }
    }
}
