//! Two cases of issue 15 that need a crate of their own, built by the same cargo, offline, in
//! cargo's temporary directory:
//!
//! - case 11, a renamed dependency (`sa = { package = "specalloc" }`; trybuild cannot rename a
//!   dependency, a package may not depend on specalloc under two names): `#[sa::specialize]`
//!   without `crate = sa` is one error naming the option, on the attribute;
//!   `#[sa::specialize(crate = sa)]` compiles;
//! - case 10, a debug build (the tests themselves are optimised): `Box::new([1u8; 1 << 20])` on
//!   a 2 MiB thread stack works annotated as it does plain;
//! - issue 29, the differential corpus (`tests/differential/corpus.rs`) in a debug build:
//!   plain, annotated and reported give the same transcript (future sizes, 1 MiB elements on
//!   a 2 MiB stack), and an abort in `String::with_capacity` (or a capacity overflow in
//!   `Vec::with_capacity` or `vec!`) shows the user's frame right under std's;
//! - issue 29, the clippy corpus (`tests/clippy/*.rs`): clippy's output on each file is its
//!   output on the same file without the attributes.

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
    // The facade's differential corpus, included from where it is.
    let corpus = facade.join("tests/differential").canonicalize().unwrap();
    let differential = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/differential_debug.rs"),
    )
    .unwrap()
    .replace("CORPUS_DIR", corpus.to_str().unwrap());
    std::fs::write(dir.join("src/bin/differential_debug.rs"), differential).unwrap();
    // The clippy corpus, as written and plain (each attribute line replaced by a comment, so
    // that the lines stay where they are).
    for entry in
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clippy")).unwrap()
    {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_str().unwrap().to_string();
        let source = std::fs::read_to_string(&path).unwrap();
        let plain: String = source
            .lines()
            .map(|l| {
                if l.trim_start().starts_with("#[sa::specialize") {
                    "// (plain: the same code without the attribute)"
                } else {
                    l
                }
            })
            .flat_map(|l| [l, "\n"])
            .collect();
        std::fs::write(dir.join(format!("src/bin/clippy_{name}.rs")), &source).unwrap();
        std::fs::write(dir.join(format!("src/bin/clippy_{name}_plain.rs")), plain).unwrap();
    }
    // The workspace's lock file, so that the offline check resolves what the workspace uses.
    let lock = facade.join("Cargo.lock");
    if !dir.join("Cargo.lock").exists() {
        std::fs::copy(&lock, dir.join("Cargo.lock")).unwrap();
    }
    dir
}

/// Runs cargo with `args` in the fixture crate.
fn cargo(args: &[&str]) -> std::process::Output {
    cargo_with(args, &[])
}

