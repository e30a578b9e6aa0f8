//! specalloc: Go 1.27's size-specialised allocation, for Rust.
//!
//! This facade re-exports the runtime ([`alloc_runtime`]) and, as they land, the macros.
//!
//! ```
//! #[global_allocator]
//! static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;
//!
//! let b = Box::new([1u64; 4]);
//! assert_eq!(b.iter().sum::<u64>(), 4);
//! println!("{}", specalloc::stats());
//! ```
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub use alloc_runtime::*;

/// The runtime crate itself, for paths that name it.
pub use alloc_runtime as runtime;
