//! The thread heap's thread-locals, at the cost of the initial-exec TLS model.
//!
//! Every allocation and free reads this thread's heap. Stable Rust compiles `thread_local!` in a
//! shared library (`libspecalloc.so`, a cdylib) with the general-dynamic model: every read calls
//! `__tls_get_addr`. Every peer allocator uses the initial-exec model instead (one load from the
//! GOT, added to the thread pointer). Stable Rust has no switch for it, so with the
//! `initial-exec-tls` feature (on in the builds of `libspecalloc.so` and `libspecalloc.a`), on
//! x86_64 and aarch64 Linux, the thread-locals are one block, [`ThreadLocals`], defined in
//! assembly (`.tdata`, a hidden symbol) and read with inline assembly through its GOT entry
//! (`@GOTTPOFF` on x86_64, `:gottprel:` on aarch64) added to the thread pointer (`fs:0`,
//! `tpidr_el0`). A Rust executable keeps `thread_local!`: compiled into the executable, it is
//! read at a constant offset from the thread pointer (local-exec), one instruction where the
//! assembly's sequence, even relaxed by the linker, takes three.
//!
//! The price, as for every peer: a shared library that uses initial-exec TLS and is loaded with
//! `dlopen` (not preloaded and not linked at start) must fit glibc's static TLS surplus (about
//! 1.6 KiB shared by all such libraries; this block is 24 bytes of `libspecalloc.so`'s 104-byte
//! TLS segment, the rest std's), or `dlopen` fails with "cannot
//! allocate memory in static TLS block". The `local-dynamic-tls` feature (as mimalloc's
//! `local_dynamic_tls`) keeps `thread_local!` for programs that must `dlopen` the library late;
//! other targets use `thread_local!` always.
//!
//! Builds of a `dev`-based profile (`cfg(specalloc_out_of_line)`, see `build.rs`) take the
//! assembly too: there the runtime is compiled without optimisation, and `thread_local!`'s
//! accessor is then a chain of calls (`LocalKey::with`, `try_with`, a closure, the accessor) on
//! every allocation and free, where the inline assembly stays two instructions.

use core::cell::Cell;

use super::{empty_heap, Heap, EMPTY_HEAP};

/// This thread's allocator state.
#[repr(C)]
pub(super) struct ThreadLocals {
    /// This thread's heap; the sentinel until the first slow-path allocation.
    pub(super) heap: Cell<*mut Heap>,
    /// This thread's heap as seen by the size-specialised routines (see `gate.rs`): the
    /// sentinel until the first such routine has checked that this allocator is the global
    /// allocator.
    pub(super) spec_heap: Cell<*mut Heap>,
    /// This thread's heap has been torn down (it is exiting, and what still allocates is a
    /// destructor that runs after ours), or it can have none (no thread-exit key could be had):
    /// the shared heap serves it.
    pub(super) exited: Cell<bool>,
    /// The allocations and frees this thread made without a heap of its own (see
    /// `key::heapless_turn`).
    pub(super) heapless: Cell<u8>,
}

/// The symbol of the thread-local block (the assembly `imp` below), with this crate's version
/// in it: two copies of the runtime of different versions in one image each keep their own
/// block (one symbol for both would not link, and a weak one would make them share it).
#[allow(unused_macros)]
macro_rules! tls_block_symbol {
    () => {
        concat!(
            "__specalloc_thread_locals_",
            env!("CARGO_PKG_VERSION_MAJOR"),
            "_",
            env!("CARGO_PKG_VERSION_MINOR"),
            "_",
            env!("CARGO_PKG_VERSION_PATCH")
        )
    };
}
#[cfg(specalloc_asm_fast)]
pub(crate) use tls_block_symbol;

#[cfg(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64"),
    any(feature = "initial-exec-tls", specalloc_out_of_line),
    not(feature = "local-dynamic-tls")
))]
mod imp {
    use super::{ThreadLocals, EMPTY_HEAP};

    // The layout the assembly below writes: two pointers, then the flag and the count (both
    // zero in the last word).
    const _: () = {
        assert!(core::mem::offset_of!(ThreadLocals, heap) == 0);
        assert!(core::mem::offset_of!(ThreadLocals, spec_heap) == 8);
        assert!(core::mem::offset_of!(ThreadLocals, exited) == 16);
        assert!(core::mem::offset_of!(ThreadLocals, heapless) == 17);
        assert!(core::mem::size_of::<ThreadLocals>() == 24);
        assert!(core::mem::align_of::<ThreadLocals>() == 8);
    };

    // The block's initial image: both heaps the sentinel, not exited, no call without a heap.
    // Hidden, so that each linked image (an executable, a shared library with its own copy of the
    // runtime) has its own, and no other image can interpose it.
    core::arch::global_asm!(
        concat!(".pushsection .tdata.", tls_block_symbol!(), ",\"awT\",@progbits"),
        ".p2align 3",
        concat!(".globl ", tls_block_symbol!()),
        concat!(".hidden ", tls_block_symbol!()),
        concat!(".type ", tls_block_symbol!(), ",@object"),
        concat!(".size ", tls_block_symbol!(), ",24"),
        concat!(tls_block_symbol!(), ":"),
        ".quad {empty}",
        ".quad {empty}",
        ".quad 0",
        ".popsection",
        empty = sym EMPTY_HEAP,
    );

