//! Two cases of issue 15 that need a crate of their own, built by the same cargo, offline, in
//! cargo's temporary directory:
//!
//! - case 11, a renamed dependency (`sa = { package = "specalloc" }`; trybuild cannot rename a
//!   dependency, a package may not depend on specalloc under two names): `#[sa::specialize]`
//!   without `crate = sa` is one error naming the option, on the attribute;
//!   `#[sa::specialize(crate = sa)]` compiles;
//! - case 10, a debug build (the tests themselves are optimised): `Box::new([1u8; 1 << 20])` on
//!   a 2 MiB thread stack works annotated as it does plain.

use std::path::Path;
use std::process::Command;

/// The fixture crate's directory, written once (the two tests share it and its target dir;
/// cargo's lock serialises them).
fn fixture() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(write_fixture).clone()
}

fn write_fixture() -> std::path::PathBuf {
    let facade = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("renamed-dependency");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"renamed\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\n\n[dependencies]\nsa = {{ package = \"specalloc\", path = {:?} }}\n\n\
             [workspace]\n",
            facade.canonicalize().unwrap()
        ),
    )
    .unwrap();
    let source = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/renamed_dependency.rs"),
    )
    .unwrap();
    std::fs::write(dir.join("src/main.rs"), source).unwrap();
    std::fs::create_dir_all(dir.join("src/bin")).unwrap();
    let big = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/big_box_debug.rs"),
    )
    .unwrap();
    std::fs::write(dir.join("src/bin/big_box_debug.rs"), big).unwrap();
    // The workspace's lock file, so that the offline check resolves what the workspace uses.
    let lock = facade.join("Cargo.lock");
    if !dir.join("Cargo.lock").exists() {
        std::fs::copy(&lock, dir.join("Cargo.lock")).unwrap();
    }
    dir
}

/// Runs cargo with `args` in the fixture crate.
fn cargo(args: &[&str]) -> std::process::Output {
    let dir = fixture();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    Command::new(cargo)
        .args(args)
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap()
}

#[test]
fn renamed_dependency_error_names_the_crate_option() {
    let out = cargo(&[
        "check",
        "--offline",
        "--quiet",
        "--message-format=short",
        "--bin",
        "renamed",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.contains("error")).collect();
    assert!(
        errors[0].contains("src/main.rs:4:1")
            && errors[0].contains("under the name `sa`")
            && errors[0].contains("#[sa::specialize(crate = sa)]"),
        "{stderr}"
    );
    // One error (and cargo's summary line): the item with the option compiled.
    assert_eq!(errors.len(), 2, "{stderr}");
}

#[test]
fn large_box_on_a_small_stack_in_a_debug_build() {
    for which in ["plain", "spec"] {
        let out = cargo(&[
            "run",
            "--offline",
            "--quiet",
            "--bin",
            "big_box_debug",
            "--",
            which,
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{which}: {stderr}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok", "{which}");
    }
}
