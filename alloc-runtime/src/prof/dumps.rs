//! Writing profiles: one at a time (the dump lock), never inside an allocation, and across
//! `fork`.
//!
//! A dump symbolises and encodes, which allocates much and takes the `backtrace` crate's lock.
//! So:
//! - every dump holds [`DUMP_LOCK`], which the `fork` prepare handler takes before any lock of
//!   the allocator (a dump in progress finishes first): a child never starts with the
//!   `backtrace` crate's lock held by a thread it does not have;
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

/// The thread that holds [`DUMP_LOCK`] for a `fork`, 0 when none, and how many forks it holds
/// it for: a `fork` handler of another library may fork again (its prepare handler runs after
/// ours), and each fork's parent and child handlers run once.
static FORK_HOLDER: AtomicUsize = AtomicUsize::new(0);
/// See [`FORK_HOLDER`].
static FORK_DEPTH: AtomicU32 = AtomicU32::new(0);

/// `fork` prepare handler: waits for a dump in progress, and holds new ones back.
extern "C" fn prepare() {
    let me = crate::lock::this_thread();
    if FORK_HOLDER.load(Ordering::Relaxed) == me {
        FORK_DEPTH.fetch_add(1, Ordering::Relaxed);
        return;
    }
    DUMP_LOCK.raw_lock();
    FORK_HOLDER.store(me, Ordering::Relaxed);
    FORK_DEPTH.store(1, Ordering::Relaxed);
}

/// One fork's end (parent or child): the lock goes once no fork holds it.
fn fork_end() {
    if FORK_HOLDER.load(Ordering::Relaxed) != crate::lock::this_thread() {
        return;
    }
    if FORK_DEPTH.fetch_sub(1, Ordering::Relaxed) == 1 {
        FORK_HOLDER.store(0, Ordering::Relaxed);
        // SAFETY: taken by this thread in `prepare` (in a child: by the thread it is a copy
        // of, the same thread id).
        unsafe { DUMP_LOCK.raw_unlock() };
    }
}

/// `fork` parent handler.
extern "C" fn parent() {
    fork_end();
}

/// `fork` child handler: the dumper thread did not survive the fork; the child gets its own.
extern "C" fn child() {
    fork_end();
    REQUESTED.store(0, Ordering::Relaxed);
    if WANTED.load(Ordering::Relaxed) == 1 && start_dumper().is_err() {
        os::write_stderr(
            b"specalloc: the heap profiler's dump thread could not be started in a forked \
              child; its profile is written at exit only\n",
        );
    }
}

/// Registers the `fork` handlers, after the heap's (so that the prepare handler runs before
/// the heap's, which take the allocator's locks that a dump in progress needs, and the parent
/// and child handlers after). Called by the heap's load-time constructor.
pub(crate) fn on_load() {
    if os::at_fork(prepare, parent, child).is_err() {
        os::write_stderr(
            b"specalloc: could not register the heap profiler's fork handlers; a child forked \
              while a profile is being written may hang at exit\n",
        );
    }
}
