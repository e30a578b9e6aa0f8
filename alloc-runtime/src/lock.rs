//! The lock of the allocator's shared structures: spins briefly, then sleeps.
//!
//! The allocator cannot use a lock that allocates, and its critical sections are a few dozen
//! instructions, so a waiter first spins a little (the holder is usually about to release). Past
//! that it sleeps on a futex until the holder wakes it, rather than spinning or yielding: with
//! more threads than cores (thread pools, servers) the holder may be descheduled, and a waiter
//! that kept the CPU busy would only delay it. The lock word is 0 (free), 1 (held) or 2 (held,
//! and a waiter may sleep): the holder's release wakes one sleeper only in state 2, so an
//! uncontended lock makes no system call. It never allocates and is const-constructible, so it
//! can live in a `static`.
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
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

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

/// Free.
const FREE: u32 = 0;
/// Held, no thread sleeping on it.
const HELD: u32 = 1;
/// Held, and a thread may be sleeping on it: the release wakes one.
const CONTENDED: u32 = 2;
/// Spins of a waiter before it sleeps.
const SPINS: u32 = 100;

/// A lock guarding a `T`: spins briefly, then sleeps (see the module docs).
pub(crate) struct SpinLock<T> {
    /// [`FREE`], [`HELD`] or [`CONTENDED`].
    state: AtomicU32,
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
            state: AtomicU32::new(FREE),
            value: UnsafeCell::new(value),
        }
    }

    /// Takes the lock, spinning and then sleeping while another thread holds it.
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T> {
        let owned = self.try_take() || self.lock_contended();
        SpinGuard { lock: self, owned }
    }

    /// Takes the lock if it is free; `None`, without waiting, if any thread holds it.
    #[inline]
    pub(crate) fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        // Not `then_some`: its argument, a guard, is built (and dropped, releasing the lock
        // another thread holds) even when the lock is not taken.
        if self.try_take() {
            Some(SpinGuard {
                lock: self,
                owned: true,
            })
        } else {
            None
        }
    }

    /// Takes the lock without a guard (for `fork`: held across the fork, released in both
    /// processes by [`SpinLock::raw_unlock`]).
    pub(crate) fn raw_lock(&self) {
        if !self.try_take() {
            self.wait_and_take();
        }
    }

    /// Releases a lock taken by [`SpinLock::raw_lock`].
    ///
    /// # Safety
    /// This thread took the lock with `raw_lock` (in a forked child: the parent's thread that
    /// forked, which is the child's only thread).
    pub(crate) unsafe fn raw_unlock(&self) {
        self.release();
    }

    /// One attempt: free to held.
    #[inline(always)]
    fn try_take(&self) -> bool {
        self.state
            .compare_exchange(FREE, HELD, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Releases the lock, waking one sleeper if any may sleep.
    #[inline]
    fn release(&self) {
        if self.state.swap(FREE, Ordering::Release) == CONTENDED {
            crate::os::futex_wake(&self.state, 1);
        }
    }

    /// Takes the lock after a failed first try: `true` once taken; `false` when this thread
    /// is forking and the fork holds it (the guard then leaves it held, see the module docs).
    #[cold]
    fn lock_contended(&self) -> bool {
        if is_forking_thread() {
            // Every lock is held by the fork, for this thread: pass it.
            return false;
        }
        self.wait_and_take();
        true
    }

    /// Spins a little while the lock is held, then sleeps until it is released; takes it.
    #[cold]
    fn wait_and_take(&self) {
        for _ in 0..SPINS {
            if self.state.load(Ordering::Relaxed) == FREE && self.try_take() {
                return;
            }
            core::hint::spin_loop();
        }
        // Mark the lock contended whoever holds it, so that its release wakes us; taking it
        // this way (from free) leaves it marked, which costs the next release one wake-up.
        while self.state.swap(CONTENDED, Ordering::Acquire) != FREE {
            crate::os::futex_wait(&self.state, CONTENDED, None);
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
            self.lock.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SpinLock;

    #[test]
    fn try_lock_fails_on_a_held_lock_and_leaves_it_held() {
        let l = SpinLock::new(5u32);
        let g = l.lock();
        assert!(l.try_lock().is_none());
        assert!(
            l.try_lock().is_none(),
            "a failed try_lock released the holder's lock"
        );
        drop(g);
        let mut g = l.try_lock().expect("a free lock is taken");
        *g += 1;
        drop(g);
        assert_eq!(*l.lock(), 6);
    }
}
