//! The `GlobalAlloc` fast paths of a `dev`-based build, as naked functions (x86_64 Linux).
//!
//! A `dev` build compiles the runtime at opt-level 0 too: every local lives on the stack, every
//! `#[inline(always)]` helper copies its arguments, and an allocation and a free cost about 310
//! instructions where glibc's optimised `malloc` and `free` cost about 130. These two functions
//! are the hits of the Rust fast paths (`heap/fast.rs`, through [`super::alloc_generic`] and
//! [`super::dealloc_generic`]) written in assembly, so that they are the same machine code at
//! every optimisation level: the route key and the class from the run-time table, then the
//! heap's pop (`heap/fast_asm.rs`, which the size-specialised entry points use too), or the span
//! from the chunk's page map and a push onto its free list with the statistics counter.
//! Everything else — a large or over-aligned layout, an empty current span, a free into a span
//! this thread does not own (another thread's, one parked full, a pooled one), the checked mode
//! — goes to the Rust path with the same arguments, which decides again from the start; a free
//! that empties its span calls the Rust path's own `span_emptied`, as the Rust fast path does.
//!
//! The structure offsets and constants are operands computed from the Rust definitions
//! (`offset_of!`, `size_of`), so the assembly follows any change of layout; the compile-time
//! checks below pin what the instructions assume of the fields' widths. Only a runtime compiled
//! at opt-level 0 takes them (optimised, the Rust paths are shorter); `scripts/test-all.sh` runs
//! the entry-point, model and multi-threaded suites in the plain `dev` profile for them, and
//! `tests/entry_paths.rs` checks both kinds of build against the size-class table.

use core::alloc::Layout;
use core::cell::Cell;
use core::mem::{offset_of, size_of};
use core::sync::atomic::{AtomicU64, AtomicUsize};

use crate::chunk::{PAGES_PER_CHUNK, PAGE_SPAN_AT};
use crate::heap::{span_emptied, take_tiny, take_wide, tls_block_symbol, ClassCache, Heap};
use crate::size_class::{CHUNK_SIZE, KEY_SMALL_MAX, PAGE_SHIFT, SIZE_TO_CLASS8, TINY_MAX};
use crate::span::{Block, Span, TINY_CLASS};

// What the instructions below assume: a heap starts with its class caches; the tiny class's
// links are 32-bit chunk offsets; the immediates fit in 32 bits.
const _: () = {
    assert!(offset_of!(Heap, classes) == 0);
    assert!(TINY_MAX < 8 && KEY_SMALL_MAX <= 1 << 12);
    assert!(CHUNK_SIZE <= 1 << 31 && PAGES_PER_CHUNK.is_power_of_two());
    assert!(offset_of!(Heap, frees) < 1 << 31 && size_of::<AtomicU64>() == 8);
};

