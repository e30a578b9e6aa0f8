//! Procedural macros of `specalloc`.
//!
//! This crate is a placeholder for now: the `alloc!` macro and the `#[specialize]` attribute that
//! rewrite allocation sites into the runtime's size-specialised routines land in a later change.
#![forbid(unsafe_code)]
