//! Build script of the runtime.
//!
//! - Sets `cfg(specalloc_out_of_line)` in builds of a profile that inherits from `dev` (cargo's
//!   `PROFILE` is `debug` there, whatever the package's own opt-level): the `GlobalAlloc`
//!   methods of `SpecAlloc` are then `#[inline(never)]`, compiled in this crate at its
//!   opt-level rather than in the user's crate at opt-level 0. Release-based profiles keep them
//!   `#[inline]`.
//! - Sets `cfg(specalloc_asm_fast)` in those builds on x86_64 Linux when the runtime is compiled
//!   at opt-level 0, but with the `checked` or `local-dynamic-tls` feature: `GlobalAlloc::alloc` and `dealloc` then take the fast paths
//!   written in assembly first (`src/generic/asm.rs`).
//! - Sets `cfg(specalloc_cold_path)` when rustc is 1.95 or later, which has
//!   `core::hint::cold_path` (the fast paths mark their misses with it).
//! - On ELF and Mach-O targets, compiles `csrc/install_mark.c`, the weak default (0) of the
//!   link-time install mark that `install!` defines (1), and sets `cfg(specalloc_link_mark)`
//!   (see `src/mark.rs`). Other targets keep the run-time mark set by a constructor, and so does
//!   a build with `SPECALLOC_RUN_TIME_MARK=1` in the environment (to test that mark here).

fn main() {
    println!("cargo::rustc-check-cfg=cfg(specalloc_out_of_line)");
    println!("cargo::rustc-check-cfg=cfg(specalloc_link_mark)");
    println!("cargo::rustc-check-cfg=cfg(specalloc_cold_path)");
    if rustc_minor().is_some_and(|minor| minor >= 95) {
        println!("cargo::rustc-cfg=specalloc_cold_path");
    }
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=csrc/install_mark.c");
    println!("cargo::rerun-if-env-changed=SPECALLOC_RUN_TIME_MARK");
    println!("cargo::rustc-check-cfg=cfg(specalloc_asm_fast)");
    if std::env::var("PROFILE").as_deref() == Ok("debug") {
        println!("cargo::rustc-cfg=specalloc_out_of_line");
        let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
        let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
        let feature = |f: &str| std::env::var_os(format!("CARGO_FEATURE_{f}")).is_some();
        // Only at opt-level 0: optimised (a profile line for this package), the Rust paths
        // compile to fewer instructions than these.
        let unoptimised = std::env::var("OPT_LEVEL").as_deref() == Ok("0");
        if arch == "x86_64"
            && os == "linux"
            && unoptimised
            && !feature("CHECKED")
            && !feature("LOCAL_DYNAMIC_TLS")
            && !feature("PROFILING")
        {
            println!("cargo::rustc-cfg=specalloc_asm_fast");
        }
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

/// The minor version of the rustc that builds this crate (`rustc 1.95.0 (...)` gives 95).
fn rustc_minor() -> Option<u32> {
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let out = std::process::Command::new(rustc)
        .arg("--version")
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let version = text.split_whitespace().nth(1)?;
    version.split('.').nth(1)?.parse().ok()
}
