//! Sets `cfg(specalloc_out_of_line)` in builds of a profile that inherits from `dev` (cargo's
//! `PROFILE` is `debug` there, whatever the package's own opt-level): the `GlobalAlloc` methods
//! of `SpecAlloc` are then `#[inline(never)]`, compiled in this crate at its opt-level rather
//! than in the user's crate at opt-level 0. Release-based profiles keep them `#[inline]`.

fn main() {
    println!("cargo::rustc-check-cfg=cfg(specalloc_out_of_line)");
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var("PROFILE").as_deref() == Ok("debug") {
        println!("cargo::rustc-cfg=specalloc_out_of_line");
    }
}
