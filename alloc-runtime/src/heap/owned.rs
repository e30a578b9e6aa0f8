//! What an owner does to a span below the heap's lists, shared by the slow paths and the
//! central pools (whose lock holder acts as the owner): collecting its remote frees, giving it
//! back to the page heap; and clearing a block handed out zeroed.

use core::ptr;
use core::sync::atomic::Ordering;

use crate::chunk;
use crate::remote;
use crate::span::{Block, ListTag, Span, TINY_SIZE};
use crate::stats;

/// Clears the first `size` bytes of a block just taken from a free list; a block from a fresh
/// span only has its link word to clear.
///
/// # Safety
/// `p` is a block of at least `size` bytes that the caller owns, 8 bytes or more unless it is a
/// tiny block (`size <= 4`).
#[inline(always)]
pub(super) unsafe fn clear_block(p: *mut u8, size: usize, fresh: bool) {
    if size <= TINY_SIZE {
        // SAFETY: a tiny block is 4 bytes, ours.
        unsafe { (p as *mut u32).write(0) };
    } else if fresh {
        // SAFETY: the block is ours and at least one word long.
        unsafe { (p as *mut usize).write(0) };
    } else if size >= 128 {
        // From 128 bytes up libc's memset (vectorised for the CPU at load time) beats the
        // baseline-x86-64 stores the compiler inlines for a constant size.
        // SAFETY: the block is ours and at least `size` bytes long.
        unsafe { libc::memset(p.cast(), 0, size) };
    } else {
        // SAFETY: the block is ours and at least `size` bytes long.
        unsafe { ptr::write_bytes(p, 0, size) };
    }
}

/// Takes the span's remote list onto its local free list (the caller owns the span). Returns
/// how many blocks came.
///
/// Remote lists link their blocks as the local list does, and count them in the remote word, so
/// when the local list is empty (a refill's case) the taken list becomes the free list as it
/// is: no block is read here. The blocks' lines, which the freeing threads wrote last, are then
/// fetched one at a time by the allocations that hand them out, between other work, rather than
/// all at once in a walk that waits on each in turn. Otherwise one list's tail is linked to the
/// other's head: both are walked a step at a time until the shorter ends (a span parked full
/// holds a few local frees at most, so its remote blocks are hardly read).
pub(super) fn collect_remote(s: &Span) -> u32 {
    let (head, n) = remote::take_remote(&s.remote);
    if head == 0 {
        return 0;
    }
    let local = s.free.get() as usize;
    if local == 0 {
        s.free.set(head as *mut Block);
    } else {
        let wide = !s.is_narrow();
        let (mut a, mut b) = (local, head);
        // SAFETY: the local list is ours; the remote list was published with Release and taken
        // with Acquire, and its blocks are free blocks of `s`, now ours; both link alike.
        unsafe {
            loop {
                let next = remote::link_as(a, wide);
                if next == 0 {
                    // The local list ends first: the remote list follows it.
                    remote::set_link_as(a, head, wide);
                    break;
                }
                a = next;
                let next = remote::link_as(b, wide);
                if next == 0 {
                    // The remote list ends first: it goes in front.
                    remote::set_link_as(b, local, wide);
                    s.free.set(head as *mut Block);
                    break;
                }
                b = next;
            }
        }
    }
    s.free_zero.set(false);
    let n = n as u32;
    debug_assert!(s.used.get() >= n);
    s.used.set(s.used.get() - n);
    n
}

/// Gives an empty span's pages back to the page heap, or, if the span is on its owner's delayed
/// list, marks it [`ListTag::Releasing`] so that the owner releases it when it takes it off.
///
/// # Safety
/// The caller owns `s`, which holds no live block and is on no list.
pub(super) unsafe fn release_span(s: &Span) {
    debug_assert_eq!(s.used.get(), 0);
    // A thread may still be delivering this span to its owner: wait for it to finish.
    if remote::quiesce(&s.remote) {
        s.set_tag(ListTag::Releasing);
        return;
    }
    debug_assert_eq!(s.remote.load(Ordering::Relaxed), 0);
    s.owner.store(0, Ordering::Relaxed);
    stats::SPANS[s.class.get() as usize].fetch_sub(1, Ordering::Relaxed);
    // The page heap may advise pages back to the OS here, inside a `free`, which leaves
    // `errno` as it was.
    let _errno = crate::os::KeepErrno::new();
    // SAFETY: guaranteed by the caller.
    unsafe { chunk::free_pages(s as *const Span as *mut Span) };
}
