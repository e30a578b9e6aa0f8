//! `#[specialize]` in an edition-2015 crate: a fixture crate (`tests/fixtures/edition2015/main.rs`,
//! `edition = "2015"`) whose functions, impl, trait and module use every rewritten form, built
//! with cargo, offline, in cargo's temporary directory (as `tests/debug_stack.rs` builds its
//! fixture):
//!
//! - annotated, with `extern crate specalloc;` at its root: it compiles and prints what the
//!   unannotated build prints;
//! - annotated without `extern crate specalloc;`: it does not compile, with the message the
//!   guide (`docs/macros.md`, "Known limits") quotes.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Mutex, OnceLock};

/// Writes the fixture crate once and returns its directory.
fn fixture() -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let facade = Path::new(env!("CARGO_MANIFEST_DIR"))
            .canonicalize()
            .unwrap();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("edition2015");
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(
            dir.join("Cargo.toml"),
            format!(
                "[package]\nname = \"edition2015\"\nversion = \"0.0.0\"\nedition = \"2015\"\n\
                 publish = false\n\n[dependencies]\nspecalloc = {{ path = {facade:?} }}\n\n\
                 [features]\nspecial = []\nextern = []\n\n[workspace]\n"
            ),
        )
        .unwrap();
        std::fs::copy(
            facade.join("tests/fixtures/edition2015/main.rs"),
            dir.join("src/main.rs"),
        )
        .unwrap();
        // The workspace's lock file, so that the offline build resolves what the workspace uses.
        std::fs::copy(facade.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
        dir
    })
    .clone()
}

/// `cargo run --offline` of the fixture with `features`, one build at a time (they share the
/// target directory).
fn run(features: &str) -> Output {
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let dir = fixture();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    std::process::Command::new(cargo)
        .args(["run", "--offline", "--quiet", "--features", features])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap()
}

fn stdout_of(features: &str) -> String {
    let out = run(features);
    assert!(
        out.status.success(),
        "--features {features:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn annotated_with_extern_crate_prints_what_plain_prints() {
    let plain = stdout_of("extern");
    let annotated = stdout_of("extern special");
    assert!(plain.contains("reported: (9, \"reported\""), "{plain}");
    assert_eq!(annotated, plain);
}

#[test]
fn without_extern_crate_the_guide_says_why() {
    let out = run("special");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    // docs/macros.md, "Known limits": "cannot find … `specalloc` in the crate root".
    assert!(
        stderr.contains("cannot find") && stderr.contains("`specalloc` in the crate root"),
        "{stderr}"
    );
}
