//! A small spin lock for the allocator's shared structures.
//!
//! The allocator cannot use a lock that allocates, and its critical sections are a few dozen
//! instructions, so a test-and-test-and-set lock that yields the CPU after a short spin is enough.
//! It never allocates and is const-constructible, so it can live in a `static`.
//!
//! # `fork`
//!
//! The `fork` prepare handler takes every lock, so that the child never starts inside a critical
//! section, and the parent and child handlers release them. Other `pthread_atfork` handlers run
//! in between on the forking thread: those registered before ours run their prepare after ours
//! and their parent and child handlers before ours, with every lock held, and may allocate. So
//! while a fork is in progress the forking thread passes the locks the fork holds
//! ([`fork_begin`], [`fork_end`]): every other thread is held back by those locks, and the
//! forking thread is inside no critical section (it is in `fork`), so it is the only thread in
//! any of them and mutual exclusion still holds.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The thread (`pthread_self`) that holds every lock for a `fork` in progress, 0 when none does.
static FORKER: AtomicUsize = AtomicUsize::new(0);

/// This thread's `pthread_self`: the same in a forked child as in the thread that forked.
fn this_thread() -> usize {
    // SAFETY: pthread_self has no preconditions and does not allocate.
    unsafe { libc::pthread_self() as usize }
}

/// Called by the `fork` prepare handler once it holds every lock: until [`fork_end`], this
/// thread passes the locks it finds held (see the module docs).
pub(crate) fn fork_begin() {
    FORKER.store(this_thread(), Ordering::Release);
}

/// Called by the `fork` parent and child handlers before they release the locks.
pub(crate) fn fork_end() {
    FORKER.store(0, Ordering::Release);
}

/// Whether this thread is forking and holds every lock (see the module docs).
pub(crate) fn is_forking_thread() -> bool {
    let f = FORKER.load(Ordering::Acquire);
    f != 0 && f == this_thread()
}

/// A spin lock guarding a `T`.
pub(crate) struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out access to `value` to one thread at a time, so sharing the lock is
// as safe as sending the value between threads.
unsafe impl<T: Send> Sync for SpinLock<T> {}
// SAFETY: the lock owns its value.
unsafe impl<T: Send> Send for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// A new unlocked lock.
    pub(crate) const fn new(value: T) -> Self {
        SpinLock {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, spinning and then yielding while another thread holds it.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        let owned = self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
            || self.lock_contended();
        SpinGuard { lock: self, owned }
    }

    /// Takes the lock without a guard (for `fork`: held across the fork, released in both
    /// processes by [`SpinLock::raw_unlock`]).
    pub(crate) fn raw_lock(&self) {
        while self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.wait_unlocked();
        }
    }

    /// Releases a lock taken by [`SpinLock::raw_lock`].
    ///
    /// # Safety
    /// This thread took the lock with `raw_lock` (in a forked child: the parent's thread that
    /// forked, which is the child's only thread).
    pub(crate) unsafe fn raw_unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }

    /// Takes the lock after a failed first try: `true` once taken; `false` when this thread
    /// is forking and the fork holds it (the guard then leaves it held, see the module docs).
    #[cold]
    fn lock_contended(&self) -> bool {
        if is_forking_thread() {
            // Every lock is held by the fork, for this thread: pass it.
            return false;
        }
        loop {
            self.wait_unlocked();
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return true;
            }
        }
    }

    /// Waits until the lock looks free: spins a little, then yields the CPU.
    fn wait_unlocked(&self) {
        let mut spins = 0u32;
        while self.locked.load(Ordering::Relaxed) {
            if spins < 64 {
                core::hint::spin_loop();
                spins += 1;
            } else {
                // sched_yield does not allocate, so it is safe inside the allocator.
                std::thread::yield_now();
            }
        }
    }
}

/// Access to a locked value; unlocks on drop.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Whether this guard took the lock (and releases it); `false` for the forking thread
    /// passing a lock the fork holds.
    owned: bool,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock (or passes it during
        // a fork, when no other thread can hold it: module docs).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while this thread holds the lock (or passes it during
        // a fork, when no other thread can: module docs), and `&mut self` ensures this is the
        // only reference derived from it.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        if self.owned {
            self.lock.locked.store(false, Ordering::Release);
        }
    }
}
