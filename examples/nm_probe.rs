//! A small program that allocates through exactly ten size classes with the size-specialised
//! entry points. `tests/nm_symbols.rs` builds it and counts its routine symbols with `nm`
//! (ten, or zero with the `no-size-specialized` feature); the binary-size cost of
//! specialisation is this binary's size with the feature off minus with it on.
//!
//! ```text
//! cargo build --release --example nm_probe
//! nm -C --defined-only target/release/examples/nm_probe | grep 'specalloc_runtime::routines::' \
//!     | sort -u -k1,1 | wc -l
//! ```

#[path = "common/args.rs"]
mod args;

use std::hint::black_box;

specalloc::install!(static GLOBAL);

fn main() {
    let [] = args::numbers(
        "nm_probe",
        "usage: nm_probe   (no arguments)",
        [],
        |_, _| true,
    );
    use specalloc::spec::boxed;
    let mut total = 0u64;
    for i in 0..1000u64 {
        // Ten classes: 24, 32, 48, 64, 80, 96, 128, 256, 512 and 1024 bytes.
        total += black_box(boxed([i; 3]))[0];
        total += black_box(boxed([i; 4]))[1];
        total += black_box(boxed([i; 6]))[2];
        total += black_box(boxed([i; 8]))[3];
        total += black_box(boxed([i; 10]))[4];
        total += black_box(boxed([i; 12]))[5];
        total += black_box(boxed([i; 16]))[6];
        total += black_box(boxed([i; 32]))[7];
        total += black_box(boxed([i; 64]))[8];
        total += black_box(boxed([i; 128]))[9];
    }
    println!("{total}");
}
