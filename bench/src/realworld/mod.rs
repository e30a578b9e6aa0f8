//! The real-workload suite: small programs that allocate the way real Rust
//! programs do — through `Box`, `Vec`, `String`, `BTreeMap`, `HashMap`,
//! serde_json and syn, i.e. through the allocator's generic `GlobalAlloc`
//! path, never through the size-specialised entry points.
//!
//! Each program is a plain function `fn(scale) -> checksum`: deterministic
//! (no clock, no address, no `HashMap` iteration order reaches the checksum),
//! so every allocator's run of a program must print the same checksum, and a
//! different one means a broken allocator (or a broken program). `scale` is
//! the amount of work: [`Program::default_scale`] runs for a few hundred
//! milliseconds on the reference machine, [`Program::quick_scale`] a few
//! tens; `1` is tiny (the tests' size).
//!
//! The driver (`src/bin/realworld.rs`) builds `src/bin/realworld_worker.rs`
//! once per allocator and runs these functions in worker processes; the
//! tests call them in-process.
//!
//! The programs whose own code has constant-size allocation sites are
//! compiled twice, by `plain_and_annotated!`: as written, and under
//! `#[specialize]` ([`annotated`]), so that one worker measures both
//! (`bench/scripts/suite_spec_cost.sh`, the worker built with the `annotated`
//! feature). The suite itself runs the plain ones.
//! The sites: `graph`'s two `Box::new(Tree { .. })` (16 B) and three
//! `vec![x; NODES]`; `rebuild`'s `Box::new(Record { .. })` (96 B); the
//! `pipeline`s' `Box::new(Msg { .. })` (80 B); `json`'s four
//! `"…".to_string()` keys. `syn`, `btree`, `server`, `threads`, `text`, `grow` and `largebuf` have none: their
//! sizes are known only at run time, or their allocations are made inside
//! syn, serde_json and std.

use crate::harness::SplitMix64;

/// Compiles the program source it is given twice, as `pub mod plain` (the
/// tokens as written) and `pub mod annotated` (the same tokens under
/// `#[specalloc::specialize]`, which rewrites its constant-size allocation
/// sites into the size-specialised entry points). Both see the enclosing
/// module's items (`use super::*`). Used by the programs' files; the two
/// modules' functions must return the same checksums (a test checks it).
macro_rules! plain_and_annotated {
    ($($body:tt)*) => {
        /// The program as written: what the suite runs.
        pub mod plain {
            #[allow(unused_imports)]
            use super::*;
            $($body)*
        }

        /// The same source under `#[specialize]`.
        #[specalloc::specialize]
        pub mod annotated {
            #[allow(unused_imports)]
            use super::*;
            $($body)*
        }
    };
}

pub mod collections;
pub mod graph;
pub mod json;
pub mod parse;
pub mod pipeline;
pub mod rebuild;
pub mod report;
pub mod server;
pub mod text;

/// One program of the suite.
#[derive(Clone, Copy, Debug)]
pub struct Program {
    /// Name on the command line and in tables.
    pub name: &'static str,
    /// What it does, in a few words.
    pub what: &'static str,
    /// The work at scale `scale`, returning the checksum.
    pub run: fn(u32) -> u64,
    /// Scale of a measured run (a few hundred ms on the reference machine).
    pub default_scale: u32,
    /// Scale of `--quick` and of the callgrind runs.
    pub quick_scale: u32,
}

/// Every program of the suite, in table order (the producer/consumer
/// program once per producer count: 1, 2, 4 and 8 threads).
pub const PROGRAMS: &[Program] = &[
    Program {
        name: "json",
        what: "serde_json Value: build, print, parse, edit, drop",
        run: json::run,
        default_scale: 64,
        quick_scale: 8,
    },
    Program {
        name: "syn",
        what: "syn: full AST of Rust sources (own + generated), walked",
        run: parse::run,
        default_scale: 10,
        quick_scale: 1,
    },
    Program {
        name: "btree",
        what: "BTreeMap/HashMap churn with short Strings; append, realloc growth",
        run: collections::run,
        default_scale: 12,
        quick_scale: 2,
    },
    Program {
        name: "pipeline1",
        what: "1 producer -> consumer over mpsc; consumer frees (cross-thread)",
        run: pipeline::run::<1>,
        default_scale: 60,
        quick_scale: 8,
    },
    Program {
        name: "pipeline2",
        what: "2 producers -> consumer over mpsc; consumer frees (cross-thread)",
        run: pipeline::run::<2>,
        default_scale: 60,
        quick_scale: 8,
    },
    Program {
        name: "pipeline4",
        what: "4 producers -> consumer over mpsc; consumer frees (cross-thread)",
        run: pipeline::run::<4>,
        default_scale: 60,
        quick_scale: 8,
    },
    Program {
        name: "pipeline8",
        what: "8 producers -> consumer over mpsc; consumer frees (cross-thread)",
        run: pipeline::run::<8>,
        default_scale: 60,
        quick_scale: 8,
    },
    Program {
        name: "server",
        what: "larson-style: 4 tables of 5,000 objects (8-1,000 B) replaced at random by threads that hand them on and exit",
        run: server::run,
        default_scale: 60,
        quick_scale: 8,
    },
    Program {
        name: "server-joined",
        what: "server, each worker joined before the next of its table starts (no thread left exiting)",
        run: server::run_joined,
        default_scale: 60,
        quick_scale: 8,
    },
    Program {
        name: "threads",
        what: "a thread per connection: a chain of 250 x scale live threads, each with a few blocks",
        run: server::chain,
        default_scale: 8,
        quick_scale: 2,
    },
    Program {
        name: "text",
        what: "tokenise, count words, format! lines, String growth, sort",
        run: text::run,
        default_scale: 30,
        quick_scale: 4,
    },
    Program {
        name: "graph",
        what: "random graph: adjacency Vecs, BFS, Dijkstra (BinaryHeap), boxed trees",
        run: graph::run,
        default_scale: 100,
        quick_scale: 12,
    },
    Program {
        name: "rebuild",
        what: "a tree of boxed records (~20 MB per scale) built, walked, dropped, ten times",
        run: rebuild::run,
        default_scale: 10,
        quick_scale: 1,
    },
    Program {
        name: "rebuild1",
        what: "rebuild's first build alone (the faults its ten builds are judged against)",
        run: rebuild::once,
        default_scale: 10,
        quick_scale: 1,
    },
    Program {
        name: "grow",
        what: "Vec and String growth by push to up to 4 MiB (realloc), read, dropped",
        run: rebuild::grow,
        default_scale: 10,
        quick_scale: 1,
    },
    Program {
        name: "largebuf",
        what: "20 live buffers of 5-25 MiB, each replaced at random by a new one, written whole",
        run: rebuild::largebuf,
        default_scale: 20,
        quick_scale: 2,
    },
];