    /// This thread's block: the thread pointer (`fs:0` on x86_64, `tpidr_el0` on aarch64) plus
    /// the block's offset from the GOT.
    #[inline(always)]
    pub(in crate::heap) fn locals() -> &'static ThreadLocals {
        let p: usize;
        // The asm only reads the thread pointer and the GOT entry, neither of which changes
        // while this thread runs: `pure` lets the compiler reuse the result.
        // SAFETY: the thread pointer (`fs:0`, `tpidr_el0`) plus the offset in the symbol's GOT
        // entry (`@GOTTPOFF`, `:gottprel:`; R_X86_64_TPOFF64, R_AARCH64_TLS_TPREL64) is this
        // thread's copy of the block, which lives as long as the thread.
        unsafe {
            #[cfg(target_arch = "x86_64")]
            core::arch::asm!(
                "mov {p}, qword ptr fs:[0]",
                concat!("add {p}, qword ptr [rip + ", tls_block_symbol!(), "@GOTTPOFF]"),
                p = out(reg) p,
                options(pure, readonly, nostack),
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::asm!(
                "mrs {p}, tpidr_el0",
                concat!("adrp {o}, :gottprel:", tls_block_symbol!()),
                concat!("ldr {o}, [{o}, #:gottprel_lo12:", tls_block_symbol!(), "]"),
                "add {p}, {p}, {o}",
                p = out(reg) p,
                o = out(reg) _,
                options(pure, readonly, nostack, preserves_flags),
            );
            // SAFETY: see above; the block holds a valid `ThreadLocals` from the thread's start
            // (its initial image), and `Cell`s are `!Sync`, so the reference cannot leave the
            // thread.
            &*(p as *const ThreadLocals)
        }
    }

    /// This thread's heap, read off the thread pointer with the block's offset (its first
    /// field's): on x86_64 in one instruction (`fs:[offset]`), on aarch64 with the thread
    /// pointer as the base and the offset as the index.
    #[inline(always)]
    pub(in crate::heap) fn heap() -> *mut super::Heap {
        let h: *mut super::Heap;
        // Not `pure`: the field changes when the thread gets or gives up its heap; `readonly`
        // orders the read after those writes.
        // SAFETY: as in `locals`: the GOT entry holds the block's offset from the thread
        // pointer, and `heap` is the block's first field (checked above).
        unsafe {
            #[cfg(target_arch = "x86_64")]
            core::arch::asm!(
                concat!("mov {h}, qword ptr [rip + ", tls_block_symbol!(), "@GOTTPOFF]"),
                "mov {h}, qword ptr fs:[{h}]",
                h = out(reg) h,
                options(readonly, nostack, preserves_flags),
            );
            #[cfg(target_arch = "aarch64")]
            core::arch::asm!(
                "mrs {t}, tpidr_el0",
                concat!("adrp {h}, :gottprel:", tls_block_symbol!()),
                concat!("ldr {h}, [{h}, #:gottprel_lo12:", tls_block_symbol!(), "]"),
                "ldr {h}, [{t}, {h}]",
                h = out(reg) h,
                t = out(reg) _,
                options(readonly, nostack, preserves_flags),
            );
        }
        h
    }
}

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64"),
    any(feature = "initial-exec-tls", specalloc_out_of_line),
    not(feature = "local-dynamic-tls")
)))]
mod imp {
    use core::cell::Cell;

    use super::{Heap, ThreadLocals, EMPTY_HEAP};

    thread_local! {
        static LOCALS: ThreadLocals = const {
            ThreadLocals {
                heap: Cell::new(&EMPTY_HEAP.0 as *const Heap as *mut Heap),
                spec_heap: Cell::new(&EMPTY_HEAP.0 as *const Heap as *mut Heap),
                exited: Cell::new(false),
                heapless: Cell::new(0),
            }
        };
    }

    /// This thread's block.
    #[inline(always)]
    pub(in crate::heap) fn locals() -> &'static ThreadLocals {
        // SAFETY: the thread-local has no destructor (its fields are `Cell`s of plain values),
        // so it lives as long as the thread; `Cell`s are `!Sync`, so the reference cannot leave
        // the thread.
        LOCALS.with(|l| unsafe { &*(l as *const ThreadLocals) })
    }

    /// This thread's heap.
    #[inline(always)]
    pub(in crate::heap) fn heap() -> *mut Heap {
        locals().heap.get()
    }
}

pub(super) use imp::locals;

/// This thread's heap (the sentinel if it has none).
#[inline(always)]
pub(super) fn current_heap() -> *mut Heap {
    imp::heap()
}

/// The calling thread's heap: its address (the sentinel's when the thread has none yet) and
/// its size in bytes (test hooks: a test reads which of its pages hold memory).
#[cfg(feature = "test-hooks")]
pub fn thread_heap() -> (usize, usize) {
    (current_heap() as usize, core::mem::size_of::<Heap>())
}

/// Sends this thread's routines back through the check (its heap is being torn down).
pub(super) fn forget_spec_heap() {
    locals().spec_heap.set(empty_heap());
}
