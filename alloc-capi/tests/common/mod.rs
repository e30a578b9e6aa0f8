//! Shared by the C API's tests: where `libspecalloc.so` is, compiling C and C++ programs, and
//! running programs with and without `LD_PRELOAD`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// `libspecalloc.so` as cargo built it for this test run: next to the test binary (cargo puts
/// the library target's cdylib in the same `deps` directory), or one directory up.
pub fn lib() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe.parent().expect("test binary directory");
    for cand in [dir.join("libspecalloc.so"), dir.join("../libspecalloc.so")] {
        if cand.exists() {
            return cand.canonicalize().expect("library path");
        }
    }
    panic!("libspecalloc.so not found next to {}", exe.display());
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
