//! The allocator in a debug build (cargo's `dev` profile, opt-level 0, as `cargo test` builds a
//! user's crate) fits in the stacks programs give their smallest threads. The workspace's own
//! tests are optimised, so a fixture crate (`tests/fixtures/debug_stack/main.rs`) is built in
//! the `dev` profile, offline, in cargo's temporary directory, twice: with specalloc installed
//! (and its `override` feature, so C's malloc family is specalloc's too) and with glibc's
//! malloc as the global allocator (the baseline), in one target directory.
//!
//! - threads with a 16 KiB stack, and with the platform's minimum (`PTHREAD_STACK_MIN`),
//!   allocate (generic, size-specialised and C entry points), free across threads and exit;
//! - painting the stack bounds the depth each allocator path reaches in a debug build (a
//!   thread's first allocation, the refills, frees, remote frees, large and huge blocks,
//!   reallocations, the C entry points, the thread's exit): each within its budget below, so
//!   that a change that deepens one fails. The table it prints has glibc's depths for the same
//!   work beside them (`cargo test --test debug_stack -- --nocapture`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Writes the fixture crate and returns its directory.
fn write_fixture() -> PathBuf {
    let facade = Path::new(env!("CARGO_MANIFEST_DIR"))
        .canonicalize()
        .unwrap();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("debug-stack");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"debug-stack\"\nversion = \"0.0.0\"\nedition = \"2021\"\n\
             publish = false\n\n[dependencies]\nspecalloc = {{ path = {facade:?} }}\nlibc = \"0.2\"\n\n\
             [features]\ndefault = [\"specalloc/override\"]\nsystem = []\n\n[workspace]\n"
        ),
    )
    .unwrap();
    std::fs::copy(
        facade.join("tests/fixtures/debug_stack/main.rs"),
        dir.join("src/main.rs"),
    )
    .unwrap();
    // The workspace's lock file, so that the offline build resolves what the workspace uses.
    if !dir.join("Cargo.lock").exists() {
        std::fs::copy(facade.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    }
    dir
}

/// The fixture's binary built in the `dev` profile, with specalloc (`system == false`) or
/// glibc's malloc; each build is copied out, since both share the target directory.
fn binary(system: bool) -> PathBuf {
    static BUILT: [OnceLock<PathBuf>; 2] = [OnceLock::new(), OnceLock::new()];
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    BUILT[system as usize]
        .get_or_init(|| {
            let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
            build(system)
        })
        .clone()
}

fn build(system: bool) -> PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(write_fixture);
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--offline", "--quiet"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTFLAGS");
    if system {
        // Without `override` either: glibc's malloc family stays glibc's.
        cmd.args(["--no-default-features", "--features", "system"]);
    }
    let built = cmd.output().unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let name = if system { "system" } else { "specalloc" };
    let out = dir.join(format!("debug-stack-{name}"));
    std::fs::copy(dir.join("target/debug/debug-stack"), &out).unwrap();
    out
}

fn run(bin: &Path, args: &[&str]) -> Output {
    run_with(bin, args, &[])
}

fn run_with(bin: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(bin)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

#[test]
fn small_thread_stacks_in_a_debug_build() {
    let bin = binary(false);
    for stack in [16 << 10, libc::PTHREAD_STACK_MIN] {
        let out = run(&bin, &["small", &stack.to_string()]);
        assert!(
            out.status.success(),
            "threads with {stack} bytes of stack: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
    }
}

/// Each path's deepest byte of stack, in bytes below the frame that called it, with `env`.
fn depths(bin: &Path, env: &[(&str, &str)]) -> Vec<(String, usize)> {
    let out = run_with(bin, &["depth"], env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
        .lines()
        .map(|l| {
            let (n, name) = l.split_once(' ').unwrap();
            (name.to_string(), n.parse().unwrap())
        })
        .collect()
}

/// Each path's budget in a debug build, in bytes of stack below the calling frame (std's own
/// frames included): what it takes now plus 512 bytes, rounded up to a multiple of 512.
const BUDGETS: &[(&str, usize)] = &[
    ("first allocation", 5632),
    ("first specialised allocation", 5632),
    ("specialised tiny allocation", 5632),
    ("allocations and refills (20,000 of 16 bytes)", 6656),
    ("frees (spans emptied)", 2560),
    ("remote frees", 4608),
    ("large and huge allocations", 4608),
    ("reallocations (a Vec growing to 2.4 MB)", 4608),
    ("C malloc", 5120),
    ("C calloc", 1536),
    // These two take a new span of their class, whose depth (the refills') depends on what
    // the steps before left in the thread's reserve of page runs: they went from 4,295 and
    // 3,143 to 6,352 and 5,200 bytes when the spans of the classes over 4 KiB grew past
    // 64 KiB. Their budget is the refills'.
    ("C realloc", 6656),
    ("C posix_memalign", 1536),
    ("C aligned_alloc", 6656),
    ("C malloc_usable_size", 1536),
    ("C free", 1536),
    ("thread exit", 2560),
];

/// The first allocation of a program's second thread starts the background trimmer's thread
/// (`pthread_create`, which allocates): its budget. The other paths are measured without the
/// trimmer (`SPECALLOC_BACKGROUND_PURGE_MS=0`): a measured path that happened to be the first
/// after the trimmer stopped would start it again.
const FIRST_ALLOCATION_STARTING_THE_TRIMMER: usize = 8704;

#[test]
fn debug_build_stack_depth_per_path() {
    let off = [("SPECALLOC_BACKGROUND_PURGE_MS", "0")];
    let spec = depths(&binary(false), &off);
    let system = depths(&binary(true), &off);
    let starting = depths(&binary(false), &[])[0].clone();
    assert_eq!(starting.0, "first allocation");
    assert!(
        starting.1 <= FIRST_ALLOCATION_STARTING_THE_TRIMMER,
        "the first allocation that starts the trimmer: {} bytes",
        starting.1
    );
    println!(
        "{:>6}         first allocation, starting the trimmer",
        starting.1
    );
    let names: Vec<&str> = spec.iter().map(|(n, _)| n.as_str()).collect();
    let budgeted: Vec<&str> = BUDGETS.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, budgeted);
    let table: String = spec
        .iter()
        .zip(&system)
        .map(|((n, d), (_, g))| format!("{d:>6} {g:>6}  {n}\n"))
        .collect();
    let table = format!("specalloc  glibc  (bytes of stack, debug build)\n{table}");
    for ((name, d), (_, budget)) in spec.iter().zip(BUDGETS) {
        assert!(
            d <= budget,
            "{name}: {d} bytes, over its budget of {budget}\n{table}"
        );
    }
    println!("{table}");
}
