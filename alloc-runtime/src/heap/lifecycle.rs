//! A heap's life: made on a thread's first slow-path allocation (or, while many threads have
//! a heap, on its first call after its first few), taken from a pool of unused heaps or carved
//! from a metadata mapping; torn down by a pthread-key destructor when the thread exits (its
//! spans abandoned: empty ones to the page heap, the others to the central pools), and put back
//! in the pool. Also the `fork` handlers, and the shared heap that serves a thread whose heap is
//! already torn down (a destructor that allocates after ours), and, while many threads have a
//! heap, every thread's first allocations and its first blocks of a class.

use core::ptr;
use core::sync::atomic::{AtomicI32, Ordering};

use super::abandon::{abandon, give_back_shared};
use super::central::CENTRAL;
use super::key::{active_heaps, heapless_turn, thread_key, Key, ACTIVE, KEY, KEY_LOCK, LOADED};
use super::outbox::publish_outboxes;
use super::slow::alloc_shared_from;
use super::threads::ThreadIndex;
use super::{empty_heap, tls, write_new_heap, Heap};
use crate::lock::{this_thread, ForkEnd, SpinLock, FORKS};
use crate::os;
use crate::remote;

struct HeapPool {
    /// Unused heaps.
    free: *mut Heap,
    /// Every heap ever made (linked through `all_next`).
    all: *mut Heap,
    /// Heaps made so far.
    made: usize,
    /// The heaps that record a thread descriptor, by descriptor.
    threads: ThreadIndex,
    /// Unused space of the current metadata mapping.
    arena: usize,
    arena_end: usize,
}
// SAFETY: only touched under its lock.
unsafe impl Send for HeapPool {}

static HEAPS: SpinLock<HeapPool> = SpinLock::new(HeapPool {
    free: ptr::null_mut(),
    all: ptr::null_mut(),
    made: 0,
    threads: ThreadIndex::new(),
    arena: 0,
    arena_end: 0,
});

/// Every heap ever made: the head of the registry (members are never freed).
pub(crate) fn all_heaps() -> *mut Heap {
    HEAPS.lock().all
}

/// Heaps made so far (each is reused once its thread exits).
pub(crate) fn heaps_made() -> usize {
    HEAPS.lock().made
}

/// A thread's first allocations, before it has a heap, from the shared heap (if its lock is
/// free, see [`try_alloc_shared`]) while many threads have a heap (see `key::heapless_turn`): a
/// thread that allocates a few blocks (a thread per connection, which allocates a few and
/// blocks) never writes a heap of its own, a page. `None`: the caller gives the thread a heap.
pub(super) fn alloc_heapless(class: usize, size: usize, zeroed: bool) -> Option<*mut u8> {
    if !heapless_turn() {
        return None;
    }
    try_alloc_shared(class, size, zeroed)
}

/// The heaps' part of the background trimmer's wake (see `purge.rs`): busy heaps asked to let
/// go of the classes they stopped allocating in (on the interval's wakes: `full`), idle heaps
/// trimmed, the shared heap's spans handed on once unused, the central pools swept.
fn background_pass(full: bool) -> crate::purge::HeapPass {
    if full {
        super::retire::next_retire_epoch();
    }
    let bytes = trim_idle_heaps();
    // Before the sweep, which gives back those of its spans whose blocks are all freed.
    trim_shared();
    let bytes = bytes + super::central::sweep_all();
    crate::purge::HeapPass {
        threads: active_heaps(),
        bytes,
    }
}

/// The background trimmer's pass: the heaps of live threads whose owners entered no slow path
/// since the trimmer last looked give back what they hold and do not use (see `idle.rs`, which
/// says which heaps a pass looks at). Returns the bytes given back to the page heap.
///
/// Only the trimmer's thread calls it. A `fork` child does not have it until it starts one; the
/// heaps of the threads that did not survive the fork stay as they are when their owner was in a
/// slow path (its word stays odd) or the trimmer in the middle of them (its word stays set).
pub(crate) fn trim_idle_heaps() -> usize {
    let (head, made) = {
        let pool = HEAPS.lock();
        (pool.all, pool.made)
    };
    super::idle::trim_idle_heaps(head, made)
}

