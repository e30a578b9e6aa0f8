//! Benchmark support for specalloc.
//!
//! * [`stats`]: medians, spreads, geometric means and the Mann-Whitney U
//!   test, for comparing timing samples;
//! * [`harness`]: interleaved-rounds benchmarking with benchstat-like tables
//!   and raw CSV output.
//!
//! The benchmarks themselves are binaries under `src/bin/`; see each one's
//! documentation for what it measures and how to run it.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod harness;
pub mod stats;
