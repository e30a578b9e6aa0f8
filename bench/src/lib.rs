//! Benchmark support for specalloc.
//!
//! * [`chart`]: the SVG charts (plotters): cost per allocation size, and
//!   time per program relative to glibc;
//! * [`cli`]: the one argument parser of every bench binary (lexopt);
//! * [`stats`]: medians, spreads, geometric means and the Mann-Whitney U
//!   test, for comparing timing samples;
//! * [`harness`]: interleaved-rounds benchmarking with benchstat-like tables
//!   and raw CSV output;
//! * [`preload`]: C programs under preloaded allocators (glibc, specalloc,
//!   the peers) in interleaved rounds, their outputs checked against glibc's:
//!   the C-workload table and the scaling table;
//! * [`realworld`]: the real-workload suite's programs (JSON, syn, collection
//!   churn, producer/consumer, text, graph), shared by its worker and tests;
//! * [`sweep`]: the size sweep's shared logic (configurations, the `nm`
//!   check of each build, the worker/driver line formats, summaries);
//! * [`sweep_loops`]: the size sweep's timed loops, shared by every
//!   configuration of its worker;
//! * [`table`]: the one table printer (plain text and markdown) and the
//!   number formats of every table;
//! * [`workers`]: building one worker per configuration into its own target
//!   directory, and running commands (the sweep and the real-workload suite).
//!
//! The benchmarks themselves are binaries under `src/bin/`; see each one's
//! documentation for what it measures and how to run it.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod chart;
pub mod cli;
pub mod harness;
pub mod preload;
pub mod realworld;
pub mod stats;
pub mod sweep;
pub mod sweep_loops;
pub mod table;
pub mod workers;

/// Peak resident set size of this process, in KiB (`getrusage`), as the benchmark workers
/// report it.
pub fn peak_rss_kb() -> u64 {
    usage().peak_rss_kb
}

/// What `getrusage(RUSAGE_SELF)` says of this process so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Peak resident set size, KiB (`ru_maxrss`).
    pub peak_rss_kb: u64,
    /// User CPU time, µs.
    pub user_us: u64,
    /// System CPU time, µs.
    pub sys_us: u64,
    /// Minor page faults (`ru_minflt`).
    pub minor_faults: u64,
}

/// This process's resource usage so far (all threads).
///
/// ```
/// let u = specalloc_bench::usage();
/// assert!(u.peak_rss_kb > 0 && u.minor_faults > 0);
/// ```
pub fn usage() -> Usage {
    // SAFETY: `getrusage` only writes the zero-initialised struct we pass, a plain C struct for
    // which all-zero bytes are valid.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut u);
        let us = |t: libc::timeval| t.tv_sec as u64 * 1_000_000 + t.tv_usec as u64;
        Usage {
            peak_rss_kb: u.ru_maxrss as u64,
            user_us: us(u.ru_utime),
            sys_us: us(u.ru_stime),
            minor_faults: u.ru_minflt as u64,
        }
    }
}

/// Declares the `#[global_allocator]` a benchmark worker was built with: the first of the
/// features `global-system`, `global-mimalloc`, `global-jemalloc`, `global-snmalloc`, or
/// specalloc when none is on; and `GLOBAL_NAME`, its name. Each configuration is built alone
/// into its own target directory (see `sweep`), so only one of the features is ever on.
#[macro_export]
macro_rules! select_global_allocator {
    () => {
        #[cfg(feature = "global-system")]
        #[global_allocator]
        static GLOBAL: std::alloc::System = std::alloc::System;

        #[cfg(all(feature = "global-mimalloc", not(feature = "global-system")))]
        #[global_allocator]
        static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

        #[cfg(all(
            feature = "global-jemalloc",
            not(any(feature = "global-system", feature = "global-mimalloc"))
        ))]
        #[global_allocator]
        static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

        #[cfg(all(
            feature = "global-snmalloc",
            not(any(
                feature = "global-system",
                feature = "global-mimalloc",
                feature = "global-jemalloc"
            ))
        ))]
        #[global_allocator]
        static GLOBAL: snmalloc_rs::SnMalloc = snmalloc_rs::SnMalloc;

        #[cfg(not(any(
            feature = "global-system",
            feature = "global-mimalloc",
            feature = "global-jemalloc",
            feature = "global-snmalloc"
        )))]
        specalloc_runtime::install!(static GLOBAL);

        /// The global allocator compiled in (same precedence as the statics above).
        const GLOBAL_NAME: &str = if cfg!(feature = "global-system") {
            "system"
        } else if cfg!(feature = "global-mimalloc") {
            "mimalloc"
        } else if cfg!(feature = "global-jemalloc") {
            "jemalloc"
        } else if cfg!(feature = "global-snmalloc") {
            "snmalloc"
        } else {
            "specalloc"
        };
    };
}
