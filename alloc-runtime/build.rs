//! Build script of the runtime.
//!
//! - Sets `cfg(specalloc_out_of_line)` in builds of a profile that inherits from `dev` (cargo's
//!   `PROFILE` is `debug` there, whatever the package's own opt-level): the `GlobalAlloc`
//!   methods of `SpecAlloc` are then `#[inline(never)]`, compiled in this crate at its
//!   opt-level rather than in the user's crate at opt-level 0. Release-based profiles keep them
//!   `#[inline]`.
//! - On ELF and Mach-O targets, compiles `csrc/install_mark.c`, the weak default (0) of the
//!   link-time install mark that `install!` defines (1), and sets `cfg(specalloc_link_mark)`
//!   (see `src/mark.rs`). Other targets keep the run-time mark set by a constructor, and so does
//!   a build with `SPECALLOC_RUN_TIME_MARK=1` in the environment (to test that mark here).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(specalloc_out_of_line)");
    println!("cargo::rustc-check-cfg=cfg(specalloc_link_mark)");
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=csrc/install_mark.c");
    println!("cargo::rerun-if-env-changed=SPECALLOC_RUN_TIME_MARK");
    if std::env::var("PROFILE").as_deref() == Ok("debug") {
        println!("cargo::rustc-cfg=specalloc_out_of_line");
    }
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let weak_symbols = matches!(
        os.as_str(),
        "linux"
            | "android"
            | "freebsd"
            | "netbsd"
            | "openbsd"
            | "dragonfly"
            | "illumos"
            | "solaris"
            | "macos"
            | "ios"
    );
    let run_time_mark = std::env::var("SPECALLOC_RUN_TIME_MARK").as_deref() == Ok("1");
    if weak_symbols && !run_time_mark {
        cc::Build::new()
            .file("csrc/install_mark.c")
            .compile("specalloc_install_mark");
        println!("cargo::rustc-cfg=specalloc_link_mark");
    }
}
