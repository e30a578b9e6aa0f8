//! Writing profiles: one at a time (the dump lock), never inside an allocation, and across
//! `fork`.
//!
//! A dump symbolises and encodes, which allocates much and takes the `backtrace` crate's lock.
//! So:
//! - every dump holds [`DUMP_LOCK`]; a child forked while it was held (a dump in progress, whose
//!   thread the child does not have, with the `backtrace` crate's lock perhaps held too) writes
//!   no profile and says so, rather than waiting forever (a `fork` does not wait for a dump:
//!   overlapping forks must not wait on each other);
//! - a dump asked for by a signal (`SPECALLOC_PROF_SIGNAL`) is written by a thread of the
//!   profiler's own, which the signal handler wakes (an atomic store and a futex wake, both
//!   async-signal-safe): never inside whichever `malloc` comes next, whose stack may be small
//!   and whose caller may be waiting.

use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use crate::lock::{SpinGuard, SpinLock};
use crate::os;

/// Held by every dump.
static DUMP_LOCK: SpinLock<()> = SpinLock::new(());

/// Takes the dump lock (one dump at a time).
pub(crate) fn dump_lock() -> SpinGuard<'static, ()> {
    DUMP_LOCK.lock()
}

/// The function that writes a requested dump (`fn()`, set by the public API), 0 when none.
static DUMPER: AtomicUsize = AtomicUsize::new(0);
/// 1 while a dump is requested and not yet written; the dumper thread sleeps on it.
static REQUESTED: AtomicU32 = AtomicU32::new(0);
/// Whether the dumper thread is wanted (a signal was named), so that a forked child starts
/// its own.
static WANTED: AtomicU32 = AtomicU32::new(0);

/// Sets the function that writes a requested dump.
pub(crate) fn set_dumper(f: fn()) {
    DUMPER.store(f as usize, Ordering::Release);
}

/// Asks the dumper thread for a dump (async-signal-safe: an atomic store and a futex wake).
pub(crate) fn request_dump() {
    REQUESTED.store(1, Ordering::Release);
    os::futex_wake(&REQUESTED, 1);
}

/// The dumper thread: sleeps until a dump is requested, writes it, and sleeps again.
extern "C" fn dumper(_: *mut libc::c_void) -> *mut libc::c_void {
    loop {
        os::futex_wait(&REQUESTED, 0, None);
        if REQUESTED.swap(0, Ordering::AcqRel) == 1 {
            let f = DUMPER.load(Ordering::Acquire);
            if f != 0 {
                // SAFETY: only `set_dumper` stores a nonzero value, a `fn()`.
                let f: fn() = unsafe { core::mem::transmute::<usize, fn()>(f) };
                f();
            }
        }
    }
}

/// Starts the dumper thread (once per process); an error when the system refuses the thread.
pub(crate) fn start_dumper() -> Result<(), libc::c_int> {
    WANTED.store(1, Ordering::Relaxed);
    os::spawn_detached(dumper)
}

/// Set in a forked child whose parent was writing a profile at the fork: the symboliser's lock
/// (the `backtrace` crate's) is held by a thread the child does not have, so the child writes
/// no profile (it would wait forever); it says so instead.
static NO_DUMPS: AtomicU32 = AtomicU32::new(0);

/// Whether this process can write profiles (see [`NO_DUMPS`]).
pub(crate) fn dumps_possible() -> bool {
    NO_DUMPS.load(Ordering::Relaxed) == 0
}

/// `fork` child handler: a dump in progress in the parent is not in the child (see
/// [`NO_DUMPS`]); the dumper thread did not survive the fork, and the child gets its own.
extern "C" fn child() {
    if DUMP_LOCK.is_held() {
        // SAFETY: the thread that held it is not in the child; nothing else will release it.
        unsafe { DUMP_LOCK.raw_unlock() };
        NO_DUMPS.store(1, Ordering::Relaxed);
    }
    REQUESTED.store(0, Ordering::Relaxed);
    if WANTED.load(Ordering::Relaxed) == 1 && start_dumper().is_err() {
        os::write_stderr(
            b"specalloc: the heap profiler's dump thread could not be started in a forked \
              child; its profile is written at exit only\n",
        );
    }
}

/// Registers the `fork` child handler, after the heap's (so that it runs after the heap's,
/// which makes the child's allocator usable). Called by the heap's load-time constructor.
pub(crate) fn on_load() {
    // SAFETY: a handler with the required signature; no prepare or parent handler.
    let r = unsafe { libc::pthread_atfork(None, None, Some(child)) };
    if r != 0 {
        os::write_stderr(
            b"specalloc: could not register the heap profiler's fork handler; a child forked \
              while a profile is being written may hang at exit\n",
        );
    }
}
