//! The size sweep's shared logic: the sizes, paths and shapes swept, the
//! configurations and how each is built, the line formats the worker and the
//! driver exchange, the `nm` check that every worker binary must pass before
//! it is timed, and the summaries printed under the tables.
//!
//! The sweep itself is two binaries: `src/bin/sweep/` (the driver: builds,
//! verifies, runs interleaved rounds, prints tables) and
//! `src/bin/sweep_worker.rs` (one build per configuration; runs the timed
//! loops). Everything here is pure logic, so it is unit-tested.
//!
//! # Why the worker is built several times
//!
//! Cargo unifies features: if any crate of a build enables the runtime's
//! `no-size-specialized` opt-out, every crate of that build gets it, and an
//! "A/B" comparison silently compares B with B. So each configuration is its
//! own `cargo build` with exactly its features (all in one target directory:
//! cargo keeps each feature set's artifacts apart), and each binary is
//! checked ([`verify`]) before any of its samples are used: its
//! self-description must match the configuration, and `nm` must show the
//! size-specialised routine symbols where they belong (every specialised call
//! resolves to the routine of its size) and nowhere else (zero in the opt-out
//! build).

mod check;
mod headline;
mod lines;
mod nm;
mod summary;
#[cfg(test)]
mod tests;

pub use check::*;
pub use headline::*;
pub use lines::*;
pub use nm::*;
pub use summary::*;

pub use crate::workers::{target_dir, workspace_root};

/// Every size swept, in bytes: the tiny sizes 1 to 15, then the reference's
/// sweep from 16 to 1024 (its 8 is the tiny row 8).
pub const SIZES: [usize; 28] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160,
    256, 512, 1024,
];

/// The sizes of the Go reference's sweep (8 to 1024 bytes).
pub const REFERENCE_SIZES: [usize; 14] =
    [8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160, 256, 512, 1024];

/// Sizes served by the tiny allocator (1 to 15 bytes).
pub const TINY_SIZES: [usize; 15] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

/// Blocks allocated per repetition of the `alloc` shape.
pub const BATCH: usize = 1000;

/// The symbol the worker exports so the driver can relate the addresses the
/// worker prints at run time to those `nm` reports (position-independent
/// executables are loaded at a random base).
pub const MARKER_SYMBOL: &str = "sweep_worker_marker";

/// The function the worker calls between callgrind measurement segments;
/// callgrind dumps its counters on every entry (`--dump-before`).
pub const BOUNDARY_SYMBOL: &str = "sweep_cg_boundary";

/// Prefix of the size-specialised routines' demangled symbol names.
pub const ROUTINE_PREFIX: &str = "specalloc_runtime::routines::";

/// The shared `pair` loop of [`crate::sweep_loops`], whose instances the
/// generic configurations' cells run (demangled, without hash: every
/// instance has this name).
pub const PAIR_LOOP: &str = "specalloc_bench::sweep_loops::pair";

/// The generic out-of-line path (`std::alloc::alloc` through the global
/// allocator, as `Box::new` does): every comparison's baseline.
pub const GENERIC: &str = "generic";
/// The size-specialised entry points (`spec::uninit` / `spec::zeroed`).
pub const SPECIALISED: &str = "specialised";
/// The fully inlined generic path (`specalloc_runtime::alloc_inline`).
pub const INLINE: &str = "inline";
/// `std::alloc::alloc` called directly in the crate that declares the
/// `#[global_allocator]`, where the allocator shim may be inlined (what
/// `Box::new` costs in that crate).
pub const LOCAL: &str = "generic-local";
/// The specialised entry points in a build with the opt-out switch on.
pub const OPT_OUT: &str = "opt-out";
/// Suffix of the A/A control's configurations: a second process of the
/// specialised build, running the very same cells.
pub const AA_SUFFIX: &str = " A/A";
/// The other allocators, each the global allocator of its own build.
pub const GLOBALS: [&str; 4] = ["system", "mimalloc", "jemalloc", "snmalloc"];

/// The two allocation paths: Rust's counterparts of Go's pointer-free
/// (`alloc`) and pointer-containing (`alloc_zeroed`, memory must read zero)
/// paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AllocPath {
    /// Uninitialised memory.
    Plain,
    /// Memory that reads zero.
    Zeroed,
}

impl AllocPath {
    /// Both paths.
    pub const ALL: [AllocPath; 2] = [AllocPath::Plain, AllocPath::Zeroed];

    /// The path's name in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            AllocPath::Plain => "plain",
            AllocPath::Zeroed => "zeroed",
        }
    }

    /// Parses [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// What one sample measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shape {
    /// [`BATCH`] allocations into an array, timed; then their frees, untimed.
    /// Reported per allocation.
    Alloc,
    /// One allocation freed at once, repeatedly. Reported per pair.
    Pair,
}

impl Shape {
    /// Both shapes.
    pub const ALL: [Shape; 2] = [Shape::Alloc, Shape::Pair];

    /// The shape's name in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Alloc => "alloc",
            Shape::Pair => "pair",
        }
    }

    /// Parses [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    /// What one operation of this shape is, for table headings.
    pub fn unit(self) -> &'static str {
        match self {
            Shape::Alloc => "ns per allocation (1000 allocations timed, their frees not)",
            Shape::Pair => "ns per alloc+free pair",
        }
    }
}

/// What a worker build must turn out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// specalloc global, specialisation on: runs `specialised`, `generic`,
    /// `inline`; every specialised call must reach its routine.
    Specialised,
    /// specalloc global, opt-out switch on: runs `opt-out`; no routine may be
    /// in the binary.
    OptOut,
    /// The named allocator global: runs one configuration of that name (the
    /// generic shape).
    Global(&'static str),
}

/// One build of the worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Build {
    /// Name of the build (and of the folder its binary is copied to).
    pub name: &'static str,
    /// Features of `specalloc-bench` it is built with (and no others).
    pub features: &'static [&'static str],
    /// What it must be.
    pub expect: Expect,
}

/// The worker builds of a sweep; the peer allocators only with `peers`.
pub fn builds(peers: bool) -> Vec<Build> {
    let mut v = vec![
        Build {
            name: SPECIALISED,
            features: &[],
            expect: Expect::Specialised,
        },
        Build {
            name: OPT_OUT,
            features: &["no-size-specialized"],
            expect: Expect::OptOut,
        },
        Build {
            name: "system",
            features: &["global-system"],
            expect: Expect::Global("system"),
        },
    ];
    if peers {
        v.push(Build {
            name: "mimalloc",
            features: &["global-mimalloc"],
            expect: Expect::Global("mimalloc"),
        });
        v.push(Build {
            name: "jemalloc",
            features: &["global-jemalloc"],
            expect: Expect::Global("jemalloc"),
        });
        v.push(Build {
            name: "snmalloc",
            features: &["global-snmalloc"],
            expect: Expect::Global("snmalloc"),
        });
    }
    v
}

/// The table columns, in order, for the configurations that passed their
/// checks (`available`): generic first (the baseline), then specialised, its
/// A/A control, inline, opt-out and the other allocators.
pub fn columns(available: &[String]) -> Vec<String> {
    let mut order = vec![
        GENERIC.to_string(),
        SPECIALISED.to_string(),
        format!("{SPECIALISED}{AA_SUFFIX}"),
        INLINE.to_string(),
        LOCAL.to_string(),
        OPT_OUT.to_string(),
    ];
    order.extend(GLOBALS.iter().map(|g| g.to_string()));
    order.retain(|c| available.contains(c));
    order
}
