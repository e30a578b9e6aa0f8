//! Capturing a sampled allocation's stack, and the bounded table of the stacks sampled so far
//! with the estimates each stands for.
//!
//! A capture walks the stack with the unwinder's tables (`_Unwind_Backtrace`, through the
//! `backtrace` crate's unsynchronised walk), so it needs no frame pointers, allocates nothing
//! and takes no lock of ours: glibc's unwinder finds each frame's tables with
//! `_dl_find_object`, which takes no loader lock either. The table is one mapping made the first
//! time a sample is recorded, [`CAPACITY`] stacks at most (its pages are touched as stacks
//! arrive); a sample whose stack is new when the table is full is counted under one overflow
//! entry with no frames, so the totals stay right.
//!
//! A thread never waits for the table's lock while it holds it: a sampled allocation (or a
//! sampled object's free) by a signal handler that interrupted the thread there is skipped.
//! The profiler's own allocations (a dump's) are made outside the lock and sampled as any
//! others.

use core::cell::UnsafeCell;
use core::ptr;
use core::sync::atomic::{AtomicUsize, Ordering};

use super::RawStack;

/// Frames kept per stack (the innermost; the allocator's own take a few of them).
pub(crate) const MAX_DEPTH: usize = 64;
/// Stacks the table holds at most, the overflow entry included.
pub(crate) const CAPACITY: usize = 1 << 14;
/// Slots probed for a stack before it counts as overflow.
const PROBES: usize = 64;

/// One stack and its estimates.
#[repr(C)]
struct Entry {
    /// The stack's hash; 0 for an empty slot (a real hash of 0 is stored as 1).
    hash: u64,
    /// Frames in `pcs`.
    depth: usize,
    /// Return addresses, innermost first.
    pcs: [usize; MAX_DEPTH],
    /// Allocations, bytes, live allocations and live bytes this stack stands for.
    est: [f64; 4],
}

/// The table: a mapping of [`CAPACITY`] entries, the last of them the overflow entry.
struct Table {
    /// The entries; null until the first record.
    entries: *mut Entry,
    /// Stacks stored (the overflow entry not counted).
    stacks: usize,
    /// Samples counted under the overflow entry.
    overflowed: u64,
    /// Bumped by [`reset`]: records of an earlier generation are ignored when freed.
    generation: u32,
}

/// The table behind its lock, [`HOLDER`].
struct TableCell(UnsafeCell<Table>);

// SAFETY: the table is reached only by the thread that holds `HOLDER` (see `lock_table`).
unsafe impl Sync for TableCell {}

static TABLE: TableCell = TableCell(UnsafeCell::new(Table {
    entries: ptr::null_mut(),
    stacks: 0,
    overflowed: 0,
    generation: 1,
}));

/// Bytes of the table's mapping.
pub(crate) const TABLE_BYTES: usize = CAPACITY * core::mem::size_of::<Entry>();

const _: () = assert!(TABLE_BYTES.is_multiple_of(crate::os::OS_PAGE));

/// The table's lock: the holding thread's `pthread_self`, 0 when free. The word is the owner
/// itself, so a thread that finds its own id there (a signal handler that interrupted it while
/// it held the lock, or a `fork` handler of the forking thread, which holds it for the fork)
/// skips instead of waiting for itself; there is no moment at which the thread holds the lock
/// and the word says otherwise. Not a thread-local: a shared library would reach one through
/// `__tls_get_addr`. A waiter spins a little, then yields (the lock is held for a table lookup).
static HOLDER: AtomicUsize = AtomicUsize::new(0);

/// The thread writing a profile (`pthread_self`), 0 when none: its own allocations meanwhile
/// (symbolising allocates much) are not sampled, or they would be counted under the stack that
/// asked for the profile.
static DUMPING: AtomicUsize = AtomicUsize::new(0);

/// This thread writing a profile: its allocations are not sampled until it is dropped.
pub(crate) struct Dumping(bool);

