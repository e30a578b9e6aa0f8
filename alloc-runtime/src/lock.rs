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
//! ([`Forks`]): every other thread is held back by those locks, and the forking thread is inside
//! no critical section (it is in `fork`), so it is the only thread in any of them and mutual
//! exclusion still holds. Such a handler may also fork: [`Forks`] keeps which forks hold the
//! locks in this process, and why the child of a fork made inside another's handlers releases
//! them all the same.

use core::cell::UnsafeCell;
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

/// The `fork`s in progress in this process, as the allocator's handlers see them.
///
/// A `fork` handler registered before ours runs while our handlers hold every lock for the fork
/// (its prepare after ours, its parent and child handlers before ours), on the forking thread,
/// which passes the locks. If it forks, that inner fork is made with the locks already held: it
/// is counted in `holding` and takes nothing more. What each process then needs (a stack of
/// forks on one thread: an inner fork's handlers finish before the outer's resume):
///
/// - The process that made the inner fork (the parent, for a nested fork in a prepare or parent
///   handler; the outer fork's child, for one in a child handler) resumes the outer fork's
///   handlers after the inner fork's parent handler: that one leaves the locks held
///   ([`ForkEnd::KeepHeld`]), and the outer fork's parent or child handler releases them.
/// - The inner fork's child is a new process whose only thread is the forking one. Its locks
///   are released as in any child ([`ForkEnd::Release`]), and its delivery count reset, so that
///   threads it starts can allocate (glibc's own allocator, which locks after the prepare
///   handlers and unlocks before the others, lets them). The outer forks still in progress on
///   that thread (`holding` less one) become `released`: if the child returns from the handler
///   that forked, their remaining handlers run in it, and they must not release the locks again
///   (its threads may hold them by then) nor take a fork off the delivery count; they get
///   [`ForkEnd::Released`] and only count themselves off.
///   - Nested fork in a parent handler, or in a child handler: the nested child returning from
///     the handler runs only the rest of the outer fork's parent (or child) handlers, no copy is
///     made in between, and the process stays as the inner child handler left it.
///   - Nested fork in a prepare handler: the nested child returning from the handler goes on to
///     make the outer fork itself, with the locks free (our prepare handler already ran). If it
///     is still single-threaded there (threads it started are joined), that copy is consistent;
///     its child handler ([`ForkEnd::Released`] too: the copy's only thread holds no lock)
///     makes it a new process without releasing anything. Threads that the nested child started
///     and that still allocate while it makes the outer fork are not held back (no handler of
///     ours runs between that handler's return and the copy): the outer fork's child may find
///     a lock they held. The allocator's own thread (the background purge) is therefore started
///     only once no fork is in progress on the forking thread ([`Forks::pending`]).
/// - A second thread present when the outer fork began is held back by the locks in the parent
///   and is gone in every child; a thread of the nested child that forks takes the locks as in
///   any process (it is not the thread whose forks are `released`), and its child, where the
///   forks of the vanished thread never finish, forgets them.
pub(crate) struct Forks {
    /// The thread (`pthread_self`, the same in a forked child) that holds every lock for the
    /// forks counted in `holding`; 0 when none does.
    forker: AtomicUsize,
    /// Forks in progress on `forker` that hold the locks: 1, and one more for each fork a
    /// handler made inside them.
    holding: AtomicUsize,
    /// Forks in progress on `released_on` whose locks this process no longer holds: released by
    /// the child handler of a fork made inside them (see above).
    released: AtomicUsize,
    /// The thread whose forks `released` counts.
    released_on: AtomicUsize,
}

/// What a `fork` parent or child handler does with the allocator's locks.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ForkEnd {
    /// Leave them held: an outer fork in progress on this thread holds them (a parent handler).
    KeepHeld,
    /// Release them: this thread held them for this fork (in a child: a new process).
    Release,
    /// Nothing to release: this fork's locks were released in this process, or in the one it
    /// copied, by the child handler of a fork made inside it.
    Released,
}

/// The forks of this process (see [`Forks`]).
pub(crate) static FORKS: Forks = Forks::new();

impl Forks {
    /// No fork in progress.
    pub(crate) const fn new() -> Self {
        Forks {
            forker: AtomicUsize::new(0),
            holding: AtomicUsize::new(0),
            released: AtomicUsize::new(0),
            released_on: AtomicUsize::new(0),
        }
    }