/// The next heap of the registry.
///
/// # Safety
/// `h` is a heap from [`all_heaps`] or this function.
pub(crate) unsafe fn next_heap(h: *mut Heap) -> *mut Heap {
    // SAFETY: registry members are never freed and `all_next` is written before publication.
    unsafe { (*h).all_next.get() }
}

const HEAP_ARENA: usize = 256 * 1024;

/// A heap for a thread with descriptor `thread` (0: for no thread, the shared heap): the heap
/// a dead thread on the same descriptor left behind, else one from the pool, else a new one.
///
/// A thread whose first allocation happens in the last round of pthread-key destructors sets
/// our key's value too late for its destructor to run (glibc runs at most
/// `PTHREAD_DESTRUCTOR_ITERATIONS` rounds, in key order), so its heap is never torn down: it
/// keeps its descriptor here and stays in use. Nothing can tell, from inside that round, that
/// it is the last one; but the descriptor (`pthread_self()`, the C library's thread control
/// block) is unique among live threads and reused for later threads (glibc's stack cache, a
/// pool's next thread). So a thread that has no heap yet and finds a heap still recording its
/// own descriptor knows that heap's thread is dead, and takes it over as it is: its spans, its
/// delayed list and its counters stay the heap's (a heap is known by its address, not by its
/// thread), and the dead thread's writes happen before ours through the C library's handing
/// over of the descriptor (the dead thread's exit, then its stack cached and given to the new
/// thread, each under the C library's own lock, then the new thread's start). Leaked heaps are
/// so bounded by the thread descriptors ever alive at once, instead of growing with every
/// thread.
fn new_heap(thread: usize) -> Option<*mut Heap> {
    let mut pool = HEAPS.lock();
    if let Some(h) = pool.threads.find(thread) {
        return Some(h);
    }
    if !pool.free.is_null() {
        let h = pool.free;
        // SAFETY: pooled heaps are live, never freed, and protected by the lock; a pooled
        // heap records no thread.
        unsafe {
            pool.free = (*h).pool_next.get();
            pool.threads.set(h, thread);
        }
        return Some(h);
    }
    // Each heap starts a page of its own, so that what every thread writes (the fields before
    // the outboxes, under a page) is one page, never two.
    let size = core::mem::size_of::<Heap>().next_multiple_of(crate::os::OS_PAGE);
    if pool.arena + size > pool.arena_end {
        let m = crate::os::map(HEAP_ARENA)?.as_ptr() as usize;
        pool.arena = m;
        pool.arena_end = m + HEAP_ARENA;
    }
    let h = pool.arena as *mut Heap;
    pool.arena += size;
    // SAFETY: `h` is fresh, suitably aligned (a page) memory of the right size.
    unsafe {
        write_new_heap(h);
        (*h).all_next.set(pool.all);
        pool.threads.set(h, thread);
    }
    pool.all = h;
    pool.made += 1;
    Some(h)
}

/// Forgets the descriptors of every heap but the calling thread's (in a `fork` child, whose
/// other threads are gone: their heaps may have been left in the middle of an operation, so no
/// later thread on a reused descriptor may take them over).
fn forget_other_threads() {
    let me = this_thread();
    let mut pool = HEAPS.lock();
    let mut h = pool.all;
    let mut active = 0;
    while !h.is_null() {
        // SAFETY: registry members are live heaps; `thread` is written under the pool's lock.
        let hr = unsafe { &*h };
        if hr.thread.get() != me {
            // SAFETY: a registry member, never freed; indexed through the pool only.
            unsafe { pool.threads.set(h, 0) };
        } else if hr.active.load(Ordering::Relaxed) {
            active += 1;
        }
        h = hr.all_next.get();
    }
    // The other threads' heaps stay marked active (nothing tears them down): the trimmer gives
    // back what they hold, but they count no longer.
    ACTIVE.store(active, Ordering::Relaxed);
    let mut h = pool.free;
    while !h.is_null() {
        // SAFETY: pooled heaps are live registry members, linked under the pool's lock.
        let hr = unsafe { &*h };
        super::trimlock::fork_child_free(hr);
        h = hr.pool_next.get();
    }
}

