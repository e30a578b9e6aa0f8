//! A model-based test of the allocator: random sequences of allocations, zeroed allocations,
//! reallocations and frees, through the generic entry points (`specalloc_runtime::alloc`,
//! `alloc_zeroed`, `realloc`, `dealloc`) and the size-specialised ones (`spec::One::<T>`),
//! on this thread and on a second one (so that blocks cross threads both ways and the second
//! thread's exit hands live blocks to the central pools), are checked against a shadow model:
//!
//! - every block is non-null, aligned, and (if zeroed) reads zero;
//! - live blocks never overlap;
//! - every block keeps its contents (a per-block, position-dependent byte pattern) until it is
//!   freed or resized; a resized block keeps the common prefix.
//!
//! proptest shrinks a failing sequence to a minimal one. The case count defaults to 64; set
//! `PROPTEST_CASES` for more.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::mpsc;

use proptest::prelude::*;
use specalloc_runtime::spec::One;

// `install!` (not a hand-written `#[global_allocator]`): the routines serve only a program
// whose global allocator is marked as `SpecAlloc` itself, and return null otherwise.
specalloc_runtime::install!(static GLOBAL);

// ---------------------------------------------------------------------------------------------
// The menu of types for the size-specialised entry points
// ---------------------------------------------------------------------------------------------

#[allow(dead_code)] // only its layout matters
#[repr(align(64))]
struct Align64([u8; 64]);

#[allow(dead_code)] // only its layout matters
#[repr(align(32))]
struct Align32([u8; 40]);

/// One type's specialised routines and layout.
struct SpecTy {
    name: &'static str,
    plain: fn() -> *mut u8,
    zeroed: fn() -> *mut u8,
    layout: Layout,
}

macro_rules! spec_ty {
    ($t:ty) => {
        SpecTy {
            name: stringify!($t),
            plain: One::<$t>::PLAIN,
            zeroed: One::<$t>::ZEROED,
            layout: Layout::new::<$t>(),
        }
    };
}

/// Tiny (1-15 bytes), small classes, an over-aligned class, and large types (which the
/// specialised entry points send to the global allocator's generic path).
static SPEC: [SpecTy; 14] = [
    spec_ty!([u8; 1]),
    spec_ty!([u8; 3]),
    spec_ty!([u8; 7]),
    spec_ty!([u16; 5]),
    spec_ty!([u8; 15]),
    spec_ty!([u64; 1]),
    spec_ty!([u64; 2]),
    spec_ty!([u64; 3]),
    spec_ty!([u8; 100]),
    spec_ty!([u64; 128]),
    spec_ty!([u8; 5000]),
    spec_ty!(Align64),
    spec_ty!(Align32),
    spec_ty!([u8; 40000]),
];

// ---------------------------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    /// Generic allocation; `remote`: done by the second thread.
    Alloc {
        size: usize,
        align: usize,
        zeroed: bool,
        remote: bool,
    },
    /// Size-specialised allocation of `SPEC[ty]`.
    Spec { ty: usize, zeroed: bool },
    /// Resizes a live block (the `pick % live`-th) to `new_size`.
    Realloc { pick: usize, new_size: usize },
    /// Frees a live block; `remote`: freed by the second thread.
    Dealloc { pick: usize, remote: bool },
}

/// Sizes, skewed towards tiny and small ones, with some medium and a few huge ones.
fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => 1usize..16,
        8 => 16usize..=1024,
        6 => 1025usize..=32 * 1024,
        2 => 32 * 1024 + 1..=1usize << 20,
        1 => (1usize << 20) + 1..=4usize << 20,
    ]
}

/// Alignments 1 to 4096, mostly the natural ones.
fn align() -> impl Strategy<Value = usize> {
    prop_oneof![
        8 => (0u32..=4).prop_map(|s| 1usize << s),
        1 => (5u32..=12).prop_map(|s| 1usize << s),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (size(), align(), any::<bool>(), prop::bool::weighted(0.15)).prop_map(
            |(size, align, zeroed, remote)| Op::Alloc { size, align, zeroed, remote }
        ),
        4 => (0..SPEC.len(), any::<bool>()).prop_map(|(ty, zeroed)| Op::Spec { ty, zeroed }),
        2 => (0usize..1024, size()).prop_map(|(pick, new_size)| Op::Realloc { pick, new_size }),
        5 => (0usize..1024, prop::bool::weighted(0.2))
            .prop_map(|(pick, remote)| Op::Dealloc { pick, remote }),
    ]
}

// ---------------------------------------------------------------------------------------------
// The second thread
// ---------------------------------------------------------------------------------------------

enum Req {
    Alloc(Layout, bool),
    Free(usize, Layout),
}

