//! Rewrites `alloc-runtime/src/routines.rs` from the generator in `tools/gen_routines.rs`.
//!
//! ```text
//! cargo run -p specalloc-runtime --example gen_routines
//! ```

#[path = "../tools/gen_routines.rs"]
mod gen_routines;

fn main() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/routines.rs");
    std::fs::write(path, gen_routines::generate()).expect("write src/routines.rs");
    println!("wrote {path}");
}
