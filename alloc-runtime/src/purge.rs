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
//! program never has it), wakes every [`AUTO_INTERVAL_MS`], and stops when no thread with a heap
//! is left, or when one is left and [`AUTO_LINGER_TICKS`] wakes passed (the program is
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

/// No interval was set: the trimmer starts with the second thread (see the top of this file).
static AUTO: AtomicBool = AtomicBool::new(true);
/// The heaps' part of a wake, registered by the heap layer when it is loaded: returns the
/// threads with a heap of their own (0 until registered: nothing to do).
static HEAP_WORK: AtomicUsize = AtomicUsize::new(0);

/// Registers the heaps' part of a wake (see [`HEAP_WORK`]).
pub(crate) fn set_heap_work(f: fn() -> usize) {
    HEAP_WORK.store(f as usize, Ordering::Release);
}

/// Runs the heaps' part of a wake; the threads with a heap, or `None` before it is registered.
fn heap_work() -> Option<usize> {
    let f = HEAP_WORK.load(Ordering::Acquire);
    if f == 0 {
        return None;
    }
    // SAFETY: only `set_heap_work` stores a non-zero value, a `fn() -> usize`.
    let f: fn() -> usize = unsafe { core::mem::transmute::<usize, fn() -> usize>(f) };
    Some(f())
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

/// The purge thread: sleeps an interval, runs the clock, again, until the interval is 0.
extern "C" fn run(_: *mut core::ffi::c_void) -> *mut core::ffi::c_void {
    // Wakes in a row with at most one thread with a heap left.
    let mut alone = 0u32;
    loop {
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
        let seen = CHANGED.load(Ordering::Acquire);
        os::futex_wait(&CHANGED, seen, Some(ms));
        if CHANGED.load(Ordering::Acquire) != seen {
            // A new interval (or off): sleep by it from now.
            continue;
        }
        let active = tick();
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

/// What a page-heap operation does for the policy's clock, without one, and the heaps' part.
/// Returns the threads with a heap, when the heap layer is registered.
fn tick() -> Option<usize> {
    crate::chunk::run_clock();
    crate::large::cache_trim();
    heap_work()
}

/// Sets the background trimmer's interval (`Some`), or turns it off (`None`; the thread stops at
/// its next wake), in place of the default.
///
/// By default a thread of the allocator's own starts when the program's second thread makes its
/// heap, wakes every 100 ms, and stops when the program is single-threaded again. Each wake,
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
