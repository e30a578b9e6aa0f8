//! The facade's `override` feature: a Rust binary that calls `specalloc::install!()` with it
//! exports C's malloc family, so the C code linked into it allocates from specalloc. The
//! binary is a crate of its own (`tests/override_fixture/`: its `src/main.rs` is
//! `fixture_main.rs`, so named for cargo not to take it for a test; C code built by its build
//! script with the `cc` crate), built here by a cargo of its own, offline, into cargo's temporary
//! directory (so that the feature never reaches the workspace's other test binaries). It checks
//! with specalloc's counters that C allocations from the main thread, Rust-spawned threads,
//! C-spawned threads and the C library itself went to specalloc; here `nm` shows that the
//! binary defines `malloc` and exports it to the C library.

use std::path::Path;
use std::process::Command;

mod common;

#[test]
fn override_feature_serves_linked_c_code() {
    if !common::have("cc", "the override fixture (C code built with cc)") {
        return;
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = here.join("..").canonicalize().unwrap();
    let src = here.join("tests/override_fixture");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("override-fixture");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"override-fixture\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\nbuild = \"build.rs\"\n\n[dependencies]\n\
             specalloc = {{ path = {root:?}, features = [\"override\"] }}\n\n\
             [build-dependencies]\ncc = \"1\"\n\n[workspace]\n"
        ),
    )
    .unwrap();
    for (from, to) in [
        ("fixture_main.rs", "src/main.rs"),
        ("build.rs", "build.rs"),
        ("overridden.c", "overridden.c"),
    ] {
        std::fs::copy(src.join(from), dir.join(to)).unwrap();
    }
    // The workspace's lock file, so that the offline build resolves what the workspace uses.
    std::fs::copy(root.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let o = Command::new(cargo)
        .args(["build", "--offline", "--quiet", "--release"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "building the fixture failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let exe = dir.join("target/release/override-fixture");

    if common::have("nm", "the override fixture's symbol check") {
        let nm = |args: &[&str]| {
            let o = Command::new("nm").args(args).arg(&exe).output().unwrap();
            String::from_utf8_lossy(&o.stdout).into_owned()
        };
        let defined = |table: &str, sym: &str| {
            table
                .lines()
                .any(|l| l.ends_with(&format!(" T {sym}")) || l.ends_with(&format!(" t {sym}")))
        };
        let (all, dynamic) = (nm(&["--defined-only"]), nm(&["-D", "--defined-only"]));
        for sym in [
            "malloc",
            "free",
            "calloc",
            "realloc",
            "posix_memalign",
            "aligned_alloc",
        ] {
            assert!(defined(&all, sym), "the binary does not define {sym}");
            assert!(
                defined(&dynamic, sym),
                "the binary does not export {sym} (the C library would keep its own)"
            );
        }
    }

    let o = Command::new(&exe).output().unwrap();
    common::assert_ok("the override fixture", &o);
    let out = String::from_utf8_lossy(&o.stdout);
    print!("{out}");
    for line in [
        "ok C malloc/free on the main thread",
        "ok the C library's own allocations",
        "ok C malloc/free on Rust-spawned threads",
        "ok C malloc/free on C-spawned threads",
    ] {
        assert!(out.contains(line), "missing `{line}` in:\n{out}");
    }
}