/// Whether this thread's heap has been torn down, or it can have none (no thread-exit key could
/// be had): the shared heap serves it (see [`alloc_shared`]).
pub(super) fn exited() -> bool {
    tls::locals().exited.get()
}

/// Why [`init_heap`] gave the thread no heap of its own.
pub(super) enum NoHeap {
    /// The thread is served by the shared heap ([`alloc_shared`]): for this
    /// allocation (the image is being kept loaded, by another thread or by a call this one is
    /// making: see [`thread_key`]), or for the thread's life ([`exited`] then holds: no thread-exit key could
    /// be had, see [`thread_key`]).
    Shared,
    /// The OS refused the memory for a heap.
    OutOfMemory,
}

/// Gives this thread a heap and registers its exit hook.
#[cold]
pub(super) fn init_heap() -> Result<*mut Heap, NoHeap> {
    // Keeps the constructor that registers the fork handlers linked in wherever heaps are made
    // (the linker takes an object of a static library only when something refers to it).
    core::hint::black_box(&ON_LOAD);
    let key = match thread_key(thread_exit) {
        Key::Made(k) => k,
        Key::NotYet => return Err(NoHeap::Shared),
        Key::None => {
            // Without a key nothing would tear a heap down at this thread's exit: the thread
            // is served by the shared heap, as one whose heap is torn down is.
            tls::locals().exited.set(true);
            return Err(NoHeap::Shared);
        }
    };
    let h = new_heap(this_thread()).ok_or(NoHeap::OutOfMemory)?;
    // SAFETY: `h` is a live heap nobody else uses.
    let hr = unsafe { &*h };
    // A heap taken over from a dead thread on this descriptor (`new_heap`) whose exit hook never
    // ran (it took the heap in the C library's last round of thread-exit destructors, whose
    // values are never destroyed) is still active, and counted: it counts once.
    let active = if hr.active.swap(true, Ordering::Relaxed) {
        ACTIVE.load(Ordering::Relaxed)
    } else {
        ACTIVE.fetch_add(1, Ordering::Relaxed) + 1
    };
    // A new thread's first allocations of each class (`miss::shared_first`).
    for n in &hr.shared_allocs {
        n.set(0);
    }
    tls::locals().heap.set(h);
    // A non-null value makes the destructor run at thread exit.
    os::thread_key_set(key, h.cast());
    // The heap is this thread's now: the trimmer's thread, whose creation allocates, may start.
    crate::purge::heap_made(active);
    Ok(h)
}

/// The shared heap (its address, 0 until first used), used only under this lock: it serves
/// threads whose own heap is torn down or that can have none, and every thread's first few
/// allocations of each class while many threads have a heap (`miss::shared_first`).
static FALLBACK: SpinLock<usize> = SpinLock::new(0);

/// Allocates from the shared heap, under its lock, for a thread whose heap is already torn
/// down, or that has none (see [`NoHeap`]). A thread never gets a second heap after its exit
/// began, since nothing would tear that one down (a pthread-key destructor that allocates in
/// the last round runs after ours).
#[cold]
pub(super) fn alloc_shared(class: usize, size: usize, zeroed: bool) -> *mut u8 {
    let mut g = FALLBACK.lock();
    alloc_shared_locked(&mut g, class, size, zeroed)
}

