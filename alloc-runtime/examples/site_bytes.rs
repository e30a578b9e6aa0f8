//! Code bytes per allocation site, for the three ways a constant-size allocation can be made:
//! the generic path out of line (`Box::new`, through the global allocator), the fully inlined
//! generic path (`alloc_inline`), and the size-specialised entry point (`spec::boxed`). Each
//! function below makes ten allocations of ten different sizes and frees them; compare their
//! sizes with:
//!
//! ```text
//! cargo build --release -p specalloc-runtime --example site_bytes
//! nm -S --size-sort -C target/release/examples/site_bytes | grep 'site_bytes::ten_'
//! ```

use std::alloc::Layout;
use std::hint::black_box;

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

#[inline(always)]
fn generic<const N: usize>() {
    black_box(Box::new(black_box([0u64; N])));
}

#[inline(always)]
fn specialised<const N: usize>() {
    black_box(specalloc_runtime::spec::boxed(black_box([0u64; N])));
}

#[inline(always)]
fn inlined<const N: usize>() {
    let l = Layout::new::<[u64; N]>();
    let p = specalloc_runtime::alloc_inline(l);
    assert!(!p.is_null());
    // SAFETY: `p` is a block for one `[u64; N]` from this allocator, the global one, so `Box`
    // may own and free it.
    black_box(unsafe {
        p.cast::<[u64; N]>().write(black_box([0u64; N]));
        Box::<[u64; N]>::from_raw(p.cast())
    });
}

macro_rules! ten {
    ($name:ident, $f:ident) => {
        #[inline(never)]
        fn $name() {
            $f::<3>();
            $f::<4>();
            $f::<6>();
            $f::<8>();
            $f::<10>();
            $f::<12>();
            $f::<16>();
            $f::<32>();
            $f::<64>();
            $f::<128>();
        }
    };
}

ten!(ten_generic_out_of_line, generic);
ten!(ten_specialised, specialised);
ten!(ten_generic_inlined, inlined);

fn main() {
    ten_generic_out_of_line();
    ten_specialised();
    ten_generic_inlined();
    println!("ok");
}
