//! Benchmark support for specalloc.
//!
//! * [`stats`]: medians, spreads, geometric means and the Mann-Whitney U
//!   test, for comparing timing samples;
//! * [`harness`]: interleaved-rounds benchmarking with benchstat-like tables
//!   and raw CSV output;
//! * [`sweep`]: the size sweep's shared logic (configurations, the `nm`
//!   check of each build, the worker/driver line formats, summaries);
//! * [`sweep_loops`]: the size sweep's timed loops, shared by every
//!   configuration of its worker.
//!
//! The benchmarks themselves are binaries under `src/bin/`; see each one's
//! documentation for what it measures and how to run it.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod harness;
pub mod stats;
pub mod sweep;
pub mod sweep_loops;