    /// Whether `me` holds every lock for a fork in progress.
    fn is_forker(&self, me: usize) -> bool {
        let f = self.forker.load(Ordering::Acquire);
        f != 0 && f == me
    }

    /// Prepare handler, first: `true` when `me` already holds every lock for a fork (this fork
    /// is made by a handler inside it), which counts it: the handler takes nothing more.
    pub(crate) fn nested(&self, me: usize) -> bool {
        if !self.is_forker(me) {
            return false;
        }
        self.holding.fetch_add(1, Ordering::Relaxed);
        true
    }

    /// Prepare handler, once it holds every lock: until the fork ends, `me` passes them.
    pub(crate) fn begin(&self, me: usize) {
        self.holding.store(1, Ordering::Relaxed);
        self.forker.store(me, Ordering::Release);
    }

    /// Parent handler, called by `me` (the forking thread).
    pub(crate) fn parent_end(&self, me: usize) -> ForkEnd {
        if self.is_forker(me) {
            if self.holding.fetch_sub(1, Ordering::Relaxed) > 1 {
                return ForkEnd::KeepHeld;
            }
            self.forker.store(0, Ordering::Release);
            return ForkEnd::Release;
        }
        self.count_off_released(me);
        ForkEnd::Released
    }

    /// Child handler, called by `me` (the forking thread, this process's only thread).
    pub(crate) fn child_end(&self, me: usize) -> ForkEnd {
        // Forks of a thread that did not survive the fork never finish here.
        if self.released_on.load(Ordering::Relaxed) != me {
            self.released.store(0, Ordering::Relaxed);
            self.released_on.store(me, Ordering::Relaxed);
        }
        if !self.is_forker(me) {
            self.count_off_released(me);
            return ForkEnd::Released;
        }
        let outer = self.holding.swap(0, Ordering::Relaxed) - 1;
        self.released.fetch_add(outer, Ordering::Relaxed);
        self.forker.store(0, Ordering::Release);
        ForkEnd::Release
    }

    /// One fork of `me`'s whose locks were released is over (none left: a fork our prepare
    /// handler did not see, such as one begun before our handlers were registered).
    fn count_off_released(&self, me: usize) {
        if self.released_on.load(Ordering::Relaxed) == me {
            let n = self.released.load(Ordering::Relaxed);
            self.released.store(n.saturating_sub(1), Ordering::Relaxed);
        }
    }

    /// Whether forks are still in progress on `me` in this process, their handlers still to
    /// run (in a child: the outer forks of the fork it was made by).
    pub(crate) fn pending(&self, me: usize) -> bool {
        self.is_forker(me)
            || (self.released_on.load(Ordering::Relaxed) == me
                && self.released.load(Ordering::Relaxed) != 0)
    }

