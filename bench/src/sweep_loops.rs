//! The size sweep's timed loops, shared by every configuration of the
//! worker (`src/bin/sweep_worker.rs`), so that all of them run the same
//! code around the allocation they differ in.
//!
//! A configuration is a [`Way`] of allocating one `T`. Every loop is
//! generic over the way and the type, so each (way, size) pair gets its own
//! monomorphised loop in which the layout is a compile-time constant, and
//! every returned pointer goes through [`std::hint::black_box`], so no
//! allocation can be optimised away. Every block is freed through one
//! out-of-line function, [`free_block`], so the frees cost the same in
//! every configuration.
//!
//! # Where a loop is compiled decides what "generic" means
//!
//! `std::alloc::alloc` calls the allocator shim the `#[global_allocator]`
//! declaration generates in the crate that declares it (the worker binary).
//! Code compiled in that crate may inline the shim and fold its size-class
//! lookup at a constant layout; code compiled in any other crate (the
//! standard library, every dependency, this library) calls it out of line.
//! A generic function is compiled where it is instantiated, so:
//!
//! * [`out_of_line`], a non-generic function of this library, instantiates
//!   the loops for [`Global`] here: the worker's `generic` configuration,
//!   `Box::new` as any crate but the allocator's own gets it;
//! * the worker instantiates the same loops for its own types (the
//!   specialised entry points, the inlined path, and `std::alloc::alloc`
//!   again as `generic-local`), in the crate that declares the allocator.

use std::alloc::{handle_alloc_error, Layout};
use std::hint::black_box;
use std::time::{Duration, Instant};

use crate::sweep::{AllocPath, SIZES};

/// How a configuration allocates one `T` (non-zero-sized).
pub trait Way {
    /// Allocates room for one `T`; null only if memory is exhausted.
    fn alloc<T>() -> *mut u8;
    /// Allocates room for one `T`, reading zero.
    fn alloc_zeroed<T>() -> *mut u8;
}

/// `std::alloc::alloc(Layout::new::<T>())` through the global allocator.
pub struct Global;

/// The layout of `T`, refused at compile time for a zero-sized `T` (which
/// the global allocator must not be asked for).
const fn sized_layout<T>() -> Layout {
    assert!(
        std::mem::size_of::<T>() > 0,
        "zero-sized types allocate nothing"
    );
    Layout::new::<T>()
}

impl Way for Global {
    #[inline(always)]
    fn alloc<T>() -> *mut u8 {
        // SAFETY: the layout has a non-zero size (checked at compile time).
        unsafe { std::alloc::alloc(const { sized_layout::<T>() }) }
    }
    #[inline(always)]
    fn alloc_zeroed<T>() -> *mut u8 {
        // SAFETY: the layout has a non-zero size (checked at compile time).
        unsafe { std::alloc::alloc_zeroed(const { sized_layout::<T>() }) }
    }
}

/// Frees a block through the global allocator, out of line, for every
/// configuration alike.
///
/// # Safety
/// `p` is a live block of the global allocator allocated for `layout`.
#[inline(never)]
pub unsafe fn free_block(p: *mut u8, layout: Layout) {
    // SAFETY: forwarded from the caller.
    unsafe { std::alloc::dealloc(p, layout) }
}

/// One allocation of `T` on path `Z` (zeroed) by `W`, checked for null.
#[inline(always)]
fn one<W: Way, T, const Z: bool>() -> *mut u8 {
    let p = if Z {
        W::alloc_zeroed::<T>()
    } else {
        W::alloc::<T>()
    };
    if p.is_null() {
        handle_alloc_error(Layout::new::<T>());
    }
    p
}

/// Allocates one block per slot.
#[inline(always)]
fn fill_inline<W: Way, T, const Z: bool>(slots: &mut [*mut u8]) {
    for slot in slots.iter_mut() {
        *slot = black_box(one::<W, T, Z>());
    }
}

/// Frees every slot's block.
#[inline(always)]
fn free_inline<T>(slots: &[*mut u8]) {
    for &p in slots {
        // SAFETY: each slot holds a live block allocated for `T` by the
        // global allocator (every configuration's blocks are freeable
        // there), freed once before the slots are filled again.
        unsafe { free_block(p, const { Layout::new::<T>() }) };
    }
}

