//! Issue 15, case 2: a wrapper that adds a header to each block, around `SpecAlloc`, installed
//! as the global allocator. Its `dealloc` finds its header in front of every pointer it gets
//! (and aborts the test otherwise): no block from a size-specialised routine, which would
//! have no header, ever reaches it.

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicUsize, Ordering};

use specalloc::{specialize, SpecAlloc};

const MAGIC: u64 = 0x5EC_A110C_u64;
const HEADER: usize = 16;

struct WithHeader {
    inner: SpecAlloc,
    bad_frees: AtomicUsize,
    good_frees: AtomicUsize,
}

impl WithHeader {
    fn outer(layout: Layout) -> Layout {
        let align = layout.align().max(HEADER);
        Layout::from_size_align(layout.size() + align, align).unwrap()
    }
}

// SAFETY: each block is a larger block of `SpecAlloc` with the caller's block at an offset
// that keeps its alignment; the offset and the header are in front of it.
unsafe impl GlobalAlloc for WithHeader {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let outer = Self::outer(layout);
        // SAFETY: `outer` has a non-zero size.
        let p = unsafe { self.inner.alloc(outer) };
        if p.is_null() {
            return p;
        }
        // SAFETY: the block has `outer.align() >= 16` bytes before the user's part, where the
        // header goes.
        unsafe {
            let user = p.add(outer.align());
            user.sub(8).cast::<u64>().write(MAGIC);
            user.sub(16).cast::<usize>().write(outer.align());
            user
        }
    }
    unsafe fn dealloc(&self, user: *mut u8, layout: Layout) {
        // SAFETY: `user` came from `alloc` above, so its header is in front of it (that is what
        // this test checks: a headerless block would read garbage here, or crash).
        let magic = unsafe { user.sub(8).cast::<u64>().read() };
        if magic != MAGIC {
            self.bad_frees.fetch_add(1, Ordering::SeqCst);
            eprintln!("dealloc of a block without a header: {user:p}");
            std::process::abort();
        }
        self.good_frees.fetch_add(1, Ordering::SeqCst);
        // SAFETY: as above.
        let offset = unsafe { user.sub(16).cast::<usize>().read() };
        // SAFETY: the block `alloc` got from `SpecAlloc` with `outer`.
        unsafe { self.inner.dealloc(user.sub(offset), Self::outer(layout)) }
    }
}

#[global_allocator]
static GLOBAL: WithHeader = WithHeader {
    inner: SpecAlloc,
    bad_frees: AtomicUsize::new(0),
    good_frees: AtomicUsize::new(0),
};

#[specialize]
#[allow(clippy::useless_vec)] // the allocations are the point
fn churn(rounds: usize) -> usize {
    let mut total = 0;
    for i in 0..rounds {
        let b = Box::new([i as u32; 3]);
        let v = vec![i as u8; 40];
        let s = "a string literal".to_string();
        let mut w: Vec<u64> = Vec::with_capacity(8);
        w.extend([1, 2, 3, 4, 5, 6, 7, 8, 9]); // grows by realloc
        total += b[2] as usize + v.len() + s.len() + w.len();
    }
    total
}

#[test]
fn every_free_finds_its_header() {
    assert!(!specalloc::spec::installed());
    let before = GLOBAL.good_frees.load(Ordering::SeqCst);
    let total = churn(1000);
    assert_eq!(total, (0..1000).sum::<usize>() + 1000 * (40 + 16 + 9));
    let boxes: Vec<_> = (0..100).map(|i| specalloc::spec::boxed(i as u64)).collect();
    drop(boxes);
    // Dropped on another thread too.
    let v = churn_values();
    std::thread::spawn(move || drop(v)).join().unwrap();
    assert_eq!(GLOBAL.bad_frees.load(Ordering::SeqCst), 0);
    assert!(GLOBAL.good_frees.load(Ordering::SeqCst) - before >= 4000 + 100);
}

#[specialize]
#[allow(clippy::vec_box)] // boxes on purpose: one allocation each
fn churn_values() -> Vec<Box<u16>> {
    (0..64).map(Box::new).collect()
}