/// Runs cargo with `args` in the fixture crate, with the environment variables `env` set.
fn cargo_with(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let dir = fixture();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    Command::new(cargo)
        .args(args)
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS")
        .envs(env.iter().copied())
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

/// Issue 29: the differential corpus compiled without optimisation, plain, under
/// `#[specialize]` and under `#[specialize(report)]`: the same transcript (the fixture compares
/// them line for line, as `tests/differential.rs` does optimised), including the sizes of
/// futures whose sites await, and `vec![[1u8; 1 << 20]]` and `Box::new([1u8; 1 << 20])` on
/// 2 MiB thread stacks (a stack overflow aborts the run).
#[test]
fn differential_corpus_in_a_debug_build() {
    let out = cargo(&["run", "--offline", "--quiet", "--bin", "differential_debug"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: usize = stdout
        .trim()
        .strip_suffix(" lines, the same in the three")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(lines >= 60, "{stdout}");
}

/// The frames of a backtrace (`RUST_BACKTRACE=1`), down to the first of the program's own
/// (`differential_debug::…`), with the corpus module's name (`plain`, `special`) taken out.
fn frames_to_user(stderr: &str, module: &str) -> Vec<String> {
    let mut frames = Vec::new();
    for line in stderr.lines() {
        let Some((n, name)) = line.trim().split_once(": ") else {
            continue;
        };
        if n.parse::<u32>().is_err() {
            continue;
        }
        frames.push(name.replace(&format!("::{module}::"), "::CORPUS::"));
        if name.starts_with("differential_debug::") {
            return frames;
        }
    }
    panic!("no frame of the program in:\n{stderr}");
}

/// Issue 29: `String::with_capacity(usize::MAX / 2)` aborts, and `Vec::<u64>::with_capacity(
/// usize::MAX)` and `vec![7u64; usize::MAX]` panic (all three left to std), and their
/// backtraces (debug build, `RUST_BACKTRACE=1`) read as without the attribute: std's function,
/// then the user's, with no frame of specalloc between.
#[test]
fn an_abort_keeps_the_users_frame_on_top() {
    for (case, message, std) in [
        (
            "huge_capacity",
            "memory allocation of 9223372036854775807 bytes failed",
            "alloc::string::String::with_capacity",
        ),
        (
            "overflowing_capacity",
            "capacity overflow",
            "alloc::vec::Vec<T>::with_capacity",
        ),
        (
            "overflowing_elem",
            "capacity overflow",
            "alloc::vec::from_elem",
        ),
    ] {
        let mut seen = Vec::new();
        for module in ["plain", "special"] {
            let out = cargo_with(
                &[
                    "run",
                    "--offline",
                    "--quiet",
                    "--bin",
                    "differential_debug",
                    "--",
                    case,
                    module,
                ],
                &[("RUST_BACKTRACE", "1")],
            );
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{case} {module}: {stderr}");
            assert!(stderr.contains(message), "{case} {module}: {stderr}");
            let frames = frames_to_user(&stderr, module);
            let n = frames.len();
            assert!(
                n >= 2 && frames[n - 2] == std,
                "{case} {module}: {frames:#?}"
            );
            assert_eq!(frames[n - 1], format!("differential_debug::CORPUS::{case}"));
            seen.push(frames);
        }
        assert_eq!(seen[0], seen[1], "{case}: plain against annotated");
    }
}

/// clippy's diagnostics (`--message-format=short`) on the fixture's binary `bin`: default,
/// pedantic and nursery lints, and `str_to_string`, with `bin`'s file name replaced by `FILE`.
fn clippy(bin: &str) -> Vec<String> {
    let out = cargo(&[
        "clippy",
        "--offline",
        "--quiet",
        "--message-format=short",
        "--bin",
        bin,
        "--",
        "-W",
        "clippy::pedantic",
        "-W",
        "clippy::nursery",
        "-W",
        "clippy::str_to_string",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{bin}: {stderr}");
    stderr
        .lines()
        .filter(|l| l.starts_with("src/"))
        .map(|l| l.replace(&format!("src/bin/{bin}.rs"), "FILE"))
        .collect()
}

/// Issue 29: under clippy (`cfg(clippy)`) the attribute emits the item as written, so clippy
/// lints what the user wrote: its output on each file of the clippy corpus is its output on the
/// file without the attributes, line for line (and the corpus does draw the lints it is about).
#[test]
fn clippy_lints_annotated_code_as_plain_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clippy");
    let mut compared = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry
            .unwrap()
            .path()
            .file_stem()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        let plain = clippy(&format!("clippy_{name}_plain"));
        let annotated = clippy(&format!("clippy_{name}"));
        assert_eq!(annotated, plain, "{name}: annotated against plain");
        if name == "lints" {
            // The messages of unnecessary_to_owned, to_string_in_format_args, useless_vec,
            // str_to_string, box_default and vec_init_then_push.
            for message in [
                "21:23: warning: unnecessary use of `to_string`",
                "22:25: warning: `to_string` applied to a type that implements `Display`",
                "31:13: warning: useless use of `vec!`",
                "23:13: warning: `to_string()` called on a `&str`",
                "43:24: warning: `Box::new(_)` of default value",
                "33:5: warning: calls to `push` immediately after creation",
            ] {
                assert!(
                    plain
                        .iter()
                        .any(|l| l.starts_with(&format!("FILE:{message}"))),
                    "{message}: not drawn: {plain:#?}"
                );
            }
        }
        compared += 1;
    }
    assert!(compared >= 1);
}
