//! Aligned allocations under the preload (`tests/c/aligned.c`), against glibc as the control:
//! a small block at a large alignment costs about what glibc's costs in address space, not a
//! mapping of its own; every alignment from 16 B to 4 MiB at every size from 1 B to 1 MiB is
//! served within twice glibc's address space; and with the process at `vm.max_map_count`,
//! requests fail cleanly or succeed, leave no slop mapped, and succeed again once mappings are
//! given back. Skipped, with a line, without `cc`.

mod common;

use std::path::Path;
use std::process::Command;

/// Runs `exe mode` (preloaded when `preload`), asserts it succeeded, and returns the figure
/// `key=value` of its `ok` line.
fn run(exe: &Path, mode: &str, preload: bool) -> impl Fn(&str) -> i64 {
    let mut cmd = Command::new(exe);
    cmd.arg(mode);
    let o = if preload {
        common::preloaded(cmd)
    } else {
        cmd.output().expect("run aligned")
    };
    let what = format!(
        "aligned {mode} ({})",
        if preload { "specalloc" } else { "glibc" }
    );
    common::assert_ok(&what, &o);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    println!("{what}: {out}");
    assert!(out.starts_with(&format!("ok {mode}")), "{out}");
    move |key: &str| {
        out.split_whitespace()
            .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
            .unwrap_or_else(|| panic!("no {key} in {out}"))
            .parse()
            .unwrap()
    }
}

/// The compiled program, built once for all the tests of this file (they run in parallel:
/// each compiling it into the same path would run one's executable while another rewrites it).
fn program() -> Option<std::path::PathBuf> {
    static EXE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    EXE.get_or_init(|| {
        let dir = common::scratch("aligned");
        common::compile("cc", "aligned.c", &dir, &[])
    })
    .clone()
}

#[test]
fn many_small_blocks_at_16_kib() {
    let Some(exe) = program() else { return };
    let glibc = run(&exe, "many", false);
    let ours = run(&exe, "many", true);
    // 70,000 blocks of 64 B at 16 KiB: within twice glibc's address space (about 1.1 GB),
    // and every malloc and pthread_create after them succeeded (the program checks).
    assert!(
        ours("vmsize_kib") <= 2 * glibc("vmsize_kib"),
        "VmSize {} KiB against glibc's {} KiB",
        ours("vmsize_kib"),
        glibc("vmsize_kib")
    );
    assert_eq!(ours("failed_mallocs"), 0);
    assert_eq!(ours("pthread_create"), 0);
}

#[test]
fn every_alignment_at_every_size() {
    let Some(exe) = program() else { return };
    let glibc = run(&exe, "sweep", false);
    let ours = run(&exe, "sweep", true);
    assert!(
        ours("peak_vmsize_kib") <= 2 * glibc("peak_vmsize_kib"),
        "peak VmSize {} KiB against glibc's {} KiB",
        ours("peak_vmsize_kib"),
        glibc("peak_vmsize_kib")
    );
}

#[test]
fn at_the_map_count_limit() {
    let Some(exe) = program() else { return };
    let ours = run(&exe, "maps", true);
    // 48 requests, each served or refused with ENOMEM (the program checks which); what was
    // not handed out is not left mapped: the growth is the blocks' own, plus a chunk or two.
    assert_eq!(ours("got") + ours("refused"), 48);
    assert!(
        ours("grown_kib") <= ours("handed_kib") + 16 * 1024,
        "VmSize grew by {} KiB for {} KiB handed out",
        ours("grown_kib"),
        ours("handed_kib")
    );
}