/// Allocates and frees one block, `n` times.
#[inline(always)]
fn pairs_inline<W: Way, T, const Z: bool>(n: u64) {
    for _ in 0..n {
        let p = black_box(one::<W, T, Z>());
        // SAFETY: `p` was just allocated for `T` and is freed once.
        unsafe { free_block(p, const { Layout::new::<T>() }) };
    }
}

/// The `alloc` shape: `reps` times, allocate one block per slot
/// ([`BATCH`](crate::sweep::BATCH) slots in the sweep) (timed),
/// then free them (not timed). Returns the time of the allocation loops,
/// including one `Instant` pair per repetition (the caller subtracts it).
#[inline(never)]
fn batch<W: Way, T, const Z: bool>(reps: u64, slots: &mut [*mut u8]) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..reps {
        let start = Instant::now();
        fill_inline::<W, T, Z>(slots);
        total += start.elapsed();
        free_inline::<T>(slots);
    }
    total
}

/// The `pair` shape: `n` alloc+free pairs, timed.
#[inline(never)]
fn pair<W: Way, T, const Z: bool>(n: u64, _slots: &mut [*mut u8]) -> Duration {
    let start = Instant::now();
    pairs_inline::<W, T, Z>(n);
    start.elapsed()
}

/// Untimed `fill`, for callgrind.
#[inline(never)]
fn fill<W: Way, T, const Z: bool>(slots: &mut [*mut u8]) {
    fill_inline::<W, T, Z>(slots);
}

/// Untimed `free`, for callgrind.
#[inline(never)]
fn free<T>(slots: &[*mut u8]) {
    free_inline::<T>(slots);
}

/// Untimed pairs, for callgrind.
#[inline(never)]
fn pairs<W: Way, T, const Z: bool>(n: u64) {
    pairs_inline::<W, T, Z>(n);
}

/// A timing loop: runs `iters` iterations (batch repetitions of
/// [`BATCH`](crate::sweep::BATCH) allocations, or pairs) over the slots;
/// returns the elapsed time.
pub type TimeFn = fn(u64, &mut [*mut u8]) -> Duration;

/// The loops of one way and one size, indexed by path (plain, zeroed).
#[derive(Clone, Copy)]
pub struct Loops {
    /// `size_of::<T>()`.
    pub size: usize,
    /// `align_of::<T>()`.
    pub align: usize,
    /// The `alloc` shape (one allocation per slot timed per repetition).
    pub batch: [TimeFn; 2],
    /// The `pair` shape.
    pub pair: [TimeFn; 2],
    /// Allocates one block per slot, untimed.
    pub fill: [fn(&mut [*mut u8]); 2],
    /// Frees every slot's block, untimed.
    pub free: fn(&[*mut u8]),
    /// `n` untimed pairs.
    pub pairs: [fn(u64); 2],
}

impl Loops {
    /// The loops of `W` for `T`, instantiated in the calling crate. A
    /// zero-sized `T` is refused at compile time (its blocks could not be
    /// freed through the global allocator).
    pub fn of<W: Way, T>() -> Loops {
        const { sized_layout::<T>() };
        Loops {
            size: std::mem::size_of::<T>(),
            align: std::mem::align_of::<T>(),
            batch: [batch::<W, T, false>, batch::<W, T, true>],
            pair: [pair::<W, T, false>, pair::<W, T, true>],
            fill: [fill::<W, T, false>, fill::<W, T, true>],
            free: free::<T>,
            pairs: [pairs::<W, T, false>, pairs::<W, T, true>],
        }
    }

    /// The index of `path` in the arrays.
    pub fn index(path: AllocPath) -> usize {
        usize::from(path == AllocPath::Zeroed)
    }
}

