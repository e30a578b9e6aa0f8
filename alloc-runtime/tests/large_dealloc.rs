//! `dealloc` of every kind of large layout frees the object's memory, wherever it is called.
//!
//! A medium object (over 32 KiB, or over-aligned for every size class) is a page run owned by
//! nobody, and a huge object a mapping of its own with its header in the page before it; both
//! are told apart from the blocks of spans by the layout. This checks that each such free gives
//! the object's bytes back (the stats' `large_bytes` and `large_objects`), on the thread that
//! allocated it, on a thread with a heap of its own, and on a thread whose first allocator call
//! it is (no heap yet), and that the small classes still hand out distinct blocks after them.
//! One test function: the large-object counters are process-wide. (The small classes' counters
//! are not compared around a free: the test harness's main thread may allocate meanwhile.)

use std::alloc::{alloc, dealloc, Layout};
use std::sync::mpsc;

use specalloc_runtime::size_class::{CHUNK_SIZE, MAX_SMALL_SIZE, PAGE_SIZE};
use specalloc_runtime::stats;

specalloc_runtime::install!(static GLOBAL);

/// Large layouts of every kind: medium by size, medium by alignment (a small size), and huge.
fn layouts() -> Vec<Layout> {
    let l = |size, align| Layout::from_size_align(size, align).unwrap();
    vec![
        l(MAX_SMALL_SIZE + 1, 8),
        l(100 << 10, 64),
        l(1 << 20, 16),
        l(100, 2 * PAGE_SIZE),
        l(3000, 64 << 10),
        l(CHUNK_SIZE + 1, 8),
        l(8 << 20, 4096),
    ]
}

/// The live large objects and their bytes, as the stats count them.
fn large() -> (u64, usize) {
    let s = stats();
    (s.large_objects, s.large_bytes)
}

/// Allocates `layout`, checks its alignment and writes it whole.
fn take(layout: Layout) -> usize {
    // SAFETY: every layout here has a non-zero size.
    let p = unsafe { alloc(layout) };
    assert!(!p.is_null(), "{layout:?}: null");
    assert_eq!(p as usize % layout.align(), 0, "{layout:?}: misaligned");
    // SAFETY: the block holds `layout.size()` bytes.
    unsafe { p.write_bytes(0x5a, layout.size()) };
    p as usize
}

/// Frees a block of [`take`].
fn give(p: usize, layout: Layout) {
    // SAFETY: allocated by `take` with this layout, freed once.
    unsafe { dealloc(p as *mut u8, layout) }
}

/// Runs `f` on a thread made with `pthread_create`, so that no standard-library call makes an
/// allocation on it before `f`'s first.
fn on_raw_thread(f: Box<dyn FnOnce() + Send>) {
    extern "C" fn start(arg: *mut libc::c_void) -> *mut libc::c_void {
        // SAFETY: `arg` is the box `on_raw_thread` leaked for this thread alone.
        let f = unsafe { Box::from_raw(arg as *mut Box<dyn FnOnce() + Send>) };
        f();
        std::ptr::null_mut()
    }
    // The box is made here, on this thread: the new thread's first call is in `f`.
    let arg = Box::into_raw(Box::new(f));
    let mut t: libc::pthread_t = 0;
    // SAFETY: `start` takes ownership of `arg`; `t` is written by the call.
    let rc = unsafe { libc::pthread_create(&mut t, std::ptr::null(), start, arg.cast()) };
    assert_eq!(rc, 0, "pthread_create");
    // SAFETY: `t` is a joinable thread made above.
    assert_eq!(unsafe { libc::pthread_join(t, std::ptr::null_mut()) }, 0);
}

#[test]
fn dealloc_frees_large_objects_on_any_thread() {
    for layout in layouts() {
        // On the thread that allocated it.
        let before = large();
        let p = take(layout);
        let held = large();
        assert_eq!(held.0, before.0 + 1, "{layout:?}: not counted as large");
        assert!(held.1 >= before.1 + layout.size(), "{layout:?}: bytes");
        give(p, layout);
        assert_eq!(large(), before, "{layout:?}: not freed on its own thread");

        // On another thread, which has a heap (it allocated a small block first).
        let p = take(layout);
        let (tx, rx) = mpsc::channel::<usize>();
        let t = std::thread::spawn(move || {
            let keep = Box::new([7u64; 4]);
            let p = rx.recv().unwrap();
            give(p, layout);
            assert_eq!(keep[3], 7);
        });
        tx.send(p).unwrap();
        t.join().unwrap();
        assert_eq!(large(), before, "{layout:?}: not freed by another thread");

        // On a thread whose first allocator call this free is.
        let p = take(layout);
        on_raw_thread(Box::new(move || give(p, layout)));
        assert_eq!(
            large(),
            before,
            "{layout:?}: not freed by a thread without a heap"
        );
    }

    // The small classes still hand out distinct, writable blocks.
    let mut blocks: Vec<Box<[u8; 48]>> = (0..1000).map(|i| Box::new([i as u8; 48])).collect();
    for (i, b) in blocks.iter_mut().enumerate() {
        assert!(b.iter().all(|&x| x == i as u8), "block {i} overwritten");
        b[0] = !b[0];
    }
}
