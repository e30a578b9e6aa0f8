//! Links `libspecalloc.so` with `hot-text.ld` (on Linux): the allocator's code placed together
//! at the start of the text, so that a preloaded process has less of the library resident. The
//! script only orders sections; `SPECALLOC_TEXT_ORDER=0` leaves it out (a linker without
//! GNU ld's `INSERT`, such as mold).

fn main() {
    println!("cargo:rerun-if-changed=hot-text.ld");
    println!("cargo:rerun-if-env-changed=SPECALLOC_TEXT_ORDER");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    let off = std::env::var("SPECALLOC_TEXT_ORDER").is_ok_and(|v| v == "0");
    if linux && !off {
        let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
        println!("cargo:rustc-cdylib-link-arg=-Wl,-T,{dir}/hot-text.ld");
    }
}