/// [`alloc_shared`] for a thread that has a heap (its first allocations of a class,
/// `miss::shared_first`), only if the shared heap's lock is free: `None` when another thread
/// holds it (or the shared heap cannot be made), and the caller takes a span of its own instead.
/// A thread with a heap never waits for that lock: a fork's prepare handler holds it, and a
/// thread waiting in an allocation then may hold a lock of the program's that the child
/// inherits held (the standard library's thread-info lock, around a new thread's first
/// allocations).
#[cold]
pub(super) fn try_alloc_shared(class: usize, size: usize, zeroed: bool) -> Option<*mut u8> {
    let mut g = FALLBACK.try_lock()?;
    // Its samples are taken (a thread that waits for the lock has its samples skipped).
    #[cfg(feature = "profiling")]
    super::sampled::SHARED_MAY_SAMPLE.store(true, Ordering::Relaxed);
    let p = alloc_shared_locked(&mut g, class, size, zeroed);
    #[cfg(feature = "profiling")]
    super::sampled::SHARED_MAY_SAMPLE.store(false, Ordering::Relaxed);
    (!p.is_null()).then_some(p)
}

/// Allocates from the shared heap (made on first use), whose lock `g` is.
fn alloc_shared_locked(g: &mut usize, class: usize, size: usize, zeroed: bool) -> *mut u8 {
    if *g == 0 {
        match new_heap(0) {
            Some(h) => {
                *g = h as usize;
                super::SHARED_HEAP.store(h as usize, Ordering::Relaxed);
            }
            None => return ptr::null_mut(),
        }
    }
    // SAFETY: the shared heap is never freed, and the caller holds its lock, which makes it the
    // only user of it and the owner of its spans.
    let h = unsafe { &*(*g as *const Heap) };
    // It takes its spans' pages one run at a time and keeps no reserve of runs.
    h.new_spans.set(0);
    // The threads that use it enter its trim lock in turn (in a refill), as an owner does: the
    // idle-heap trimmer passes it, being inactive, and the lock keeps it so if that ever
    // changes.
    alloc_shared_from(h, class, size, zeroed)
}

/// The shared heap's part of the background pass: once no thread has used it since the pass
/// before, its spans are handed on (see `abandon.rs`).
fn trim_shared() {
    // A thread allocating from it now: the next pass looks again.
    let Some(g) = FALLBACK.try_lock() else {
        return;
    };
    if *g != 0 {
        // SAFETY: the shared heap is never freed, and we hold its lock.
        unsafe { give_back_shared(&*(*g as *const Heap)) };
    }
}

/// Runs when the program or library that holds the runtime is loaded (a constructor):
///
/// - registers the `fork` handlers; from here, never from an allocation: the C library grows
///   its array of handlers with `malloc` while it holds its own lock of them, so an allocation
///   made inside a program's `pthread_atfork` must not call `pthread_atfork` again;
/// - keeps this image loaded ([`os::pin_image`], which [`thread_key`] and the background purge
///   also ask for, in case they come first): done here, the dynamic loader's own allocation
///   for it is made before the program runs, not in the middle of its first allocation;
/// - makes the thread-exit key, before the program could take every key the system has (a
///   thread that finds none is served by the shared heap, slower).
extern "C" fn on_load() {
    LOADED.store(true, Ordering::Release);
    crate::purge::set_heap_work(background_pass);
    if os::at_fork(fork_prepare, fork_parent, fork_child).is_err() {
        os::write_stderr(
            b"specalloc: could not register its fork handlers (out of memory); a child forked \
              while other threads allocate may hang\n",
        );
    }
    #[cfg(feature = "profiling")]
    crate::prof::on_load();
    // A failure is remembered: no key is made, and no purge thread started, without it. A key
    // made before this ran (by an allocation of a library initialised earlier) stays.
    if os::pin_image().is_err() && KEY.load(Ordering::Acquire) != 0 {
        os::write_stderr(
            b"specalloc: could not keep its library loaded; unloading it while threads that \
              allocated run may crash\n",
        );
    }
    // None left already: threads are served by the shared heap (and try again).
    let _ = thread_key(thread_exit);
}

