//! The index of heaps by thread descriptor: which heap, if any, still records a given thread
//! descriptor (`pthread_self()`), found without walking every heap ever made. A hash table of
//! chains through [`Heap::thread_next`], used only under the heap pool's lock (see
//! `lifecycle::new_heap`): a thread's first allocation looks its descriptor up once, so with
//! thousands of live threads a thread's start costs what it costs with one.

use core::ptr;

use super::Heap;

/// Buckets of the index (a power of two): chains stay short up to tens of thousands of live
/// threads, for 8 KiB of zeroed static memory.
const BUCKETS: usize = 1024;

/// Heaps whose [`Heap::thread`] is not 0, by descriptor.
pub(super) struct ThreadIndex {
    buckets: [*mut Heap; BUCKETS],
}

/// The bucket of descriptor `thread`. Descriptors sit at the tops of thread stacks, a stack's
/// size apart: a multiplicative hash spreads their high and low bits over the buckets.
fn bucket(thread: usize) -> usize {
    let h = (thread as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> (64 - BUCKETS.trailing_zeros())) as usize
}

impl ThreadIndex {
    /// An empty index.
    pub(super) const fn new() -> ThreadIndex {
        ThreadIndex {
            buckets: [ptr::null_mut(); BUCKETS],
        }
    }

    /// The heap that records `thread`, if any (none for 0, which the index holds no heap by).
    pub(super) fn find(&self, thread: usize) -> Option<*mut Heap> {
        let mut h = self.buckets[bucket(thread)];
        while !h.is_null() {
            // SAFETY: indexed heaps are live registry members (never freed), linked under the
            // pool's lock, which our caller holds (it has `&self`).
            let hr = unsafe { &*h };
            if hr.thread.get() == thread {
                return Some(h);
            }
            h = hr.thread_next.get();
        }
        None
    }

    /// Makes `h` record `thread` (0: none), and indexes it by it.
    ///
    /// # Safety
    /// `h` is a live heap that is never freed; the index records every heap whose `thread` is
    /// not 0 and no other (each heap's `thread` is written only through this function).
    pub(super) unsafe fn set(&mut self, h: *mut Heap, thread: usize) {
        // SAFETY: `h` is live (our caller's contract).
        let hr = unsafe { &*h };
        let old = hr.thread.get();
        if old == thread {
            return;
        }
        if old != 0 {
            self.unlink(hr, old);
        }
        hr.thread.set(thread);
        if thread != 0 {
            let b = &mut self.buckets[bucket(thread)];
            hr.thread_next.set(*b);
            *b = h;
        }
    }

    /// Takes `h`, indexed by `old`, off its chain.
    fn unlink(&mut self, h: &Heap, old: usize) {
        let target = h as *const Heap as *mut Heap;
        let next = h.thread_next.replace(ptr::null_mut());
        let b = &mut self.buckets[bucket(old)];
        if *b == target {
            *b = next;
            return;
        }
        let mut p = *b;
        while !p.is_null() {
            // SAFETY: chain members are live heaps, linked under the pool's lock.
            let pr = unsafe { &*p };
            if pr.thread_next.get() == target {
                pr.thread_next.set(next);
                return;
            }
            p = pr.thread_next.get();
        }
        debug_assert!(false, "a heap recording a thread is not indexed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Heaps for the test, zeroed as a new heap is (never freed, like the runtime's).
    fn heaps(n: usize) -> Vec<*mut Heap> {
        (0..n)
            .map(|_| {
                let layout = std::alloc::Layout::new::<Heap>();
                // SAFETY: `Heap` has a nonzero size.
                let p = unsafe { std::alloc::alloc_zeroed(layout) } as *mut Heap;
                assert!(!p.is_null());
                // SAFETY: fresh memory for a heap.
                unsafe { super::super::write_new_heap(p) };
                p
            })
            .collect()
    }

    #[test]
    fn finds_what_was_set_and_forgets_what_was_cleared() {
        let hs = heaps(64);
        let mut ix = Box::new(ThreadIndex::new());
        // Descriptors a stack apart, plus ones that share a bucket.
        let desc = |i: usize| 0x7f00_0000_0000 + i * (8 << 20) + 0x6c0;
        for (i, &h) in hs.iter().enumerate() {
            // SAFETY: live test heaps, indexed only through `set`.
            unsafe { ix.set(h, desc(i)) };
        }
        for (i, &h) in hs.iter().enumerate() {
            assert_eq!(ix.find(desc(i)), Some(h));
        }
        assert_eq!(ix.find(desc(1000)), None);
        // Clear every other one, and move one to a new descriptor.
        for (i, &h) in hs.iter().enumerate().step_by(2) {
            // SAFETY: as above.
            unsafe { ix.set(h, 0) };
            assert_eq!(ix.find(desc(i)), None);
        }
        // SAFETY: as above.
        unsafe { ix.set(hs[1], desc(5000)) };
        assert_eq!(ix.find(desc(1)), None);
        assert_eq!(ix.find(desc(5000)), Some(hs[1]));
        for (i, &h) in hs.iter().enumerate().skip(3).step_by(2) {
            assert_eq!(ix.find(desc(i)), Some(h));
        }
    }

    #[test]
    fn a_shared_bucket_keeps_every_member() {
        // Descriptors with the same bucket, found by search.
        let target = bucket(0x1000);
        let same: Vec<usize> = (1..)
            .map(|i| 0x1000 + i * 64)
            .filter(|&d| bucket(d) == target)
            .take(5)
            .collect();
        let hs = heaps(5);
        let mut ix = Box::new(ThreadIndex::new());
        for (&h, &d) in hs.iter().zip(&same) {
            // SAFETY: live test heaps, indexed only through `set`.
            unsafe { ix.set(h, d) };
        }
        // Take out the middle, the head and the tail of the chain in turn.
        for k in [2, 4, 0] {
            // SAFETY: as above.
            unsafe { ix.set(hs[k], 0) };
            assert_eq!(ix.find(same[k]), None);
        }
        for k in [1, 3] {
            assert_eq!(ix.find(same[k]), Some(hs[k]));
        }
    }
}
