//! The install mark is decided by the linker, per linked image (issue 22): built as a cargo
//! project of its own, offline, in cargo's temporary directory, a host that calls `install!`
//! sees the mark from its first constructor on and its annotated sites take the routines, while
//! a shared library it loads, with its own copy of the runtime and the system allocator, sees
//! no mark: its annotated code allocates and frees through its own global allocator.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Writes the two-package fixture (`host`, `plugin`) and returns its directory.
fn write_fixture() -> PathBuf {
    let facade = Path::new(env!("CARGO_MANIFEST_DIR"));
    let here = facade.join("tests/fixtures/install_mark");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("install-mark");
    let facade = facade.canonicalize().unwrap();
    let manifest = |name: &str, extra: &str| {
        format!(
            "[package]\nname = \"{name}\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\n{extra}\n[dependencies]\nspecalloc = {{ path = {facade:?} }}\n\
             libc = \"0.2\"\n"
        )
    };
    for (name, file, extra, target) in [
        ("host", "host.rs", "", "src/main.rs"),
        (
            "plugin",
            "plugin.rs",
            "[lib]\ncrate-type = [\"cdylib\"]\n",
            "src/lib.rs",
        ),
    ] {
        let pkg = dir.join(name);
        std::fs::create_dir_all(pkg.join("src")).unwrap();
        std::fs::write(pkg.join("Cargo.toml"), manifest(name, extra)).unwrap();
        std::fs::copy(here.join(file), pkg.join(target)).unwrap();
    }
    // The host exports its symbols (`-rdynamic`), the mark among them, as a program that
    // loads plugins may: the plugin's weak default is hidden, so its code still reads its own.
    std::fs::write(
        dir.join("host/build.rs"),
        "fn main() { println!(\"cargo::rustc-link-arg-bins=-rdynamic\"); }\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[workspace]\nmembers = [\"host\", \"plugin\"]\nresolver = \"2\"\n",
    )
    .unwrap();
    // The workspace's lock file, so that the offline build resolves what the workspace uses.
    if !dir.join("Cargo.lock").exists() {
        std::fs::copy(facade.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    }
    dir
}

#[test]
fn the_mark_is_per_linked_image() {
    let dir = write_fixture();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(&cargo)
        .args(["build", "--offline", "--quiet", "--release"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let release = dir.join("target/release");
    let nm = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(release.join("host"))
        .output();
    if let Ok(nm) = nm {
        let symbols = String::from_utf8_lossy(&nm.stdout);
        assert!(
            !specalloc::spec::MARK_AT_LINK_TIME || symbols.contains("specalloc_install_mark"),
            "the host does not export the mark: {symbols}"
        );
    }
    let out = Command::new(release.join("host"))
        .arg(release.join("libplugin.so"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sum: u64 = (0..1000u64).map(|v| 2 * v + 1).sum();
    // Before `main` the mark holds where the linker decides it; a constructor's mark may come
    // after the host's own constructor.
    let early = if specalloc::spec::MARK_AT_LINK_TIME {
        "host early: true\n"
    } else {
        ""
    };
    let stdout: String = stdout
        .lines()
        .filter(|l| specalloc::spec::MARK_AT_LINK_TIME || !l.starts_with("host early"))
        .map(|l| format!("{l}\n"))
        .collect();
    let expected = format!(
        "host installed: true\n{early}host class-2 allocations: true\nplugin: {sum}\n\
         host sum: {sum}\n"
    );
    assert_eq!(stdout, expected);
}