/// A thread that allocates and frees on request (addresses travel as `usize`).
struct Worker {
    req: mpsc::Sender<Req>,
    done: mpsc::Receiver<usize>,
    thread: std::thread::JoinHandle<()>,
}

impl Worker {
    fn start() -> Worker {
        let (req, rx) = mpsc::channel::<Req>();
        let (tx, done) = mpsc::channel::<usize>();
        let thread = std::thread::spawn(move || {
            for r in rx {
                let out = match r {
                    Req::Alloc(layout, false) => specalloc_runtime::alloc(layout) as usize,
                    Req::Alloc(layout, true) => specalloc_runtime::alloc_zeroed(layout) as usize,
                    Req::Free(p, layout) => {
                        // SAFETY: the main thread hands over a live block of `layout` and
                        // forgets it.
                        unsafe { specalloc_runtime::dealloc(p as *mut u8, layout) };
                        0
                    }
                };
                if tx.send(out).is_err() {
                    break;
                }
            }
        });
        Worker { req, done, thread }
    }

    fn call(&self, r: Req) -> usize {
        self.req.send(r).expect("worker gone");
        self.done.recv().expect("worker gone")
    }

    /// Ends the thread: its heap's spans with live blocks go to the central pools.
    fn stop(self) {
        drop(self.req);
        self.thread.join().expect("worker panicked");
    }
}

// ---------------------------------------------------------------------------------------------
// The shadow model
// ---------------------------------------------------------------------------------------------

/// A live block and the pattern it holds.
struct Block {
    ptr: usize,
    layout: Layout,
    seed: u8,
    origin: String,
}

/// The byte at offset `i` of a block filled with `seed`.
#[inline]
fn pattern(seed: u8, i: usize) -> u8 {
    seed.wrapping_add((i as u8).wrapping_mul(31)) ^ (i >> 8) as u8
}

fn fill(p: usize, len: usize, seed: u8) {
    // SAFETY: `p` is a live block of at least `len` bytes that this model owns.
    let s = unsafe { std::slice::from_raw_parts_mut(p as *mut u8, len) };
    for (i, b) in s.iter_mut().enumerate() {
        *b = pattern(seed, i);
    }
}

fn check(p: usize, len: usize, seed: u8, what: &dyn Fn() -> String) {
    // SAFETY: `p` is a live block of at least `len` bytes that this model owns.
    let s = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
    if let Some(i) = (0..len).find(|&i| s[i] != pattern(seed, i)) {
        panic!(
            "{}: byte {i} of {len} is {:#04x}, want {:#04x}",
            what(),
            s[i],
            pattern(seed, i)
        );
    }
}

struct Model {
    live: Vec<Block>,
    /// Live ranges: start -> end.
    ranges: BTreeMap<usize, usize>,
    next_seed: u8,
    worker: Worker,
}

impl Model {
    fn new() -> Model {
        Model {
            live: Vec::new(),
            ranges: BTreeMap::new(),
            next_seed: 1,
            worker: Worker::start(),
        }
    }

    /// Records a new block: checks it, fills it, and checks it overlaps no live block.
    fn add(&mut self, p: *mut u8, layout: Layout, zeroed: bool, origin: String) {
        let p = p as usize;
        assert!(p != 0, "{origin}: null");
        assert_eq!(p % layout.align(), 0, "{origin}: misaligned block {p:#x}");
        if zeroed {
            // SAFETY: a fresh block of `layout.size()` bytes.
            let s = unsafe { std::slice::from_raw_parts(p as *const u8, layout.size()) };
            if let Some(i) = s.iter().position(|&b| b != 0) {
                panic!("{origin}: zeroed block {p:#x} has {:#04x} at {i}", s[i]);
            }
        }
        self.insert_range(p, layout.size(), &origin);
        let seed = self.next_seed;
        self.next_seed = self.next_seed.wrapping_add(37) | 1;
        fill(p, layout.size(), seed);
        self.live.push(Block {
            ptr: p,
            layout,
            seed,
            origin,
        });
    }

    fn insert_range(&mut self, p: usize, len: usize, origin: &str) {
        let end = p + len;
        if let Some((&s, &e)) = self.ranges.range(..=p).next_back() {
            assert!(
                e <= p,
                "{origin}: block [{p:#x}, {end:#x}) overlaps live [{s:#x}, {e:#x})"
            );
        }
        if let Some((&s, &e)) = self.ranges.range(p..).next() {
            assert!(
                s >= end,
                "{origin}: block [{p:#x}, {end:#x}) overlaps live [{s:#x}, {e:#x})"
            );
        }
        self.ranges.insert(p, end);
    }

