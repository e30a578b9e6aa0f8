//! Shared by the C API's tests: where `libspecalloc.so` is, compiling C and C++ programs, and
//! running programs with and without `LD_PRELOAD`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// `libspecalloc.so`, built once per test binary by a cargo of its own (`cargo build --release
/// -p specalloc-capi`, offline, into a target directory of its own under `target/`, so that
/// it never waits on the lock of the cargo running the tests; a second test binary finds it
/// up to date). `SPECALLOC_SO` names a library to use instead.
pub fn lib() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(build_lib).clone()
}

fn build_lib() -> PathBuf {
    if let Some(p) = std::env::var_os("SPECALLOC_SO") {
        return PathBuf::from(p);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("../capi-build");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let o = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--offline",
            "--quiet",
            "-p",
            "specalloc-capi",
        ])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", &target)
        .env_remove("RUSTFLAGS")
        .output()
        .expect("run cargo");
    assert!(
        o.status.success(),
        "building libspecalloc.so failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let so = target.join("release/libspecalloc.so");
    assert!(so.exists(), "{} missing after the build", so.display());
    so.canonicalize().expect("library path")
}

/// The crate's `include` directory (`specalloc.h`).
pub fn include_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("include")
}

/// A scratch directory for this test (emptied first).
pub fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("capi")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch directory");
    d
}

/// Whether `prog` can be run (found on `PATH`); prints a line saying it is skipped if not.
pub fn have(prog: &str, what: &str) -> bool {
    let found = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false);
    if !found {
        println!("SKIPPED {what}: `{prog}` is not installed");
    }
    found
}

/// Compiles `src` (a file under `tests/c/`) with `compiler` into `dir`, with `flags`; `None`
/// (after printing why) when the compiler is missing. A compile error fails the test.
pub fn compile(compiler: &str, src: &str, dir: &Path, flags: &[&str]) -> Option<PathBuf> {
    if !have(compiler, src) {
        return None;
    }
    let src_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(src);
    let out = dir.join(src.replace('.', "_"));
    let o = Command::new(compiler)
        .arg("-O1")
        .arg("-g")
        .arg("-Wall")
        .arg("-Werror")
        .arg("-Wno-alloc-size-larger-than")
        .arg("-fno-builtin")
        .arg("-I")
        .arg(include_dir())
        .arg("-o")
        .arg(&out)
        .arg(&src_path)
        .args(flags)
        .arg("-pthread")
        .arg("-ldl")
        .output()
        .expect("run the compiler");
    assert!(
        o.status.success(),
        "{compiler} {src} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(out)
}

/// Runs `cmd` with `libspecalloc.so` preloaded.
pub fn preloaded(mut cmd: Command) -> Output {
    cmd.env("LD_PRELOAD", lib());
    cmd.output().expect("run the program")
}

/// Asserts the program exited 0, showing its output otherwise.
pub fn assert_ok(what: &str, o: &Output) {
    assert!(
        o.status.success(),
        "{what} failed ({:?})\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}
