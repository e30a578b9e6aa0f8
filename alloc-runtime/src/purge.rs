//! The background trimmer: a thread that gives memory back on time, not only when the program
//! calls the allocator.
//!
//! Without it, the page heap reads the page-return policy's clock only when a span or a medium
//! object is taken or given back (see `policy.rs`), and a thread heap gives its unused spans
//! back only on its own slow paths: a thread pool that frees its work and blocks keeps it all.
//! The thread wakes every interval and does what those operations would: pages free for a purge
//! period are advised (`MADV_FREE`), pages advised for a decommit period go back
//! (`MADV_DONTNEED`), the recent-peak window moves on, the free pages of freed huge objects decay
//! the same way; and the heaps of threads that entered no slow path since its last wake give
//! back their empty spans, the spans whose blocks other threads freed, their outboxes and their
//! reserves (see `heap/idle.rs`; the spans a thread allocates from stay its own).
//!
//! **By default** the thread starts when a second thread makes its heap (a single-threaded
//! program never has it), wakes every [`AUTO_INTERVAL_MS`] (sooner at first and after a wake
//! that gave back much: [`QUICK_MS`]), and stops when no thread with a heap is left, or when one
//! is left and [`AUTO_LINGER_TICKS`] wakes of the interval passed (the program is
//! single-threaded again: its calls that need one thread, such as `unshare(CLONE_NEWUSER)`, work
//! again). It starts again with the next second thread. `SPECALLOC_BACKGROUND_PURGE_MS`
//! (read by a constructor before `main`, so it works for C programs under `LD_PRELOAD` too) or
//! [`set_background_purge`] set another interval, which then holds from before `main` and for
//! the process's life (0 or `None`: off, the thread never starts).
//!
//! The thread never allocates (it is made with `pthread_create`, with every signal blocked;
//! sleeps on a futex that a new setting wakes; and takes only the page heap's, the huge cache's,
//! the central pools' and the heaps' trim locks, never waiting on a heap's), so it has no heap
//! and does not count among [`Stats::threads`](crate::Stats::threads). A forked child gets its
//! own (a thread does not survive `fork`): at once with a set interval, with its second thread by
//! default.

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use crate::os;

/// The interval of the default trimmer, in milliseconds: the page-return policy's default
/// purge delay, so that pages are advised when they are due and go back within a wake of their
/// decommit delay.
pub(crate) const AUTO_INTERVAL_MS: u64 = 100;
/// Wakes the default trimmer goes on for while one thread with a heap is left (3 s: past the
/// default decommit delay, so what the other threads freed goes back first).
pub(crate) const AUTO_LINGER_TICKS: u32 = 30;

/// The default trimmer's first sleep, in milliseconds. Its sleeps double from this up to the
/// interval, and start again from this after a wake that gave back [`QUICK_WORTH`]: what a
/// program's threads leave behind in a burst (a thread that hands its objects to others and
/// blocks, as a program's main thread after setting up its workers) goes back, for other
/// threads' spans, within milliseconds rather than a few intervals, and a program that gives
/// nothing back gets the interval's wakes after six short ones.
pub(crate) const QUICK_MS: u64 = 5;
/// Bytes a wake must give back (spans of idle heaps and of exited threads' pools) for the next
/// sleep to be [`QUICK_MS`] again.
pub(crate) const QUICK_WORTH: usize = 1 << 20;

/// What the heaps' part of a wake did.
pub(crate) struct HeapPass {
    /// Threads with a heap of their own.
    pub(crate) threads: usize,
    /// Bytes of spans it gave back to the page heap.
    pub(crate) bytes: usize,
}

/// No interval was set: the trimmer starts with the second thread (see the top of this file).
static AUTO: AtomicBool = AtomicBool::new(true);
/// The heaps' part of a wake, registered by the heap layer when it is loaded: returns the
/// threads with a heap of their own (0 until registered: nothing to do).
static HEAP_WORK: AtomicUsize = AtomicUsize::new(0);

