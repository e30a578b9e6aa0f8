//! Issue 15, case 11: a renamed dependency (`sa = { package = "specalloc" }`). trybuild cannot
//! rename a dependency (a package may not depend on specalloc under two names), so this test
//! writes a one-file crate with that manifest into cargo's temporary directory and checks it
//! with the same cargo, offline: `#[sa::specialize]` without `crate = sa` is one error naming
//! the option, on the attribute; `#[sa::specialize(crate = sa)]` compiles.

use std::path::Path;
use std::process::Command;

#[test]
fn renamed_dependency_error_names_the_crate_option() {
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
    // The workspace's lock file, so that the offline check resolves what the workspace uses.
    let lock = facade.join("Cargo.lock");
    if !dir.join("Cargo.lock").exists() {
        std::fs::copy(&lock, dir.join("Cargo.lock")).unwrap();
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["check", "--offline", "--quiet", "--message-format=short"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
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