    /// Takes a live block out of the model after checking its contents.
    fn take(&mut self, pick: usize) -> Option<Block> {
        if self.live.is_empty() {
            return None;
        }
        let b = self.live.swap_remove(pick % self.live.len());
        check(b.ptr, b.layout.size(), b.seed, &|| {
            format!("{} at {:#x} before free/realloc", b.origin, b.ptr)
        });
        self.ranges.remove(&b.ptr);
        Some(b)
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Alloc {
                size,
                align,
                zeroed,
                remote,
            } => {
                let layout = Layout::from_size_align(size, align).unwrap();
                let p = if remote {
                    self.worker.call(Req::Alloc(layout, zeroed)) as *mut u8
                } else if zeroed {
                    specalloc_runtime::alloc_zeroed(layout)
                } else {
                    specalloc_runtime::alloc(layout)
                };
                let how = match (remote, zeroed) {
                    (false, false) => "alloc",
                    (false, true) => "alloc_zeroed",
                    (true, false) => "remote alloc",
                    (true, true) => "remote alloc_zeroed",
                };
                self.add(p, layout, zeroed, format!("{how}({size}, {align})"));
            }
            Op::Spec { ty, zeroed } => {
                let t = &SPEC[ty];
                let p = if zeroed { (t.zeroed)() } else { (t.plain)() };
                let how = if zeroed { "ZEROED" } else { "PLAIN" };
                self.add(p, t.layout, zeroed, format!("One::<{}>::{how}", t.name));
            }
            Op::Realloc { pick, new_size } => {
                let Some(b) = self.take(pick) else { return };
                // SAFETY: a live block of `b.layout`; small sizes round up far below isize::MAX.
                let q = unsafe { specalloc_runtime::realloc(b.ptr as *mut u8, b.layout, new_size) };
                let origin = format!(
                    "realloc({}, {} -> {new_size}) of {}",
                    b.layout.align(),
                    b.layout.size(),
                    b.origin
                );
                assert!(!q.is_null(), "{origin}: null");
                check(q as usize, b.layout.size().min(new_size), b.seed, &|| {
                    format!("{origin}: kept prefix at {q:p}")
                });
                let layout = Layout::from_size_align(new_size, b.layout.align()).unwrap();
                self.add(q, layout, false, origin);
            }
            Op::Dealloc { pick, remote } => {
                let Some(b) = self.take(pick) else { return };
                if remote {
                    self.worker.call(Req::Free(b.ptr, b.layout));
                } else {
                    // SAFETY: a live block of `b.layout`, dropped from the model.
                    unsafe { specalloc_runtime::dealloc(b.ptr as *mut u8, b.layout) };
                }
            }
        }
    }

    /// Checks every live block, ends the second thread (its spans go to the central pools),
    /// then frees everything from this thread.
    fn finish(mut self) {
        for b in &self.live {
            check(b.ptr, b.layout.size(), b.seed, &|| {
                format!("{} at {:#x} at the end", b.origin, b.ptr)
            });
        }
        self.worker.stop();
        for b in self.live.drain(..) {
            // SAFETY: a live block of `b.layout`.
            unsafe { specalloc_runtime::dealloc(b.ptr as *mut u8, b.layout) };
        }
    }
}

fn run(ops: &[Op]) {
    let mut m = Model::new();
    for op in ops {
        m.apply(op);
    }
    m.finish();
}

fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        // No regression files in the source tree; a failure prints its minimal sequence.
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn allocator_matches_model(ops in prop::collection::vec(op(), 1..200)) {
        run(&ops);
    }
}

/// A fixed sequence through every specialised type and every size range, so the model's
/// plumbing is exercised even with `PROPTEST_CASES=0`.
#[test]
fn every_entry_point_once() {
    let mut ops = Vec::new();
    for ty in 0..SPEC.len() {
        ops.push(Op::Spec { ty, zeroed: false });
        ops.push(Op::Spec { ty, zeroed: true });
    }
    for (i, &size) in [
        1,
        7,
        15,
        16,
        100,
        4096,
        32768,
        32769,
        1 << 20,
        (1 << 20) + 1,
    ]
    .iter()
    .enumerate()
    {
        for align in [1, 8, 64, 4096] {
            ops.push(Op::Alloc {
                size,
                align,
                zeroed: i % 2 == 0,
                remote: align == 64,
            });
        }
    }
    let n = ops.len();
    for i in 0..n / 3 {
        ops.push(Op::Realloc {
            pick: i * 7,
            new_size: [3, 200, 50_000, 2 << 20][i % 4],
        });
    }
    for i in 0..n / 2 {
        ops.push(Op::Dealloc {
            pick: i * 13,
            remote: i % 3 == 0,
        });
    }
    run(&ops);
}
