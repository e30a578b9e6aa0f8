//! The trim lock between a heap's owner and the background trimmer (the protocol is in
//! `trim_proto.rs`, shared verbatim with the loom model in `tests/loom_trim.rs`): the owner holds
//! it on every slow path, through [`Heap::enter`]; the trimmer (`idle.rs`) tries it.

use core::hint::spin_loop;
use core::sync::atomic::{compiler_fence, AtomicU32, AtomicU8, AtomicUsize, Ordering};

use super::Heap;
use crate::remote::COUNT_SHIFT;
use crate::span::Span;

include!("../trim_proto.rs");

/// The owner's barrier between making its word odd and reading the trimmer's: the compiler's
/// only; the trimmer's `membarrier` runs the hardware barrier on this thread (see
/// `trim_proto.rs`).
#[inline(always)]
fn light_barrier() {
    compiler_fence(Ordering::SeqCst);
}

/// `membarrier(2)`'s state in this process: not asked yet, registered, or not to be had.
static MEMBARRIER: AtomicU8 = AtomicU8::new(MB_UNKNOWN);
const MB_UNKNOWN: u8 = 0;
const MB_READY: u8 = 1;
const MB_NONE: u8 = 2;

/// The trimmer's barrier: `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, a full memory barrier
/// on every running thread of the process (Linux 4.14 or later), registered on first use. False
/// where the kernel (or a seccomp filter) refuses it: the trimmer then takes no heap's lock and
/// gives back only what the central pools and the page heap hold.
fn heavy_barrier() -> bool {
    if !barrier_ready() {
        return false;
    }
    // SAFETY: `membarrier` takes no pointer; the command runs the barrier.
    let r = unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            libc::MEMBARRIER_CMD_PRIVATE_EXPEDITED,
            0,
            0,
        )
    };
    r == 0
}

/// Whether the trimmer can take heaps' trim locks: `membarrier` registered for this process
/// (asked once; a registration lasts the address space's life, `fork` included).
pub(super) fn barrier_ready() -> bool {
    let mut state = MEMBARRIER.load(Ordering::Relaxed);
    if state == MB_UNKNOWN {
        // SAFETY: `membarrier` takes no pointer; the command asks for registration only.
        let r = unsafe {
            libc::syscall(
                libc::SYS_membarrier,
                libc::MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED,
                0,
                0,
            )
        };
        state = if r == 0 { MB_READY } else { MB_NONE };
        MEMBARRIER.store(state, Ordering::Relaxed);
    }
    state == MB_READY
}

/// The owner's hold on its heap's trim lock, released when dropped (if this slow path took it).
pub(crate) struct OwnerGuard<'a> {
    /// The owner word and the value it takes on leaving.
    held: Option<(&'a AtomicU32, u32)>,
}

impl Drop for OwnerGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some((w, to)) = self.held {
            owner_leave(w, to);
        }
    }
}

impl Heap {
    /// The owner enters a slow path of `self` (see [`OwnerGuard`]); the owner word it makes odd
    /// also tells the trimmer the heap is not idle.
    ///
    /// `self` must be this thread's heap, or the shared heap under its lock.
    #[inline]
    pub(crate) fn enter(&self) -> OwnerGuard<'_> {
        OwnerGuard {
            held: owner_enter(&self.trim_owner, &self.trim_trimmer)
                .map(|to| (&self.trim_owner, to)),
        }
    }

    /// The owner word: odd while the owner is in a slow path; changes on each entry.
    pub(super) fn owner_word(&self) -> u32 {
        self.trim_owner.load(Ordering::Relaxed)
    }
}

/// Whether `s`, a span on a list of a heap whose trim lock the caller holds, has no live block.
#[inline]
pub(super) fn no_live_block(s: &Span) -> bool {
    holds_no_live_block(&s.remote, s.used.atomic())
}

/// Takes `h`'s trim lock as its owner does, around a `fork` of its thread (the owner is in no
/// slow path then).
pub(super) fn fork_hold(h: &Heap) {
    let took = owner_enter(&h.trim_owner, &h.trim_trimmer);
    debug_assert!(took.is_some(), "fork from inside a slow path");
}

/// Releases what [`fork_hold`] took (in the parent, or in the child). A thread that had no heap
/// when the fork began may have got one from a later `pthread_atfork` handler: that one was not
/// taken, and its word is even.
pub(super) fn fork_release(h: &Heap) {
    let v = h.trim_owner.load(Ordering::Relaxed);
    if v & 1 == 1 {
        owner_leave(&h.trim_owner, v.wrapping_add(1));
    }
}

/// In a `fork` child, before any slow path runs there: clears the trimmer word of the forking
/// thread's heap or of a pooled heap. The trimmer, which did not survive the fork, may have set
/// it as it tried the heap (and would have backed off: the owner held its lock, or a pooled heap
/// is not active), and the heap's next owner would wait for it forever. Other threads' heaps
/// keep theirs: the trimmer may have been in the middle of one, and no thread takes them over.
pub(super) fn fork_child_free(h: &Heap) {
    h.trim_trimmer.store(0, Ordering::Relaxed);
}
