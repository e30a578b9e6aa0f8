//! The allocation fast path of the `GlobalAlloc` methods and the size-specialised entry points
//! in a `dev`-based build on x86_64 Linux
//! (`cfg(specalloc_asm_fast)`): the pop of `fast.rs` for a class known to the caller, as naked
//! functions, the same machine code at every optimisation level.
//!
//! At opt-level 0 the inline fast path of `gate.rs` (`take_with`) keeps every value on the stack
//! and costs about 120 instructions, where the `GlobalAlloc` methods, which start with the fast
//! paths in assembly (`generic/asm.rs`), cost about 50: an annotated program in a debug build
//! would allocate slower than the same program unannotated. These functions pop the first free
//! block of this thread's current span of a class and count it, or return null when the span
//! has none (the sentinel heap's never have), which sends the caller to its miss, as the Rust
//! path does. They read and write what `fast.rs`'s `alloc_wide_in::<false>` and
//! `alloc_tiny_in::<false>` do; the offsets are operands computed from the Rust definitions.

use core::cell::Cell;
use core::mem::{offset_of, size_of};
use core::sync::atomic::AtomicU64;

use super::tls::tls_block_symbol;
use super::{ClassCache, Heap};
use crate::size_class::CHUNK_SIZE;
use crate::span::{Block, Span, TINY_CLASS};

// What the instructions assume: a heap starts with its class caches, and the tiny class's
// cache is at a 32-bit displacement.
const _: () = {
    assert!(offset_of!(Heap, classes) == 0);
    assert!(TINY_CLASS * size_of::<ClassCache>() < 1 << 31);
    assert!(CHUNK_SIZE <= 1 << 31);
};

/// The widths the instructions read and write each field at (a word, `dword`), checked by the
/// compiler: this does not compile if a field changes type. Never called.
#[allow(dead_code)]
#[allow(clippy::type_complexity)]
fn field_types<'a>(
    s: &'a Span,
    c: &'a ClassCache,
) -> (
    (&'a Cell<*mut Span>, &'a AtomicU64),
    (&'a Cell<*mut Block>, &'a crate::span::Count),
) {
    ((&c.current, &c.allocs), (&s.free, &s.used))
}

/// Pops a block of the class whose cache is `cache` bytes into the heap (`class *
/// size_of::<ClassCache>()`, a class of 8 bytes or more) from this thread's current span of the
/// class; null when it has no free block.
///
/// # Safety
/// `cache` is the offset of a class cache of a class of 8 bytes or more; the block is handed
/// only to code that frees it through this allocator.
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn take_wide(cache: usize) -> *mut u8 {
    core::arch::naked_asm!(
        concat!("mov rcx, qword ptr [rip + ", tls_block_symbol!(), "@GOTTPOFF]"),
        "mov rcx, qword ptr fs:[rcx]",
        "add rcx, rdi",
        "mov rdx, qword ptr [rcx + {current}]",
        "mov rax, qword ptr [rdx + {free}]",
        "test rax, rax",
        "je 2f",
        "mov r8, qword ptr [rax]",
        "mov qword ptr [rdx + {free}], r8",
        "add dword ptr [rdx + {used}], 1",
        "add qword ptr [rcx + {allocs}], 1",
        "2:",
        "ret",
        current = const offset_of!(ClassCache, current),
        allocs = const offset_of!(ClassCache, allocs),
        free = const offset_of!(Span, free),
        used = const offset_of!(Span, used),
    )
}

/// Pops a 4-byte block of the tiny class from this thread's current tiny span (links are
/// 32-bit chunk offsets, 0 ending the list); null when it has no free block.
///
/// # Safety
/// The block is handed only to code that frees it through this allocator.
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn take_tiny() -> *mut u8 {
    core::arch::naked_asm!(
        concat!("mov rcx, qword ptr [rip + ", tls_block_symbol!(), "@GOTTPOFF]"),
        "mov rcx, qword ptr fs:[rcx]",
        "add rcx, {tiny_cache}",
        "mov rdx, qword ptr [rcx + {current}]",
        "mov rax, qword ptr [rdx + {free}]",
        "test rax, rax",
        "je 2f",
        "mov r8d, dword ptr [rax]",
        "mov r9, rax",
        "and r9, {chunk_mask}",
        "or r9, r8",
        "test r8, r8",
        "cmovne r8, r9",
        "mov qword ptr [rdx + {free}], r8",
        "add dword ptr [rdx + {used}], 1",
        "add qword ptr [rcx + {allocs}], 1",
        "2:",
        "ret",
        tiny_cache = const TINY_CLASS * size_of::<ClassCache>(),
        current = const offset_of!(ClassCache, current),
        allocs = const offset_of!(ClassCache, allocs),
        free = const offset_of!(Span, free),
        used = const offset_of!(Span, used),
        chunk_mask = const -(CHUNK_SIZE as i64),
    )
}
