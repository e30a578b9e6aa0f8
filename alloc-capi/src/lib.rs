//! `libspecalloc.so` and `libspecalloc.a`: specalloc for C and C++ programs.
//!
//! `cargo build --release -p specalloc-capi` builds `target/release/libspecalloc.so`; run any
//! dynamically linked program on specalloc with
//! `LD_PRELOAD=target/release/libspecalloc.so program`, or link it. The functions it exports
//! are [`specalloc_malloc`]'s (the `malloc` family, glibc's `__libc_*` names, and the extras
//! `include/specalloc.h` declares); this crate only packages them as a C library.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub use specalloc_malloc::*;