impl Dumping {
    /// Marks this thread as writing a profile (one thread at a time: the callers hold the
    /// dump lock).
    pub(crate) fn start() -> Dumping {
        let me = crate::lock::this_thread();
        Dumping(
            DUMPING
                .compare_exchange(0, me, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok(),
        )
    }
}

impl Drop for Dumping {
    fn drop(&mut self) {
        if self.0 {
            DUMPING.store(0, Ordering::Relaxed);
        }
    }
}

/// Takes [`HOLDER`] for `me`; `false` when `me` holds it already.
fn take(me: usize) -> bool {
    let mut spins = 0u32;
    loop {
        match HOLDER.compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(h) if h == me => return false,
            Err(_) => {
                spins += 1;
                if spins < 100 {
                    core::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
}

/// The table, locked; `None` when this thread holds the lock already.
fn lock_table() -> Option<Held> {
    take(crate::lock::this_thread()).then(|| Held(()))
}

/// The table, locked by this thread.
struct Held(());

impl Drop for Held {
    fn drop(&mut self) {
        HOLDER.store(0, Ordering::Release);
    }
}

impl core::ops::Deref for Held {
    type Target = Table;
    fn deref(&self) -> &Table {
        // SAFETY: this thread holds the lock, so no other thread reaches the table.
        unsafe { &*TABLE.0.get() }
    }
}

impl core::ops::DerefMut for Held {
    fn deref_mut(&mut self) -> &mut Table {
        // SAFETY: as above.
        unsafe { &mut *TABLE.0.get() }
    }
}

/// Captures this thread's stack into `pcs`; returns the frames written. Inlined into the
/// sampling path with everything between it and the allocator's entry point: each frame costs
/// the unwinder a few thousand instructions (finding and running its call-frame information),
/// and the allocator's own frames are dropped from the profile anyway.
#[inline(always)]
pub(crate) fn capture(pcs: &mut [usize; MAX_DEPTH]) -> usize {
    let mut n = 0;
    // The libunwind backend (`_Unwind_Backtrace`) keeps no state of its own between walks.
    // SAFETY: so concurrent walks, ours or the program's, are independent, which is what the
    // unsynchronised walk needs.
    unsafe {
        backtrace::trace_unsynchronized(|f| {
            let ip = f.ip() as usize;
            if ip == 0 {
                // The end of the stack (some unwinders report the outermost frame as 0).
                return false;
            }
            pcs[n] = ip;
            n += 1;
            n < MAX_DEPTH
        });
    }
    n
}

/// FNV-1a over the addresses.
fn hash(pcs: &[usize]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &pc in pcs {
        h ^= pc as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h.max(1)
}

/// Whether this thread's allocations are sampled now (not while it writes a profile).
#[inline(always)]
pub(crate) fn sampling_here() -> bool {
    DUMPING.load(Ordering::Relaxed) != crate::lock::this_thread()
}

/// Records a sample of the stack `pcs[..depth]` (from [`capture`]) standing for `objects`
/// allocations of `bytes` in all; returns its id for [`adjust`], 0 when the sample is skipped
/// (a signal handler interrupted this thread inside the profiler, or the table cannot be
/// mapped).
#[inline(never)]
pub(crate) fn record(pcs: &[usize; MAX_DEPTH], depth: usize, objects: f64, bytes: f64) -> u32 {
    let h = hash(&pcs[..depth]);
    let Some(mut t) = lock_table() else {
        return 0;
    };
    if t.entries.is_null() {
        let Some(m) = crate::os::map(TABLE_BYTES) else {
            return 0;
        };
        t.entries = m.as_ptr().cast();
    }
    let overflow = CAPACITY - 1;
    let mut idx = overflow;
    let start = (h as usize) % overflow;
    for i in 0..PROBES {
        let j = (start + i) % overflow;
        // SAFETY: `j` < CAPACITY, inside the mapping, which we access under the lock only.
        let e = unsafe { &mut *t.entries.add(j) };
        if e.hash == h && e.depth == depth && e.pcs[..depth] == pcs[..depth] {
            idx = j;
            break;
        }
        if e.hash == 0 {
            e.hash = h;
            e.depth = depth;
            e.pcs[..depth].copy_from_slice(&pcs[..depth]);
            t.stacks += 1;
            idx = j;
            break;
        }
    }
    if idx == overflow {
        t.overflowed += 1;
    }
    // SAFETY: as above.
    let e = unsafe { &mut *t.entries.add(idx) };
    e.est[0] += objects;
    e.est[1] += bytes;
    e.est[2] += objects;
    e.est[3] += bytes;
    ((t.generation & 0xffff) << 16) | (idx as u32 + 1)
}

/// Adds `objects` and `bytes` (negative: takes them off) to the live estimates of the stack
/// `id` (from [`record`]): a sampled object freed or resized.
pub(crate) fn adjust(id: u32, objects: f64, bytes: f64) {
    let Some(t) = lock_table() else {
        // A signal handler's free while this thread holds the table: its sample stays live.
        return;
    };
    if id >> 16 != t.generation & 0xffff || t.entries.is_null() {
        return;
    }
    let idx = (id & 0xffff) as usize - 1;
    // SAFETY: `idx` came from `record` of this generation, inside the mapping.
    let e = unsafe { &mut *t.entries.add(idx) };
    e.est[2] += objects;
    e.est[3] += bytes;
}

/// Forgets every stack (profiling starts again): samples recorded before are ignored when
/// freed.
pub(crate) fn reset() {
    let Some(mut t) = lock_table() else {
        return;
    };
    t.generation = t.generation.wrapping_add(1).max(1);
    if !t.entries.is_null() {
        // The pages go back and read zero when touched again: no page is written here, and
        // the table holds memory again only as stacks arrive.
        // SAFETY: the mapping is ours, under the lock.
        if !unsafe { crate::os::decommit(t.entries.cast(), TABLE_BYTES) } {
            // Refused (it never is for a private anonymous mapping): cleared by hand.
            // SAFETY: as above.
            unsafe { ptr::write_bytes(t.entries, 0, CAPACITY) };
        }
    }
    t.stacks = 0;
    t.overflowed = 0;
}

/// Stacks stored and samples that overflowed the table.
pub(crate) fn counts() -> (usize, u64) {
    let Some(t) = lock_table() else {
        return (0, 0);
    };
    (t.stacks, t.overflowed)
}

/// Bytes the table maps (0 until the first sample).
pub(crate) fn table_bytes() -> usize {
    if lock_table().is_none_or(|t| t.entries.is_null()) {
        0
    } else {
        TABLE_BYTES
    }
}

/// A copy of one entry, taken under the lock.
#[derive(Clone, Copy)]
struct Copied {
    depth: usize,
    pcs: [usize; MAX_DEPTH],
    est: [f64; 4],
}

/// The stacks with their estimates. Allocates, never under the table's lock (an allocation or
/// a free there could sample or free a sample and take the lock again).
pub(crate) fn snapshot() -> Vec<RawStack> {
    let mut copied: Vec<Copied> = Vec::new();
    loop {
        let want = counts().0 + 2;
        copied.reserve(want);
        let Some(t) = lock_table() else {
            return Vec::new();
        };
        if t.entries.is_null() {
            return Vec::new();
        }
        if t.stacks + 1 > copied.capacity() {
            // More stacks arrived: reserve again, outside the lock.
            continue;
        }
        for i in 0..CAPACITY {
            // SAFETY: inside the mapping, under the lock.
            let e = unsafe { &*t.entries.add(i) };
            if e.hash == 0 && e.est == [0.0; 4] {
                continue;
            }
            // Within the capacity reserved (stacks + the overflow entry): no allocation.
            copied.push(Copied {
                depth: e.depth,
                pcs: e.pcs,
                est: e.est,
            });
        }
        break;
    }
    copied
        .iter()
        .map(|c| RawStack {
            pcs: c.pcs[..c.depth].to_vec(),
            alloc_objects: c.est[0],
            alloc_bytes: c.est[1],
            inuse_objects: c.est[2].max(0.0),
            inuse_bytes: c.est[3].max(0.0),
        })
        .collect()
}

/// Holds or releases the table's lock around `fork` (the forking thread; in the child, the
/// same thread id). In the child, no thread is writing a profile any more.
pub(crate) fn fork_lock(take_it: bool) {
    let me = crate::lock::this_thread();
    if take_it {
        take(me);
    } else {
        if HOLDER.load(Ordering::Relaxed) == me {
            HOLDER.store(0, Ordering::Release);
        }
        if DUMPING.load(Ordering::Relaxed) != me {
            DUMPING.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_never_waits_for_the_table_it_holds() {
        let held = lock_table().expect("the table is free");
        // What a signal handler's sample finds on this thread meanwhile: no lock, no wait.
        assert!(lock_table().is_none());
        let other = std::thread::spawn(|| {
            // Another thread waits (here: tries once) rather than skipping.
            HOLDER.load(Ordering::Relaxed) != 0
        });
        assert!(other.join().unwrap());
        drop(held);
        assert!(lock_table().is_some());
    }
}