/// Runs [`on_load`] before `main` (and, in a shared library, when it is loaded).
#[used]
#[unsafe(link_section = ".init_array")]
static ON_LOAD: extern "C" fn() = on_load;

/// `fork` prepare handler: waits out the deliveries in progress and holds new ones back (see
/// [`remote::fork_prepare`]), then takes every allocator lock (in the one order the allocator
/// nests them: key, shared heap, heap pool, central pools, huge cache, page heap), so that no
/// other thread is inside a critical section when the process is copied. The child then starts
/// with consistent structures and can allocate and free; threads that did not survive the fork
/// keep their spans (their blocks can still be freed in the child, as remote frees). Every lock
/// and wait state, and how the child gets past it, is in the table of `docs/fork.md`.
///
/// A fork made by a `fork` handler that runs while this thread holds every lock for a fork
/// (one registered before ours) takes nothing more: it is made with the locks held (see
/// [`Forks`](crate::lock::Forks) for what its parent and child handlers do with them).
extern "C" fn fork_prepare() {
    if FORKS.nested(this_thread()) {
        return;
    }
    // First, this thread's heap's trim lock, as its slow paths take it: the background
    // trimmer does not survive the fork, and must not be in the middle of this heap (the one the
    // child goes on with) when the process is copied. Before deliveries are held back: the
    // trimmer may be waiting to deliver while it holds the lock.
    hold_own_heap(true);
    remote::fork_prepare();
    #[cfg(feature = "test-hooks")]
    crate::hooks::in_fork_prepare();
    KEY_LOCK.raw_lock();
    FALLBACK.raw_lock();
    HEAPS.raw_lock();
    for c in &CENTRAL {
        c.raw_lock();
    }
    crate::large::fork_lock(true);
    crate::chunk::fork_lock(true);
    // Handlers registered before ours run their prepare after this one, and their parent and
    // child handlers before ours: they may allocate, and pass the locks (see `lock.rs`).
    FORKS.begin(this_thread());
}

/// Takes (`true`) or releases one of this module's locks, or a central pool's (test hooks).
#[cfg(feature = "test-hooks")]
fn test_lock(which: crate::hooks::Lock, take: bool) {
    use crate::hooks::Lock;
    fn toggle<T: Send>(lock: &SpinLock<T>, take: bool) {
        if take {
            lock.raw_lock();
        } else {
            // SAFETY: the test hook took this lock on this thread and releases it once.
            unsafe { lock.raw_unlock() };
        }
    }
    match which {
        Lock::Key => toggle(&KEY_LOCK, take),
        Lock::Fallback => toggle(&FALLBACK, take),
        Lock::HeapPool => toggle(&HEAPS, take),
        Lock::Central(c) => toggle(&CENTRAL[c], take),
        Lock::HugeCache => crate::large::fork_lock(take),
        Lock::PageHeap => crate::chunk::fork_lock(take),
    }
}

/// Takes `lock`, sets `held`, keeps the lock for `dur`, then releases it (test hooks).
#[cfg(feature = "test-hooks")]
pub fn hold_lock(
    lock: crate::hooks::Lock,
    held: &core::sync::atomic::AtomicBool,
    dur: std::time::Duration,
) {
    test_lock(lock, true);
    held.store(true, Ordering::Release);
    std::thread::sleep(dur);
    test_lock(lock, false);
}

/// Releases the locks [`fork_prepare`] took (once [`FORKS`] no longer lets this thread pass).
fn release_fork_locks() {
    crate::chunk::fork_lock(false);
    crate::large::fork_lock(false);
    for c in CENTRAL.iter().rev() {
        // SAFETY: taken by this thread in `fork_prepare` (in the child, this thread is the
        // copy of the one that took it).
        unsafe { c.raw_unlock() };
    }
    // SAFETY: as above.
    unsafe {
        HEAPS.raw_unlock();
        FALLBACK.raw_unlock();
        KEY_LOCK.raw_unlock();
    }
    hold_own_heap(false);
}

