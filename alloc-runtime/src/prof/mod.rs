//! Heap profiling (cargo feature `profiling`): sampled allocations with their stacks, read as a
//! value ([`Profile`]) or written in the pprof format that `go tool pprof`, Pyroscope, Parca and
//! Grafana read.
//!
//! Layers, bottom up: `sampler.rs` (when to sample: a per-class countdown of allocations drawn
//! from the exponential distribution of bytes), `stacks.rs` (capturing a stack without
//! allocating or locking, and the bounded table of stacks with their counts), `pprof.rs`
//! (symbolising the stacks and encoding them, at dump time only), and this file (the public
//! API, the environment variables of C programs).

use core::cell::Cell;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

mod pprof;
mod sampler;
mod stacks;

pub(crate) use pprof::build_profile;
pub(crate) use sampler::{epoch, gap, rate, seed, set_rate};
pub(crate) use stacks::{counts, fork_lock, reset, snapshot, table_bytes, Dumping};

/// A sampled object's record, kept where its free finds it from the pointer alone: in its page
/// run's span descriptor (a medium object, or a sampled small one, which gets a run of its own)
/// or in its header (a huge object). Unsampled blocks have none and their frees never look.
#[repr(C)]
pub(crate) struct Sampled {
    /// The stack's id in the table (`stacks::record`); 0: not sampled.
    id: Cell<u32>,
    /// Allocations the sample stands for.
    objects: Cell<f32>,
    /// Bytes the sample stands for.
    bytes: Cell<f32>,
}

impl Sampled {
    /// No sample.
    pub(crate) const fn none() -> Sampled {
        Sampled {
            id: Cell::new(0),
            objects: Cell::new(0.0),
            bytes: Cell::new(0.0),
        }
    }

    /// Stores a record (see [`sample`]).
    pub(crate) fn set(&self, r: Record) {
        self.id.set(r.id);
        self.objects.set(r.objects);
        self.bytes.set(r.bytes);
    }

    /// On the object's free: takes its estimates off its stack's live counts, and clears the
    /// record (the descriptor or header is used again for other objects).
    #[inline]
    pub(crate) fn free(&self) {
        let id = self.id.get();
        if id != 0 {
            stacks::unrecord(id, self.objects.get() as f64, self.bytes.get() as f64);
            self.id.set(0);
        }
    }
}

/// What [`sample`] recorded, for the object's [`Sampled`].
#[derive(Clone, Copy)]
pub(crate) struct Record {
    id: u32,
    objects: f32,
    bytes: f32,
}

impl Record {
    /// Drops a record whose object was never handed out.
    pub(crate) fn forget(self) {
        stacks::unrecord(self.id, self.objects as f64, self.bytes as f64);
    }
}

/// Records a sampled allocation of `size` bytes, which was sampled with the probability of a
/// block of `block` bytes (its class's size; `size` for a large object): this thread's stack
/// with the allocations and bytes it stands for. `None` when the sample is skipped (profiling
/// is off, or a signal handler interrupted this thread inside the profiler).
pub(crate) fn sample(block: usize, size: usize) -> Option<Record> {
    let rate = rate();
    let p = sampler::probability(block, rate);
    if p <= 0.0 {
        return None;
    }
    let objects = 1.0 / p;
    let bytes = size as f64 / p;
    let id = stacks::record(objects, bytes);
    (id != 0).then_some(Record {
        id,
        objects: objects as f32,
        bytes: bytes as f32,
    })
}

/// Whether a large allocation of `size` bytes is to be sampled (a draw at the current rate).
#[inline]
pub(crate) fn draw_large(size: usize) -> bool {
    let rate = rate();
    rate != 0 && sampler::draw(size, rate)
}

/// Set by [`request_dump`] (a signal handler may call it): the next sampled allocation dumps.
static DUMP_REQUESTED: AtomicBool = AtomicBool::new(false);
/// The function that writes a requested dump (`fn()`, set by the public API), 0 when none.
static DUMPER: AtomicUsize = AtomicUsize::new(0);

/// Sets the function that writes a requested dump.
pub(crate) fn set_dumper(f: fn()) {
    DUMPER.store(f as usize, Ordering::Release);
}

/// Asks for a dump at the next sampled allocation (async-signal-safe: one atomic store).
pub(crate) fn request_dump() {
    DUMP_REQUESTED.store(true, Ordering::Release);
}

/// Writes a requested dump, if one is requested and a dumper is set. Called where a thread
/// holds no lock of the allocator and its heap is consistent (it allocates).
pub(crate) fn serve_dump_request() {
    if !DUMP_REQUESTED.load(Ordering::Relaxed) || !DUMP_REQUESTED.swap(false, Ordering::AcqRel) {
        return;
    }
    let f = DUMPER.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: only `set_dumper` stores a nonzero value, a `fn()`.
        let f: fn() = unsafe { core::mem::transmute::<usize, fn()>(f) };
        f();
    }
}

/// A heap profile: the sampled allocations' stacks, each with the estimate of the allocations
/// and bytes it stands for.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// The mean sampling interval in bytes the samples were taken at.
    pub rate: u64,
    /// When profiling started, in nanoseconds since the Unix epoch.
    pub start_nanos: i64,
    /// When this profile was taken, in nanoseconds since the Unix epoch.
    pub time_nanos: i64,
    /// One entry per distinct stack of the program's frames.
    pub samples: Vec<ProfileSample>,
}

/// The estimates of one stack of a [`Profile`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProfileSample {
    /// The program's frames, innermost (the caller of the allocator) first; the allocator's own
    /// frames are dropped.
    pub frames: Vec<Frame>,
    /// Estimated allocations made at this stack since profiling started.
    pub alloc_objects: u64,
    /// Estimated bytes allocated at this stack since profiling started.
    pub alloc_bytes: u64,
    /// Estimated allocations made at this stack that are still live.
    pub inuse_objects: u64,
    /// Estimated bytes allocated at this stack that are still live.
    pub inuse_bytes: u64,
}

/// One frame of a sample's stack: an address and what it resolved to. A frame inlined into
/// another is a frame of its own with the same address.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The instruction address (of the call, for a caller's frame).
    pub addr: usize,
    /// The function's demangled name, when the binary has symbols.
    pub function: Option<String>,
    /// The source file, when the binary has line information.
    pub file: Option<String>,
    /// The source line, when the binary has line information.
    pub line: Option<u32>,
}

/// A stack as captured (return addresses, innermost first, the allocator's frames included)
/// with its accumulated estimates: what `pprof.rs` turns into [`ProfileSample`]s.
#[derive(Clone, Debug, Default)]
pub(crate) struct RawStack {
    /// Return addresses as the unwinder gives them, innermost first (the first ones are the
    /// allocator's own frames).
    pub(crate) pcs: Vec<usize>,
    /// Estimated allocations at this stack since profiling started.
    pub(crate) alloc_objects: f64,
    /// Estimated bytes allocated at this stack since profiling started.
    pub(crate) alloc_bytes: f64,
    /// Estimated live allocations at this stack.
    pub(crate) inuse_objects: f64,
    /// Estimated live bytes at this stack.
    pub(crate) inuse_bytes: f64,
}