/// Evaluates `$body` once for the type of every swept size, in [`SIZES`]
/// order, with `$T` naming the type: `[u8; N]` for odd tiny sizes, else an
/// array of the widest integer (up to `u64`) dividing the size, which gives
/// a value of that size its natural alignment.
///
/// ```
/// let mut sizes = Vec::new();
/// specalloc_bench::for_each_swept_type!(T => sizes.push(std::mem::size_of::<T>()));
/// assert_eq!(sizes, specalloc_bench::sweep::SIZES);
/// ```
#[macro_export]
macro_rules! for_each_swept_type {
    ($T:ident => $body:expr) => {{
        {
            type $T = [u8; 1];
            $body;
        }
        {
            type $T = [u16; 1];
            $body;
        }
        {
            type $T = [u8; 3];
            $body;
        }
        {
            type $T = [u32; 1];
            $body;
        }
        {
            type $T = [u8; 5];
            $body;
        }
        {
            type $T = [u16; 3];
            $body;
        }
        {
            type $T = [u8; 7];
            $body;
        }
        {
            type $T = [u64; 1];
            $body;
        }
        {
            type $T = [u8; 9];
            $body;
        }
        {
            type $T = [u16; 5];
            $body;
        }
        {
            type $T = [u8; 11];
            $body;
        }
        {
            type $T = [u32; 3];
            $body;
        }
        {
            type $T = [u8; 13];
            $body;
        }
        {
            type $T = [u16; 7];
            $body;
        }
        {
            type $T = [u8; 15];
            $body;
        }
        {
            type $T = [u64; 2];
            $body;
        }
        {
            type $T = [u64; 3];
            $body;
        }
        {
            type $T = [u64; 4];
            $body;
        }
        {
            type $T = [u64; 6];
            $body;
        }
        {
            type $T = [u64; 8];
            $body;
        }
        {
            type $T = [u64; 10];
            $body;
        }
        {
            type $T = [u64; 12];
            $body;
        }
        {
            type $T = [u64; 14];
            $body;
        }
        {
            type $T = [u64; 16];
            $body;
        }
        {
            type $T = [u64; 20];
            $body;
        }
        {
            type $T = [u64; 32];
            $body;
        }
        {
            type $T = [u64; 64];
            $body;
        }
        {
            type $T = [u64; 128];
            $body;
        }
    }};
}

/// The loops of [`Global`] for every swept size, instantiated in this
/// library crate: their `std::alloc::alloc` is an out-of-line call of the
/// allocator shim, whatever the global allocator (the `generic`
/// configuration). Not inlinable, so the instances stay here.
#[inline(never)]
pub fn out_of_line() -> Vec<Loops> {
    let mut v = Vec::with_capacity(SIZES.len());
    for_each_swept_type!(T => v.push(Loops::of::<Global, T>()));
    v
}

/// Sanity of the type list: one type per swept size, in order, none
/// zero-sized. (Run by the worker before it measures anything.)
pub fn check_types(loops: &[Loops]) -> Result<(), String> {
    let sizes: Vec<usize> = loops.iter().map(|l| l.size).collect();
    if sizes != SIZES {
        return Err(format!(
            "swept types have sizes {sizes:?}, expected {SIZES:?}"
        ));
    }
    if loops.iter().any(|l| l.align == 0 || l.size % l.align != 0) {
        return Err("a swept type has an impossible alignment".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_type_per_size_in_order() {
        let loops = out_of_line();
        assert!(check_types(&loops).is_ok());
        let aligns: Vec<usize> = loops.iter().map(|l| l.align).collect();
        assert_eq!(&aligns[..8], &[1, 2, 1, 4, 1, 2, 1, 8]);
        assert!(aligns[15..].iter().all(|&a| a == 8));
        assert!(check_types(&loops[1..]).is_err());
    }

    #[test]
    fn loops_allocate_and_free() {
        // Under the test harness's global allocator (the system's): every
        // loop runs, allocates what it should, and frees it.
        let loops = out_of_line();
        let mut slots = vec![std::ptr::null_mut(); crate::sweep::BATCH];
        for l in &loops {
            for path in AllocPath::ALL {
                let i = Loops::index(path);
                (l.batch[i])(2, &mut slots);
                (l.pair[i])(10, &mut slots);
                (l.fill[i])(&mut slots[..4]);
                assert!(slots[..4].iter().all(|p| !p.is_null()));
                if path == AllocPath::Zeroed {
                    // SAFETY: a live block of `l.size` bytes, zeroed.
                    let bytes = unsafe { std::slice::from_raw_parts(slots[0], l.size) };
                    assert!(bytes.iter().all(|&b| b == 0));
                }
                (l.free)(&slots[..4]);
                (l.pairs[i])(3);
            }
        }
    }
}