/// Takes (`true`) or releases this thread's heap's trim lock around a `fork` (see
/// [`fork_prepare`]); nothing for a thread without a heap.
fn hold_own_heap(take: bool) {
    let h = tls::locals().heap.get();
    if h == empty_heap() {
        return;
    }
    // SAFETY: this thread's live heap.
    let h = unsafe { &*h };
    if take {
        super::trimlock::fork_hold(h);
    } else {
        super::trimlock::fork_release(h);
    }
}

/// `fork` parent handler (see [`ForkEnd`] for each case).
extern "C" fn fork_parent() {
    let me = this_thread();
    match FORKS.parent_end(me) {
        ForkEnd::KeepHeld => {}
        ForkEnd::Release => {
            release_fork_locks();
            remote::fork_parent();
        }
        // This process is the child of a fork made inside this one's handlers, returning
        // through them: its child handler released the locks, and left the purge thread to
        // start once no fork is in progress here.
        ForkEnd::Released => {
            if !FORKS.pending(me) {
                crate::purge::fork_child();
            }
        }
    }
}

/// The process whose child handler last made it a new process (0: none yet): the child of a
/// fork made inside another's handlers, returning through the outer fork's child handler, is
/// one already (see [`ForkEnd::Released`]).
static NEW_PROCESS: AtomicI32 = AtomicI32::new(0);

/// `fork` child handler (see [`ForkEnd`] for each case): the first in a process makes it a new
/// one, whose only thread is the one that forked (the child of a fork made inside another's
/// handlers runs it again if it returns through the outer fork's). The purge thread starts
/// once no fork is in progress on that thread.
extern "C" fn fork_child() {
    let me = this_thread();
    let release = FORKS.child_end(me) == ForkEnd::Release;
    if release {
        // Before this thread's heap is left: the trimmer may have set its word as it tried it.
        let h = tls::locals().heap.get();
        if h != empty_heap() {
            // SAFETY: this thread's live heap.
            super::trimlock::fork_child_free(unsafe { &*h });
        }
        release_fork_locks();
    }
    if release || NEW_PROCESS.load(Ordering::Relaxed) != os::process_id() {
        NEW_PROCESS.store(os::process_id(), Ordering::Relaxed);
        remote::fork_child();
        os::pin_fork_child();
        forget_other_threads();
    }
    if !FORKS.pending(me) {
        crate::purge::fork_child();
    }
}

/// pthread-key destructor: runs after the thread's Rust thread-local destructors.
///
/// # Safety
/// Called only by the C library at thread exit, with the value [`init_heap`] set: the exiting
/// thread's heap.
unsafe extern "C" fn thread_exit(arg: *mut core::ffi::c_void) {
    let h = arg as *mut Heap;
    if h.is_null() {
        return;
    }
    // SAFETY: `h` is this thread's live heap.
    let inside = unsafe { &*h }.enter();
    // First, while the heap is still this thread's: the frees it gathered for other spans.
    // SAFETY: as above.
    publish_outboxes(unsafe { &*h });
    let locals = tls::locals();
    locals.exited.set(true);
    if locals.heap.get() == h {
        locals.heap.set(empty_heap());
    }
    tls::forget_spec_heap();
    // SAFETY: `h` was this thread's heap and the thread no longer uses it.
    unsafe { abandon(&*h) };
    // Inactive before the lock is left: a trimmer that takes the lock next then leaves the heap
    // alone, while the pool hands it on (the shared heap may be made of it).
    // SAFETY: `h` is live; the pool takes it back.
    unsafe { (*h).active.store(false, Ordering::Relaxed) };
    drop(inside);
    ACTIVE.fetch_sub(1, Ordering::Relaxed);
    let mut pool = HEAPS.lock();
    // SAFETY: as above.
    unsafe {
        (*h).pool_next.set(pool.free);
        pool.threads.set(h, 0);
    }
    pool.free = h;
}
