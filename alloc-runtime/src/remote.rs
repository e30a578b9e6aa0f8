//! Cross-thread frees: the remote-free list of each span and the delayed list of each heap.
//!
//! The protocol itself is in `remote_proto.rs`, shared verbatim with the loom model in
//! `tests/loom_remote.rs`; see the comment at its top for the states and their transitions.

#![allow(dead_code)]

use core::hint::spin_loop;
use core::sync::atomic::{AtomicUsize, Ordering};

/// Links hold a block's offset within its chunk.
const LINK_MASK: usize = crate::chunk::CHUNK_SIZE - 1;

include!("remote_proto.rs");