    /// A copy of the state, as a forked child has it (tests).
    #[cfg(test)]
    fn copy(&self) -> Self {
        let c = Forks::new();
        for (to, from) in [
            (&c.forker, &self.forker),
            (&c.holding, &self.holding),
            (&c.released, &self.released),
            (&c.released_on, &self.released_on),
        ] {
            to.store(from.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        c
    }
}

/// This thread's `pthread_self`: the same in a forked child as in the thread that forked.
pub(crate) fn this_thread() -> usize {
    // SAFETY: pthread_self has no preconditions and does not allocate.
    unsafe { libc::pthread_self() as usize }
}

/// Whether this thread is forking and holds every lock (see the module docs).
pub(crate) fn is_forking_thread() -> bool {
    // `pthread_self` only while a fork is in progress.
    FORKS.forker.load(Ordering::Acquire) != 0 && FORKS.is_forker(this_thread())
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

    /// Whether any thread holds the lock now (a racy look: for a thread that must not wait for
    /// a lock it may hold itself, as a signal handler's).
    #[cfg(feature = "profiling")]
    pub(crate) fn is_held(&self) -> bool {
        self.state.load(Ordering::Relaxed) != FREE
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
    use super::{ForkEnd, Forks, SpinLock};

    /// The forking thread, and a second one.
    const T: usize = 0x1000;
    const W: usize = 0x2000;

    /// The outer fork's prepare handler on `T`, then a nested fork's.
    fn nested_in(f: &Forks) {
        assert!(!f.nested(T));
        f.begin(T);
        assert!(!f.nested(W), "another thread passes the locks");
        assert!(f.nested(T));
    }

    #[test]
    fn a_nested_fork_leaves_the_locks_to_the_outer_one_in_the_process_that_made_it() {
        // In a prepare or parent handler: the parent; in a child handler: the outer child.
        for outer_child in [false, true] {
            let f = Forks::new();
            nested_in(&f);
            assert_eq!(f.parent_end(T), ForkEnd::KeepHeld);
            assert!(f.pending(T) && f.is_forker(T));
            let end = if outer_child {
                f.child_end(T)
            } else {
                f.parent_end(T)
            };
            assert_eq!(end, ForkEnd::Release);
            assert!(!f.pending(T) && !f.is_forker(T));
        }
    }

    #[test]
    fn the_child_of_a_nested_fork_releases_the_locks_and_its_outer_forks_do_not() {
        // Returning from a parent or child handler: the rest of the outer fork's handlers run
        // in the nested child itself.
        for outer_child in [false, true] {
            let nested_child = Forks::new();
            nested_in(&nested_child);
            let nested_child = nested_child.copy();
            assert_eq!(nested_child.child_end(T), ForkEnd::Release);
            assert!(
                !nested_child.is_forker(T),
                "the locks are passed, not taken"
            );
            assert!(
                nested_child.pending(T),
                "the outer fork's handlers are still to run"
            );
            let end = if outer_child {
                nested_child.child_end(T)
            } else {
                nested_child.parent_end(T)
            };
            assert_eq!(end, ForkEnd::Released);
            assert!(!nested_child.pending(T));
        }
    }

    #[test]
    fn a_nested_child_returning_from_a_prepare_handler_makes_the_outer_fork() {
        let f = Forks::new();
        nested_in(&f);
        let nested_child = f.copy();
        assert_eq!(nested_child.child_end(T), ForkEnd::Release);
        // The outer fork's copy, made by the nested child with the locks free.
        let its_child = nested_child.copy();
        assert_eq!(nested_child.parent_end(T), ForkEnd::Released);
        assert!(!nested_child.pending(T));
        assert_eq!(its_child.child_end(T), ForkEnd::Released);
        assert!(!its_child.pending(T));
        // And the parent finishes the outer fork as without the nested one.
        assert_eq!(f.parent_end(T), ForkEnd::KeepHeld);
        assert_eq!(f.parent_end(T), ForkEnd::Release);
    }

    #[test]
    fn forks_in_a_nested_child_take_the_locks_as_in_any_process() {
        let f = Forks::new();
        nested_in(&f);
        let nested_child = f.copy();
        assert_eq!(nested_child.child_end(T), ForkEnd::Release);
        // A thread the nested child started forks, while the outer fork is still in progress
        // on the first thread.
        assert!(!nested_child.nested(W));
        nested_child.begin(W);
        let grandchild = nested_child.copy();
        assert_eq!(nested_child.parent_end(W), ForkEnd::Release);
        assert!(
            nested_child.pending(T),
            "the first thread's outer fork is not over"
        );
        // In that fork's child, the first thread is gone, and its forks with it.
        assert_eq!(grandchild.child_end(W), ForkEnd::Release);
        assert!(!grandchild.pending(W) && !grandchild.pending(T));
        // The first thread forks again inside the outer fork's handler (itself nested once
        // more in a handler), and its child returns through every handler.
        assert!(!nested_child.nested(T));
        nested_child.begin(T);
        assert!(nested_child.nested(T));
        let child = nested_child.copy();
        assert_eq!(child.child_end(T), ForkEnd::Release);
        for _ in 0..2 {
            assert!(child.pending(T));
            assert_eq!(child.parent_end(T), ForkEnd::Released);
        }
        assert!(!child.pending(T));
        assert_eq!(
            child.parent_end(T),
            ForkEnd::Released,
            "nothing left to count off"
        );
        assert_eq!(nested_child.parent_end(T), ForkEnd::KeepHeld);
        assert_eq!(nested_child.parent_end(T), ForkEnd::Release);
        assert_eq!(nested_child.parent_end(T), ForkEnd::Released);
        assert!(!nested_child.pending(T));
    }

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
