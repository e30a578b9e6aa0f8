//! The checked mode's registry of chunks (cargo feature `checked`): a bitmap of every 4 MiB
//! chunk of the address space that is one of ours, and each chunk's side bitmap of live objects,
//! mapped with the chunk. A leaf below the page heap (which registers its chunks here) and the
//! checks of `checked.rs` (which read it).

use core::sync::atomic::{AtomicU64, Ordering};

use crate::size_class::{CHUNK_SHIFT, CHUNK_SIZE};

/// One bit per 4 MiB chunk of a 48-bit address space.
static CHUNKS: [AtomicU64; 1 << (48 - CHUNK_SHIFT - 6)] =
    [const { AtomicU64::new(0) }; 1 << (48 - CHUNK_SHIFT - 6)];

/// Maps a new chunk's side bitmap (one bit per byte of the chunk). `None` if the OS refuses.
pub(crate) fn new_side() -> Option<usize> {
    crate::os::map(CHUNK_SIZE / 8).map(|p| p.as_ptr() as usize)
}

/// Registers a new chunk (its header already points at its side bitmap).
pub(crate) fn register_chunk(base: usize) {
    let idx = base >> CHUNK_SHIFT;
    CHUNKS[idx / 64].fetch_or(1 << (idx % 64), Ordering::Release);
}

/// Whether `p` lies in one of our chunks.
pub(crate) fn is_chunk(p: usize) -> bool {
    let idx = p >> CHUNK_SHIFT;
    idx / 64 < CHUNKS.len() && CHUNKS[idx / 64].load(Ordering::Acquire) >> (idx % 64) & 1 == 1
}
