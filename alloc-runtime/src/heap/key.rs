//! The threads that allocate: the thread-exit key (the pthread key whose destructor,
//! `lifecycle::thread_exit`, tears a thread's heap down), made once per process, after the
//! image is kept loaded; the count of threads with a heap; and whether a thread without one
//! makes its next call without one.

use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::tls;
use crate::lock::SpinLock;
use crate::os;

/// Set when the image's constructor (`lifecycle::on_load`) starts (see [`thread_key`]).
pub(super) static LOADED: AtomicBool = AtomicBool::new(false);

/// The thread-exit key plus one (0: not made yet).
pub(super) static KEY: AtomicUsize = AtomicUsize::new(0);
/// Held while the key is made (only around `pthread_key_create`, which does not allocate).
pub(super) static KEY_LOCK: SpinLock<()> = SpinLock::new(());

/// What [`thread_key`] found.
pub(super) enum Key {
    /// The key.
    Made(os::ThreadKey),
    /// Not yet: the image is being kept loaded ([`os::pin_image`]) by another thread, or by a
    /// call this thread is making.
    NotYet,
    /// None to be had: the system has no key left, or this image cannot be kept loaded.
    None,
}

/// The pthread key whose destructor, `exit`, tears a thread's heap down (created when the
/// runtime is loaded, or on first use if that comes first; after [`os::pin_image`]). A thread
/// that finds no key left (the program used up the system's keys before either) does without;
/// each new thread tries again.
pub(super) fn thread_key(exit: os::ThreadDtor) -> Key {
    let k = KEY.load(Ordering::Acquire);
    if k != 0 {
        return Key::Made((k - 1) as os::ThreadKey);
    }
    // Before a key's destructor points into this image, the image is kept loaded: a `dlclose`
    // of a library that holds the runtime must not unmap it (this may allocate, which comes
    // back here and finds the work in progress). Not before this image's constructor has
    // started: until then nothing can unload it (it is still being loaded), the constructor
    // keeps it loaded, and asking the loader now would run the constructor from inside this
    // allocation (`dlopen` runs an object's pending constructors), which may be made by
    // `pthread_atfork` under the C library's lock of its handlers, which the constructor's own
    // `pthread_atfork` would then wait for.
    if LOADED.load(Ordering::Acquire) {
        match os::pin_image() {
            Ok(true) => {}
            Ok(false) => return Key::NotYet,
            Err(()) => return Key::None,
        }
    }
    let _g = KEY_LOCK.lock();
    let k = KEY.load(Ordering::Acquire);
    if k != 0 {
        return Key::Made((k - 1) as os::ThreadKey);
    }
    match os::thread_key_create(exit) {
        Some(key) => {
            KEY.store(key as usize + 1, Ordering::Release);
            Key::Made(key)
        }
        None => Key::None,
    }
}

/// Threads with a heap of their own now.
pub(super) static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// Threads with a heap of their own now (the background trimmer's thread has none).
pub(super) fn active_heaps() -> usize {
    ACTIVE.load(Ordering::Relaxed)
}

/// Threads with a heap from which threads take their first allocations from the shared heap:
/// before they have a heap (`lifecycle::alloc_heapless`), and of a class they have no span of
/// (`miss::shared_first`).
pub const SHARED_FROM_THREADS: usize = 8;

/// Whether [`SHARED_FROM_THREADS`] threads or more have a heap now.
///
/// Threads without a heap do not count, so no count has to be taken back at their exit (a
/// thread whose first allocation is made in the C library's last round of thread-exit
/// destructors would never have it taken back). The count regulates itself: while fewer threads
/// have a heap, every new thread takes one. A thread that takes its heap in that last round
/// stays counted after its exit, since its exit hook never runs; a later thread on the same
/// descriptor takes the heap over without counting it again (`lifecycle::init_heap`), so such
/// heaps count at most once per thread descriptor alive at once.
pub(super) fn many_threads() -> bool {
    ACTIVE.load(Ordering::Relaxed) >= SHARED_FROM_THREADS
}

/// Allocations and frees a thread makes without a heap of its own, while many threads have
/// one, before it takes one (see `lifecycle::alloc_heapless`).
pub const HEAPLESS_FIRST: u8 = 16;

/// Whether this thread, which has no heap, makes its next allocation or free without one: one
/// of its first [`HEAPLESS_FIRST`] while [`SHARED_FROM_THREADS`] threads or more have a heap.
/// Nothing else records the thread: it needs no exit hook until it takes a heap.
pub(super) fn heapless_turn() -> bool {
    let locals = tls::locals();
    let n = locals.heapless.get();
    if n >= HEAPLESS_FIRST || !many_threads() {
        return false;
    }
    locals.heapless.set(n + 1);
    true
}