/// The program named `name`.
pub fn program(name: &str) -> Option<&'static Program> {
    PROGRAMS.iter().find(|p| p.name == name)
}

/// The programs that have an annotated variant ([`annotated`]), in table order.
pub const ANNOTATED: &[&str] = &[
    "json",
    "pipeline1",
    "pipeline2",
    "pipeline4",
    "pipeline8",
    "graph",
    "rebuild",
    "rebuild1",
];

/// The program named `name` compiled under `#[specialize]` (see
/// `plain_and_annotated!`), for the programs whose own code has constant-size
/// allocation sites ([`ANNOTATED`]); it returns the plain program's checksum.
///
/// Not a field of [`Program`]: a binary that never calls this links none of
/// the annotated code, so the suite's workers for the other allocators hold
/// no specalloc code (the driver checks it with `nm`). The worker calls it
/// only when built with the `annotated` feature.
pub fn annotated(name: &str) -> Option<fn(u32) -> u64> {
    Some(match name {
        "json" => json::annotated::run,
        "pipeline1" => pipeline::annotated::run::<1>,
        "pipeline2" => pipeline::annotated::run::<2>,
        "pipeline4" => pipeline::annotated::run::<4>,
        "pipeline8" => pipeline::annotated::run::<8>,
        "graph" => graph::annotated::run,
        "rebuild" => rebuild::annotated::run,
        "rebuild1" => rebuild::annotated::once,
        _ => return None,
    })
}

/// Folds `v` into the running checksum `h` (order-sensitive).
#[inline]
pub fn mix(h: u64, v: u64) -> u64 {
    (h ^ v)
        .wrapping_mul(0x100_0000_01b3)
        .rotate_left(17)
        .wrapping_add(0x9e37_79b9_7f4a_7c15)
}

/// The checksum of a string's bytes (FNV-1a).
pub fn hash_str(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    })
}

/// A deterministic random source for the programs' inputs.
pub fn rng(seed: u64) -> SplitMix64 {
    SplitMix64(seed)
}

/// A short pseudo-word of 2 to 9 lowercase letters.
pub fn word(r: &mut SplitMix64) -> String {
    let x = r.next_u64();
    let len = 2 + (x % 8) as usize;
    (0..len)
        .map(|i| (b'a' + ((x >> (8 + 5 * i)) % 26) as u8) as char)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_is_deterministic_at_tiny_scale() {
        for p in PROGRAMS {
            let a = (p.run)(1);
            assert_eq!(a, (p.run)(1), "{} is not deterministic", p.name);
            assert_ne!(a, 0, "{} returned an empty checksum", p.name);
        }
    }

    #[test]
    fn annotated_variants_return_the_plain_checksums() {
        for p in PROGRAMS {
            let Some(annotated) = annotated(p.name) else {
                assert!(!ANNOTATED.contains(&p.name), "{}", p.name);
                continue;
            };
            assert!(ANNOTATED.contains(&p.name), "{}", p.name);
            assert_eq!(annotated(1), (p.run)(1), "{}", p.name);
            assert_eq!(annotated(2), (p.run)(2), "{}", p.name);
        }
        assert_eq!(ANNOTATED.len(), 8);
        assert!(annotated("syn").is_none() && annotated("nope").is_none());
    }

    #[test]
    fn names_are_unique_and_found() {
        for p in PROGRAMS {
            assert_eq!(program(p.name).map(|q| q.name), Some(p.name));
            assert!(p.quick_scale < p.default_scale, "{}", p.name);
        }
        assert!(program("nope").is_none());
    }

    #[test]
    fn words_are_short_lowercase() {
        let mut r = rng(1);
        for _ in 0..100 {
            let w = word(&mut r);
            assert!((2..=9).contains(&w.len()), "{w}");
            assert!(w.bytes().all(|b| b.is_ascii_lowercase()), "{w}");
        }
    }
}
