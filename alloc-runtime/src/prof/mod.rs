//! Heap profiling (cargo feature `profiling`): sampled allocations with their stacks, read as a
//! value ([`Profile`]) or written in the pprof format that `go tool pprof`, Pyroscope, Parca and
//! Grafana read.
//!
//! Layers, bottom up: `sampler.rs` (when to sample: a per-class countdown of allocations drawn
//! from the exponential distribution of bytes), `stacks.rs` (capturing a stack without
//! allocating or locking, and the bounded table of stacks with their counts), `pprof.rs`
//! (symbolising the stacks and encoding them, at dump time only), `dumps.rs` (the dump lock,
//! the thread that writes requested dumps, `fork`), and this file (the records the sampled
//! objects keep). The public API is `crate::profile`.

use core::cell::Cell;

mod dumps;
mod pprof;
mod sampler;
mod stacks;

pub(crate) use dumps::{
    dump_lock, dumps_possible, on_load, request_dump, set_dumper, start_dumper,
};
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

    /// The object was resized in place from `old` to `new` bytes (a large object). It stays
    /// sampled with the probability its new size gives, without a new walk of the stack where it
    /// can: a grown object that was not sampled is sampled with the probability of the bytes it
    /// grew by (the two draws together give the new size's), a shrunk one that was sampled stays
    /// so with the ratio of the two probabilities; a sample's estimates follow the new size. (A
    /// buffer grown in small steps would otherwise walk the stack at each step once it is large.)
    pub(crate) fn resized(&self, old: usize, new: usize) {
        let rate = rate();
        if rate == 0 {
            return;
        }
        let p_new = sampler::probability(new, rate);
        let id = self.id.get();
        if id != 0 {
            if new < old && !sampler::chance(p_new / sampler::probability(old, rate)) {
                self.free();
                return;
            }
            let objects = (1.0 / p_new) as f32;
            let bytes = (new as f64 / p_new) as f32;
            stacks::adjust(
                id,
                objects as f64 - self.objects.get() as f64,
                bytes as f64 - self.bytes.get() as f64,
            );
            self.objects.set(objects);
            self.bytes.set(bytes);
        } else if new > old && sampler::draw(new - old, rate) {
            if let Some(r) = sample(new, new) {
                self.set(r);
            }
        }
    }

    /// Whether the object was sampled (the checked mode's question).
    #[cfg(feature = "checked")]
    #[inline]
    pub(crate) fn is_set(&self) -> bool {
        self.id.get() != 0
    }

    /// On the object's free: takes its estimates off its stack's live counts, and clears the
    /// record (the descriptor or header is used again for other objects).
    #[inline]
    pub(crate) fn free(&self) {
        let id = self.id.get();
        if id != 0 {
            stacks::adjust(id, -(self.objects.get() as f64), -(self.bytes.get() as f64));
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
        stacks::adjust(self.id, -(self.objects as f64), -(self.bytes as f64));
    }
}

/// Records a sampled allocation of `size` bytes, which was sampled with the probability of a
/// block of `block` bytes (its class's size; `size` for a large object): this thread's stack
/// with the allocations and bytes it stands for. `None` when the sample is skipped (profiling
/// is off, or a signal handler interrupted this thread inside the profiler).
#[inline(always)]
pub(crate) fn sample(block: usize, size: usize) -> Option<Record> {
    let rate = rate();
    let p = sampler::probability(block, rate);
    if p <= 0.0 || !stacks::sampling_here() {
        return None;
    }
    let mut pcs = [0usize; stacks::MAX_DEPTH];
    let depth = stacks::capture(&mut pcs);
    // Rounded as the record keeps them, so that the free takes off exactly what was added.
    let objects = (1.0 / p) as f32;
    let bytes = (size as f64 / p) as f32;
    let id = stacks::record(&pcs, depth, objects as f64, bytes as f64);
    (id != 0).then_some(Record { id, objects, bytes })
}

/// Whether a large allocation of `size` bytes is to be sampled (a draw at the current rate).
#[inline]
pub(crate) fn draw_large(size: usize) -> bool {
    let rate = rate();
    rate != 0 && sampler::draw(size, rate)
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