/// The widths the instructions read and write each field at (a word, `dword`, `byte`), checked
/// by the compiler: this does not compile if a field changes type. Never called.
#[allow(dead_code)]
#[allow(clippy::type_complexity)]
fn field_types<'a>(
    s: &'a Span,
    h: &'a Heap,
) -> (
    (&'a AtomicUsize, &'a Cell<u8>, &'a Cell<*mut Block>),
    (&'a crate::span::Count, &'a Cell<bool>, &'a AtomicU64),
    &'static [u8],
) {
    (
        (&s.owner, &s.class, &s.free),
        (&s.used, &s.free_zero, &h.frees[0]),
        &SIZE_TO_CLASS8,
    )
}

/// `GlobalAlloc::alloc` in a `dev`-based build: [`alloc`], then [`alloc_miss`] on a null.
#[inline(always)]
pub(crate) fn global_alloc(layout: Layout) -> *mut u8 {
    let (size, align) = (layout.size(), layout.align());
    // SAFETY: the size and alignment of a `Layout`; the block goes to `GlobalAlloc::alloc`'s
    // caller, who frees it through this allocator.
    let p = unsafe { alloc(size, align) };
    if p as usize != 0 {
        return p;
    }
    alloc_miss(size, align)
}

/// The allocation half of `GlobalAlloc::alloc` in a `dev`-based build: a block for a layout of
/// `size` bytes at alignment `align` from this thread's current span of its class (the tiny
/// class, or a class from the run-time table), popped by the heap's own assembly
/// (`heap/fast_asm.rs`); null when this path does not serve the layout (a large size or
/// alignment) or the span has no free block, which sends the caller to [`alloc_miss`].
///
/// # Safety
/// `size` and `align` are those of a valid [`Layout`] (`align` a power of two, `size` rounded
/// up to `align` at most `isize::MAX`); the block is freed through this allocator.
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn alloc(size: usize, align: usize) -> *mut u8 {
    core::arch::naked_asm!(
        // The route key: `(size - 1) | (align - 1)`; at or over the table's end, null.
        "lea rax, [rdi - 1]",
        "lea rcx, [rsi - 1]",
        "or rax, rcx",
        "cmp rax, {key_small_max}",
        "jae 3f",
        "cmp rax, {tiny_max}",
        "jb 4f",
        // The class, `SIZE_TO_CLASS8[key / 8 + 1]`, and its cache's offset in the heap: the
        // pop's argument, in tail position.
        "shr rax, 3",
        "mov rdx, qword ptr [rip + {table}@GOTPCREL]",
        "movzx eax, byte ptr [rdx + rax + 1]",
        "imul rdi, rax, {cache_size}",
        "jmp {take_wide}",
        "3:",
        "xor eax, eax",
        "ret",
        "4:",
        "jmp {take_tiny}",
        key_small_max = const KEY_SMALL_MAX,
        tiny_max = const TINY_MAX,
        table = sym SIZE_TO_CLASS8,
        cache_size = const size_of::<ClassCache>(),
        take_wide = sym take_wide,
        take_tiny = sym take_tiny,
    )
}

/// The free half of `GlobalAlloc::dealloc` in a `dev`-based build.
///
/// # Safety
/// `ptr` was returned by this allocator for the layout of `size` bytes at alignment `align` (or
/// resized to it) and not freed since.
#[unsafe(naked)]
pub(crate) unsafe extern "C" fn dealloc(ptr: *mut u8, size: usize, align: usize) {
    core::arch::naked_asm!(
        // The route key; at or over the table's end (a large object or a large alignment), the
        // Rust path.
        "lea rax, [rsi - 1]",
        "lea rcx, [rdx - 1]",
        "or rax, rcx",
        "cmp rax, {key_small_max}",
        "jae 3f",
        // The span: the chunk header's page map, at the block's page.
        "mov rax, rdi",
        "and rax, {chunk_mask}",
        "mov rcx, rdi",
        "shr rcx, {page_shift}",
        "and ecx, {page_mask}",
        "mov rax, qword ptr [rax + rcx * 8 + {page_span}]",
        // Owned by this thread's heap (untagged: not parked full)? Else the Rust path.
        concat!("mov rcx, qword ptr [rip + ", tls_block_symbol!(), "@GOTTPOFF]"),
        "mov rcx, qword ptr fs:[rcx]",
        "cmp qword ptr [rax + {owner}], rcx",
        "jne 3f",
        // No block of it in use: a double free, which the Rust path reports (its decrement
        // overflows, checked in a build with debug assertions) before anything is written.
        "cmp dword ptr [rax + {used}], 0",
        "je 3f",
        // Push onto the span's free list: a pointer link, or a chunk offset for the tiny class.
        "movzx r8d, byte ptr [rax + {class}]",
        "mov r9, qword ptr [rax + {free}]",
        "cmp r8d, {tiny_class}",
        "je 5f",
        "mov qword ptr [rdi], r9",
        "6:",
        "mov qword ptr [rax + {free}], rdi",
        "mov byte ptr [rax + {free_zero}], 0",
        "add qword ptr [rcx + r8 * 8 + {frees}], 1",
        // Last, as in the Rust path: the branch reads the flags of this decrement.
        "sub dword ptr [rax + {used}], 1",
        "je 4f",
        "ret",
        "5:",
        "and r9d, {link_mask}",
        "mov dword ptr [rdi], r9d",
        "jmp 6b",
        // The span's last block: `span_emptied(heap, span)`, in tail position.
        "4:",
        "mov rdi, rax",
        "mov rsi, rcx",
        "jmp {emptied}",
        "3:",
        "jmp {miss}",
        key_small_max = const KEY_SMALL_MAX,
        chunk_mask = const -(CHUNK_SIZE as i64),
        page_shift = const PAGE_SHIFT,
        page_mask = const PAGES_PER_CHUNK - 1,
        page_span = const PAGE_SPAN_AT,
        owner = const offset_of!(Span, owner),
        class = const offset_of!(Span, class),
        free = const offset_of!(Span, free),
        free_zero = const offset_of!(Span, free_zero),
        used = const offset_of!(Span, used),
        tiny_class = const TINY_CLASS,
        frees = const offset_of!(Heap, frees),
        link_mask = const CHUNK_SIZE - 1,
        emptied = sym span_emptied,
        miss = sym dealloc_miss,
    )
}

/// [`alloc`]'s miss: the Rust path, from the start. Out of line, so that the `GlobalAlloc`
/// method that calls it on a null keeps a small frame.
#[inline(never)]
pub(crate) fn alloc_miss(size: usize, align: usize) -> *mut u8 {
    // SAFETY: `size` and `align` are those of a valid layout ([`alloc`]'s contract), passed on
    // unchanged.
    super::alloc_generic::<false>(unsafe { Layout::from_size_align_unchecked(size, align) })
}

/// [`dealloc`]'s miss: the Rust path, from the start.
///
/// # Safety
/// As for [`dealloc`].
unsafe extern "C" fn dealloc_miss(ptr: *mut u8, size: usize, align: usize) {
    // SAFETY: forwarded from [`dealloc`]'s caller, arguments unchanged.
    unsafe { super::dealloc_generic(ptr, Layout::from_size_align_unchecked(size, align)) }
}
