//! The background purge (opt-in): a thread that runs the page-return policy's clock on time,
//! not only on the page heap's own operations.
//!
//! By default there is no background thread: the page heap reads its clock when a span or a
//! medium object is taken or given back (see `policy.rs`), so a program that frees a lot and
//! then only allocates from its threads' caches keeps its free pages resident until it touches
//! the page heap again or calls `collect()`. With the background purge on, a thread of the
//! allocator's own wakes every interval and does what a page-heap operation would: pages free
//! for a purge period are advised (`MADV_FREE`), pages advised for a decommit period go back
//! (`MADV_DONTNEED`), the recent-peak window moves on, and the free pages of freed huge objects
//! decay the same way. Blocks still cached by a thread (its partly used spans) stay that
//! thread's: they are not the page heap's to give back.
//!
//! The thread never allocates (it is made with `pthread_create`, with every signal blocked;
//! sleeps on a futex that a new setting wakes; and only takes the page heap's and the huge
//! cache's locks), so it has no heap and does not count among
//! [`Stats::threads`](crate::Stats::threads). A forked child gets its own (a thread does not
//! survive `fork`). With the purge on, every process that links specalloc (or runs with it
//! preloaded) has this second thread from before `main`: a single-threaded process's calls that
//! need one thread (`unshare(CLONE_NEWUSER)`, entering a user namespace) then fail, which is
//! why it is off by default.
//!
//! Turned on by the environment variable `SPECALLOC_BACKGROUND_PURGE_MS` (the interval in
//! milliseconds; read by a constructor before `main`, so it works for C programs under
//! `LD_PRELOAD` too), or from code with [`set_background_purge`].

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, Ordering};

use crate::os;

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
    if RUNNING.swap(true, Ordering::AcqRel) {
        return Ok(());
    }
    let pinned = loop {
        match os::pin_image() {
            Ok(true) => break true,
            // Another thread is keeping the image loaded right now (it holds no lock of ours).
            Ok(false) => std::thread::yield_now(),
            Err(()) => break false,
        }
    };
    if !pinned {
        RUNNING.store(false, Ordering::Release);
        INTERVAL_MS.store(0, Ordering::Release);
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
        tick();
    }
}

/// What a page-heap operation does for the policy's clock, without one.
fn tick() {
    crate::chunk::run_clock();
    crate::large::cache_trim();
}

/// Turns the background purge on, with a thread that runs the page-return policy's clock every
/// `interval` (`Some`), or off (`None`; the thread stops at its next wake).
///
/// Without it (the default) there is no background thread: free pages are advised and returned
/// on the page heap's own operations (a span or a medium object taken or given back), so a
/// program that frees much memory and then allocates only from its threads' caches, or sleeps,
/// keeps those pages resident until it uses the page heap again or calls [`collect()`](crate::collect()). With it,
/// they go back on time: advised after the purge delay, returned after the decommit delay (see
/// [`PagePolicy`](crate::PagePolicy)), and the free pages of freed huge objects decay the same
/// way. Blocks cached in a thread's own spans stay that thread's.
///
/// Also settable with the environment variable `SPECALLOC_BACKGROUND_PURGE_MS` (the interval in
/// milliseconds, read before `main`; C programs under `LD_PRELOAD` included). The thread does
/// not allocate and does not survive `fork` (a forked child starts its own).
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

/// The background purge's interval, `None` when it is off (see [`set_background_purge`]).
///
/// ```
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
        let _ = ensure_running();
    }
}
