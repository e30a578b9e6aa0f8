//! A small spin lock for the allocator's shared structures.
//!
//! The allocator cannot use a lock that allocates, and its critical sections are a few dozen
//! instructions, so a test-and-test-and-set lock that yields the CPU after a short spin is enough.
//! It never allocates and is const-constructible, so it can live in a `static`.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};

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
        if self
            .locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.lock_contended();
        }
        SpinGuard { lock: self }
    }

    /// Takes the lock without a guard (for `fork`: held across the fork, released in both
    /// processes by [`SpinLock::raw_unlock`]).
    pub(crate) fn raw_lock(&self) {
        core::mem::forget(self.lock());
    }

    /// Releases a lock taken by [`SpinLock::raw_lock`].
    ///
    /// # Safety
    /// This thread took the lock with `raw_lock` (in a forked child: the parent's thread that
    /// forked, which is the child's only thread).
    pub(crate) unsafe fn raw_unlock(&self) {
        self.locked.store(false, Ordering::Release);
    }

    #[cold]
    fn lock_contended(&self) {
        let mut spins = 0u32;
        loop {
            while self.locked.load(Ordering::Relaxed) {
                if spins < 64 {
                    core::hint::spin_loop();
                    spins += 1;
                } else {
                    // sched_yield does not allocate, so it is safe inside the allocator.
                    std::thread::yield_now();
                }
            }
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
        }
    }
}

/// Access to a locked value; unlocks on drop.
pub(crate) struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while this thread holds the lock, and `&mut self`
        // ensures this is the only reference derived from it.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}