/// Registers the heaps' part of a wake (see [`HEAP_WORK`]); its argument says whether the wake
/// is the interval's (not one of the default trimmer's short sleeps).
pub(crate) fn set_heap_work(f: fn(bool) -> HeapPass) {
    HEAP_WORK.store(f as usize, Ordering::Release);
}

/// Runs the heaps' part of a wake (`full`: the interval's); `None` before it is registered.
fn heap_work(full: bool) -> Option<HeapPass> {
    let f = HEAP_WORK.load(Ordering::Acquire);
    if f == 0 {
        return None;
    }
    // SAFETY: only `set_heap_work` stores a non-zero value, a `fn(bool) -> HeapPass`.
    let f: fn(bool) -> HeapPass = unsafe { core::mem::transmute::<usize, fn(bool) -> HeapPass>(f) };
    Some(f(full))
}

/// A thread made its heap, and `active` threads have one now: by default the trimmer starts with
/// the second. The caller holds no lock of the allocator (the thread's creation allocates).
pub(crate) fn heap_made(active: usize) {
    if RUNNING.load(Ordering::Relaxed) {
        return;
    }
    if !AUTO.load(Ordering::Relaxed) {
        // A set interval whose thread stopped when no thread with a heap was left.
        if interval_ms() != 0 {
            let _ = ensure_running_or(false);
        }
        return;
    }
    if active < 2 {
        return;
    }
    if INTERVAL_MS
        .compare_exchange(0, AUTO_INTERVAL_MS, Ordering::AcqRel, Ordering::Relaxed)
        .is_err()
    {
        return;
    }
    // A system that refuses the thread runs the program as before, without it; an image being
    // kept loaded right now (perhaps by a call this thread is making) waits for the next thread.
    if ensure_running_or(false).is_err() {
        let _ =
            INTERVAL_MS.compare_exchange(AUTO_INTERVAL_MS, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// The interval in milliseconds; 0 when off.
static INTERVAL_MS: AtomicU64 = AtomicU64::new(0);
/// Whether a purge thread is running (it clears this when it stops).
static RUNNING: AtomicBool = AtomicBool::new(false);
/// The process that started the purge thread [`RUNNING`] stands for (0: none started yet).
static STARTED_IN: AtomicI32 = AtomicI32::new(0);
/// Bumped by every [`set`], which wakes the thread's sleep on it: a new interval takes effect at
/// once, not after the old one.
static CHANGED: AtomicU32 = AtomicU32::new(0);

/// The interval in force, 0 when off.
pub(crate) fn interval_ms() -> u64 {
    INTERVAL_MS.load(Ordering::Acquire)
}

/// Sets the interval (0 turns the purge off: the thread stops at its next wake) and starts the
/// thread if none runs. `Err(errno)` when the thread cannot be made (the purge is then off).
pub(crate) fn set(interval_ms: u64) -> Result<(), i32> {
    AUTO.store(false, Ordering::Relaxed);
    INTERVAL_MS.store(interval_ms, Ordering::Release);
    CHANGED.fetch_add(1, Ordering::AcqRel);
    os::futex_wake(&CHANGED, i32::MAX);
    if interval_ms == 0 {
        return Ok(());
    }
    ensure_running()
}

/// Starts the thread unless one runs. The image that holds this code is kept loaded first
/// ([`os::pin_image`]): a `dlclose` of a library that holds the runtime must not unmap the
/// thread's code under it.
fn ensure_running() -> Result<(), i32> {
    ensure_running_or(true)
}

/// [`ensure_running`]; `wait`: while the image is being kept loaded by another call, wait for
/// it (else give up, with `EAGAIN`, leaving the interval as it is).
fn ensure_running_or(wait: bool) -> Result<(), i32> {
    if RUNNING.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    let pinned = loop {
        match os::pin_image() {
            Ok(true) => break true,
            // Another thread is keeping the image loaded right now (it holds no lock of ours).
            Ok(false) if wait => std::thread::yield_now(),
            Ok(false) => {
                RUNNING.store(false, Ordering::Release);
                return Err(libc::EAGAIN);
            }
            Err(()) => break false,
        }
    };
    if !pinned {
        RUNNING.store(false, Ordering::Release);
        INTERVAL_MS.store(0, Ordering::Release);
        AUTO.store(false, Ordering::Relaxed);
        return Err(libc::ELIBACC);
    }
    os::spawn_detached(run)
        .inspect(|_| STARTED_IN.store(os::process_id(), Ordering::Release))
        .inspect_err(|_| {
            RUNNING.store(false, Ordering::Release);
            INTERVAL_MS.store(0, Ordering::Release);
        })
}

/// The purge thread: sleeps an interval (the default trimmer: shorter at first and after a wake
/// that gave back much, see [`QUICK_MS`]), runs the clock, again, until the interval is 0.
extern "C" fn run(_: *mut core::ffi::c_void) -> *mut core::ffi::c_void {
    // Wakes of the interval in a row with at most one thread with a heap left.
    let mut alone = 0u32;
    let mut schedule = Schedule::new();
    loop {
        // The change count first, then the interval: a `set` after this load changes the count,
        // so the sleep below ends at once and the loop reads the new interval; one before it is
        // seen in the interval (`set` stores it before counting the change). Read the other way
        // round, a `set(None)` between the two loads left the wake after the sleep to run.
        let seen = CHANGED.load(Ordering::Acquire);
        let ms = interval_ms();
        if ms == 0 {
            RUNNING.store(false, Ordering::Release);
            // A `set` that came between the load and the store saw the thread running and
            // started none: go on for it, unless another thread was started since.
            if interval_ms() == 0 || RUNNING.swap(true, Ordering::AcqRel) {
                return core::ptr::null_mut();
            }
            continue;
        }
        let auto = AUTO.load(Ordering::Relaxed);
        let sleep = schedule.sleep(auto, ms);
        os::futex_wait(&CHANGED, seen, Some(sleep));
        if CHANGED.load(Ordering::Acquire) != seen {
            // A new interval (or off): sleep by it from now.
            schedule = Schedule::new();
            continue;
        }
        let full = schedule.woke(sleep, ms);
        let pass = tick(full);
        if auto {
            schedule.gave_back(pass.as_ref().map_or(0, |p| p.bytes), ms);
        }
        let active = pass.map(|p| p.threads);
        if active == Some(0) {
            // No thread with a heap is left: the thread stops, so that a program whose `main`
            // called `pthread_exit` ends with its last thread (it starts again with the next
            // thread that makes a heap). The default trimmer's interval goes back to 0.
            if AUTO.load(Ordering::Relaxed) {
                let _ = INTERVAL_MS.compare_exchange(ms, 0, Ordering::AcqRel, Ordering::Relaxed);
            }
            RUNNING.store(false, Ordering::Release);
            return core::ptr::null_mut();
        }
        if !full {
            continue;
        }
        alone = if active.is_some_and(|n| n <= 1) {
            alone + 1
        } else {
            0
        };
        let done = alone >= AUTO_LINGER_TICKS;
        // The default trimmer stops (a set interval, which clears `AUTO`, does not): the
        // interval goes back to 0 unless it was set meanwhile, and the loop's top stops it.
        if done && AUTO.load(Ordering::Relaxed) {
            let _ = INTERVAL_MS.compare_exchange(ms, 0, Ordering::AcqRel, Ordering::Relaxed);
            alone = 0;
        }
    }
}

/// The trimmer's sleeps: the interval's, or for the default trimmer shorter ones at first and
/// after a wake that gave back much (see [`QUICK_MS`]).
#[derive(Debug, PartialEq)]
struct Schedule {
    /// The default trimmer's next short sleep, in milliseconds.
    quick: u64,
    /// Milliseconds slept since the last wake that counted as the interval's.
    slept: u64,
}

impl Schedule {
    const fn new() -> Schedule {
        Schedule {
            quick: QUICK_MS,
            slept: 0,
        }
    }

    /// The next sleep for an interval of `ms` (`auto`: the default trimmer's, else a set one,
    /// which is kept as set).
    fn sleep(&self, auto: bool, ms: u64) -> u64 {
        if auto {
            self.quick.min(ms)
        } else {
            ms
        }
    }

    /// A sleep of `slept` ms ended: whether this wake counts as the interval's (the interval's
    /// worth of sleep since the last one that did).
    fn woke(&mut self, slept: u64, ms: u64) -> bool {
        self.slept += slept;
        let full = self.slept >= ms;
        if full {
            self.slept = 0;
        }
        full
    }

    /// The default trimmer's wake gave back `bytes`: short sleeps again from [`QUICK_MS`] after
    /// [`QUICK_WORTH`], else twice as long as the last, up to the interval `ms`.
    fn gave_back(&mut self, bytes: usize, ms: u64) {
        self.quick = if bytes >= QUICK_WORTH {
            QUICK_MS
        } else {
            self.quick.saturating_mul(2).min(ms)
        };
    }
}

/// What a page-heap operation does for the policy's clock, without one, and the heaps' part
/// (`full`: a wake of the interval). Returns what the heaps' part did, when the heap layer is
/// registered.
fn tick(full: bool) -> Option<HeapPass> {
    crate::chunk::run_clock();
    crate::large::cache_trim();
    heap_work(full)
}

/// Sets the background trimmer's interval (`Some`), or turns it off (`None`; the thread stops at
/// its next wake), in place of the default.
///
/// By default a thread of the allocator's own starts when the program's second thread makes its
/// heap, wakes every 100 ms (its first sleeps are shorter, 5 ms doubling up to 100, and they
/// are short again after a wake that gave back a MiB or more: what threads leave behind in a
/// burst goes back within milliseconds), and stops when the program is single-threaded again.
/// Each wake,
/// free pages go back on time (advised after the purge delay, returned after the decommit delay,
/// see [`PagePolicy`](crate::PagePolicy); freed huge objects' pages the same way), and the heaps
/// of threads that have not allocated or freed through a slow path since the last wake give back
/// the spans none of whose blocks is in use, their batches of frees into other threads' spans and
/// their reserves of page runs: a thread pool that frees its work and blocks keeps only the
/// spans each thread allocates from. A set interval holds for the process's life, from a
/// single thread on; `None` keeps memory where it was freed until the program allocates again
/// or calls [`collect()`](crate::collect()).
///
/// Also settable with the environment variable `SPECALLOC_BACKGROUND_PURGE_MS` (the interval in
/// milliseconds, 0 for off; read before `main`, C programs under `LD_PRELOAD` included). The
/// thread does not allocate and does not survive `fork` (a forked child starts its own).
///
/// An error is the system's refusal to make the thread (the purge then stays off).
///
/// ```
/// use std::time::Duration;
/// specalloc_runtime::set_background_purge(Some(Duration::from_millis(50))).unwrap();
/// assert_eq!(specalloc_runtime::background_purge(), Some(Duration::from_millis(50)));
/// specalloc_runtime::set_background_purge(None).unwrap();
/// assert_eq!(specalloc_runtime::background_purge(), None);
/// ```
pub fn set_background_purge(interval: Option<std::time::Duration>) -> std::io::Result<()> {
    // A zero interval would spin: a millisecond at the least.
    let ms = interval.map_or(0, |d| (d.as_millis().min(u64::MAX as u128) as u64).max(1));
    set(ms).map_err(std::io::Error::from_raw_os_error)
}

/// The background trimmer's interval while it runs or is set, `None` when it is off or (by
/// default) not started yet (see [`set_background_purge`]).
///
/// ```
/// // This example's process has one thread with a heap at most: the default trimmer waits.
/// if std::env::var_os("SPECALLOC_BACKGROUND_PURGE_MS").is_none() {
///     assert_eq!(specalloc_runtime::background_purge(), None);
/// }
/// ```
pub fn background_purge() -> Option<std::time::Duration> {
    match interval_ms() {
        0 => None,
        ms => Some(std::time::Duration::from_millis(ms)),
    }
}

/// Reads `SPECALLOC_BACKGROUND_PURGE_MS` and starts the purge when it is set and not 0. A
/// thread that cannot be made leaves the purge off (the program runs as without the setting,
/// after a line on standard error).
extern "C" fn from_env() {
    if let Some(ms) = os::env_usize(c"SPECALLOC_BACKGROUND_PURGE_MS") {
        AUTO.store(false, Ordering::Relaxed);
        if ms > 0 && set(ms as u64).is_err() {
            os::write_stderr(
                b"specalloc: SPECALLOC_BACKGROUND_PURGE_MS is set, but the purge thread could \
                  not be started; the background purge is off\n",
            );
        }
    }
}

/// Runs [`from_env`] before `main` (and, in a shared library, when it is loaded).
#[used]
#[unsafe(link_section = ".init_array")]
static FROM_ENV: extern "C" fn() = from_env;

/// `fork` handlers, in a child once no fork is in progress on its thread (see
/// [`Forks`](crate::lock::Forks)): the thread did not survive the fork; the child gets its
/// own. Once per process: the child of a fork made by another `fork` handler may return through
/// the outer fork's handlers, which must not start a second thread.
pub(crate) fn fork_child() {
    if STARTED_IN.load(Ordering::Acquire) == os::process_id() {
        return;
    }
    if RUNNING.swap(false, Ordering::AcqRel) && interval_ms() != 0 {
        if AUTO.load(Ordering::Relaxed) {
            // The default trimmer: the child has one thread; its second starts the trimmer.
            INTERVAL_MS.store(0, Ordering::Release);
        } else {
            let _ = ensure_running();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the default trimmer's schedule over wakes that gave back `bytes` each, with the
    /// default interval: the sleeps taken and whether each wake was the interval's.
    fn run(bytes: &[usize]) -> Vec<(u64, bool)> {
        let mut s = Schedule::new();
        bytes
            .iter()
            .map(|&b| {
                let sleep = s.sleep(true, AUTO_INTERVAL_MS);
                let full = s.woke(sleep, AUTO_INTERVAL_MS);
                s.gave_back(b, AUTO_INTERVAL_MS);
                (sleep, full)
            })
            .collect()
    }

    #[test]
    fn short_sleeps_double_up_to_the_interval() {
        let sleeps: Vec<u64> = run(&[0; 8]).iter().map(|w| w.0).collect();
        assert_eq!(sleeps, [5, 10, 20, 40, 80, 100, 100, 100]);
    }

    #[test]
    fn a_wake_that_gives_back_much_starts_them_again() {
        let w = run(&[0, 0, 0, QUICK_WORTH, 0, QUICK_WORTH - 1, 0]);
        let sleeps: Vec<u64> = w.iter().map(|w| w.0).collect();
        assert_eq!(sleeps, [5, 10, 20, 40, 5, 10, 20]);
    }

    #[test]
    fn a_wake_counts_as_the_intervals_once_an_interval_was_slept() {
        // 5 + 10 + 20 + 40 = 75, then 80 (155: the interval's), then 100 each.
        let full: Vec<bool> = run(&[0; 7]).iter().map(|w| w.1).collect();
        assert_eq!(full, [false, false, false, false, true, true, true]);
        // Short sleeps again: the interval's once they add up to it.
        let w = run(&[QUICK_WORTH; 22]);
        assert!(w.iter().all(|&(sleep, _)| sleep == QUICK_MS));
        let fulls: Vec<usize> = (0..22).filter(|&i| w[i].1).collect();
        assert_eq!(fulls, [19]);
    }

    #[test]
    fn a_set_interval_is_kept() {
        let mut s = Schedule::new();
        for _ in 0..3 {
            assert_eq!(s.sleep(false, 250), 250);
            assert!(s.woke(250, 250));
        }
        assert_eq!(
            s,
            Schedule {
                quick: QUICK_MS,
                slept: 0
            }
        );
    }
}
