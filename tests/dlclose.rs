//! `dlclose` of a plugin that uses specalloc: a Rust cdylib that calls `install!()`
//! (`tests/fixtures/dlclose/plug.rs`, built as a cargo workspace of its own, offline, in
//! cargo's temporary directory) is loaded by a C host (`tests/fixtures/dlclose/host.c`), used by
//! 4 threads and closed while they run; then the threads exit, which runs the runtime's
//! pthread-key destructor, and the host waits and starts another thread. With
//! `SPECALLOC_BACKGROUND_PURGE_MS` set, the plugin's purge thread, started when it was
//! loaded, runs on after the close (also when the host only loads and closes the plugin). The host must exit 0 (a destructor or thread left
//! pointing into an unmapped image is a SIGSEGV). Skipped, with a line, without `cc`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Builds the plugin once and returns its path.
fn plugin() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let facade = Path::new(env!("CARGO_MANIFEST_DIR"))
            .canonicalize()
            .unwrap();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dlclose");
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(
            dir.join("Cargo.toml"),
            format!(
                "[package]\nname = \"plug\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
                 publish = false\n\n[lib]\ncrate-type = [\"cdylib\"]\n\n[dependencies]\n\
                 specalloc = {{ path = {facade:?} }}\n\n[workspace]\n"
            ),
        )
        .unwrap();
        std::fs::copy(
            facade.join("tests/fixtures/dlclose/plug.rs"),
            dir.join("src/lib.rs"),
        )
        .unwrap();
        if !dir.join("Cargo.lock").exists() {
            std::fs::copy(facade.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
        }
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let out = Command::new(cargo)
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
        dir.join("target/release/libplug.so")
    })
}

/// The C host, compiled once; `None` (after a line) without `cc`.
fn host() -> Option<PathBuf> {
    static EXE: OnceLock<Option<PathBuf>> = OnceLock::new();
    EXE.get_or_init(compile_host).clone()
}

fn compile_host() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dlclose-host");
    std::fs::create_dir_all(&dir).unwrap();
    let exe = dir.join("host");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/dlclose/host.c");
    let o = match Command::new("cc")
        .args(["-O1", "-g", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(["-pthread", "-ldl"])
        .output()
    {
        Ok(o) => o,
        Err(_) => {
            println!("SKIPPED: `cc` is not installed");
            return None;
        }
    };
    assert!(
        o.status.success(),
        "cc host.c:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    Some(exe)
}

fn run_host(purge_ms: Option<&str>, args: &[&str]) {
    let Some(host) = host() else {
        return;
    };
    let mut cmd = Command::new(host);
    cmd.arg(plugin()).args(args);
    match purge_ms {
        Some(ms) => cmd.env("SPECALLOC_BACKGROUND_PURGE_MS", ms),
        None => cmd.env_remove("SPECALLOC_BACKGROUND_PURGE_MS"),
    };
    let o = cmd.output().expect("run the host");
    assert!(
        o.status.success(),
        "host ({purge_ms:?}) failed: {:?}\n{}{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&o.stdout), "host ok\n");
}

#[test]
fn threads_exit_after_the_plugin_is_closed() {
    run_host(None, &[]);
    run_host(Some("1"), &[]);
}

/// The plugin is loaded and closed without a call: its purge thread, started when it was
/// loaded, is the only thing of it still running; with or without it, the host forks after the
/// close (the plugin's fork handlers are still there to be called).
#[test]
fn the_purge_thread_outlives_the_plugin() {
    run_host(Some("1"), &["load-only"]);
    run_host(None, &["load-only"]);
}
