//! The install mark is decided by the linker, per linked image: built as a cargo workspace of
//! its own, offline, in cargo's temporary directory,
//!
//! - a host that calls `install!` sees the mark from its first constructor on and its annotated
//!   sites take the routines, while a shared library it loads, with its own copy of the runtime
//!   and the system allocator, sees no mark: its annotated code allocates and frees through its
//!   own global allocator;
//! - a shared library that calls `install!` keeps its mark to itself: executables that do not
//!   install specalloc and link it (before the runtime or after it) or load it with `dlopen`
//!   see no mark, and the library exports none.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Writes the fixture's packages and returns the workspace's directory.
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
    let cdylib = "[lib]\ncrate-type = [\"cdylib\"]\n";
    for (name, files, extra) in [
        ("host", &[("host.rs", "src/main.rs")][..], ""),
        ("plugin", &[("plugin.rs", "src/lib.rs")][..], cdylib),
        ("iplug", &[("iplug.rs", "src/lib.rs")][..], cdylib),
        (
            "nohost",
            &[
                ("nohost.rs", "src/nohost.rs"),
                ("first.rs", "src/bin/first.rs"),
                ("last.rs", "src/bin/last.rs"),
            ][..],
            "",
        ),
        ("dlhost", &[("dlhost.rs", "src/main.rs")][..], ""),
    ] {
        let pkg = dir.join(name);
        std::fs::create_dir_all(pkg.join("src/bin")).unwrap();
        std::fs::write(pkg.join("Cargo.toml"), manifest(name, extra)).unwrap();
        for (file, target) in files {
            std::fs::copy(here.join(file), pkg.join(target)).unwrap();
        }
    }
    // The host exports its symbols (`-rdynamic`), as a program that loads plugins may: the
    // mark stays out of them all the same, and the plugin's code reads its own.
    std::fs::write(
        dir.join("host/build.rs"),
        "fn main() { println!(\"cargo::rustc-link-arg-bins=-rdynamic\"); }\n",
    )
    .unwrap();
    // `first` links libiplug.so by its `#[link]` attribute (before the runtime's rlib);
    // `last` by a link argument, which comes at the end of the linker's command line.
    std::fs::write(
        dir.join("nohost/build.rs"),
        "fn main() {\n    println!(\"cargo::rerun-if-env-changed=IPLUG_DIR\");\n    \
         let dir = std::env::var(\"IPLUG_DIR\").unwrap();\n    \
         println!(\"cargo::rustc-link-search=native={dir}\");\n    \
         println!(\"cargo::rustc-link-arg-bin=last=-liplug\");\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        "[workspace]\nmembers = [\"host\", \"plugin\", \"iplug\", \"nohost\", \"dlhost\"]\n\
         resolver = \"2\"\n",
    )
    .unwrap();
    // The workspace's lock file, so that the offline build resolves what the workspace uses.
    if !dir.join("Cargo.lock").exists() {
        std::fs::copy(facade.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    }
    dir
}

/// Builds the fixture once (the libraries first: the executables link `libiplug.so`) and
/// returns its release directory.
fn release() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = write_fixture();
        let release = dir.join("target/release");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        for pkgs in [&["plugin", "iplug"][..], &["host", "nohost", "dlhost"][..]] {
            let mut cmd = Command::new(&cargo);
            cmd.args(["build", "--offline", "--quiet", "--release"]);
            for p in pkgs {
                cmd.args(["-p", p]);
            }
            let out = cmd
                .current_dir(&dir)
                .env("CARGO_TARGET_DIR", dir.join("target"))
                .env("IPLUG_DIR", &release)
                .env_remove("RUSTFLAGS")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        release
    })
}

/// `nm`'s listing of `file` with `args`, or `None` where `nm` is not installed.
fn nm(args: &[&str], file: &Path) -> Option<String> {
    let o = Command::new("nm").args(args).arg(file).output().ok()?;
    assert!(o.status.success(), "nm {}", file.display());
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Asserts `o` succeeded and returns its standard output.
fn stdout_of(o: Output) -> String {
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{:?}\n{stdout}{}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

#[test]
fn a_library_that_installs_keeps_its_mark() {
    let release = release();
    let lib = release.join("libiplug.so");
    if specalloc::spec::MARK_AT_LINK_TIME {
        if let Some(exported) = nm(&["-D", "--defined-only"], &lib) {
            assert!(
                !exported.contains("specalloc_install_mark"),
                "libiplug.so exports the mark:\n{exported}"
            );
        }
    }
    let sum: u64 = (0..1000u64).map(|v| 2 * v + 1).sum();
    let exe_sum: u64 = (0..10_000u64).sum();
    let expected = format!(
        "exe installed: false\nlibrary installed: 1\nlibrary sum: {sum}\nexe sum: {exe_sum}\n"
    );
    for exe in ["first", "last"] {
        let path = release.join(exe);
        if specalloc::spec::MARK_AT_LINK_TIME {
            if let Some(undefined) = nm(&["-D", "--undefined-only"], &path) {
                assert!(
                    !undefined.contains("specalloc_install_mark"),
                    "{exe} takes the mark from a shared library:\n{undefined}"
                );
            }
        }
        let out = Command::new(&path)
            .env("LD_LIBRARY_PATH", release)
            .output()
            .unwrap();
        assert_eq!(stdout_of(out), expected, "{exe}");
    }
    let out = Command::new(release.join("dlhost"))
        .arg(&lib)
        .output()
        .unwrap();
    assert_eq!(stdout_of(out), expected, "dlhost");
}

#[test]
fn the_mark_is_per_linked_image() {
    let release = release();
    if let Some(exported) = nm(&["-D", "--defined-only"], &release.join("host")) {
        assert!(
            !exported.contains("specalloc_install_mark"),
            "the host exports the mark, even with -rdynamic:\n{exported}"
        );
    }
    let out = Command::new(release.join("host"))
        .arg(release.join("libplugin.so"))
        .output()
        .unwrap();
    let stdout = stdout_of(out);
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
