//! What the allocator sets up for itself, against programs that use up what it needs or
//! unload it (run with `libspecalloc.so` preloaded, or loaded with `dlopen`; each on glibc too,
//! as the control). Skipped, with a line, without `cc`.
//!
//! - `tests/c/first_malloc.c atfork`: 60 `pthread_atfork` registrations before the first
//!   `malloc` (glibc grows its array of handlers with `malloc`, from inside the registration);
//! - `tests/c/first_malloc.c keys`: every pthread key taken before the first `malloc`;
//! - `tests/c/private_dl.c`: `libspecalloc.so` loaded with `dlopen` as a private allocator
//!   (its `malloc` and `free` found with `dlsym`), used by 4 threads, closed, and the threads
//!   exit.

mod common;

use std::process::Command;

/// Runs `first_malloc MODE` on glibc and under specalloc, whose processes must report
/// allocations (`SPECALLOC_STATS_AT_EXIT`).
fn first_malloc(mode: &str) {
    let dir = common::scratch(&format!("first-malloc-{mode}"));
    let Some(exe) = common::compile("cc", "first_malloc.c", &dir, &[]) else {
        return;
    };
    let glibc = Command::new(&exe)
        .arg(mode)
        .output()
        .expect("run first_malloc");
    common::assert_ok(&format!("first_malloc {mode} on glibc"), &glibc);
    let report = dir.join("stats-at-exit.txt");
    let mut cmd = Command::new(&exe);
    cmd.arg(mode).env("SPECALLOC_STATS_AT_EXIT", &report);
    let ours = common::preloaded(cmd);
    common::assert_ok(&format!("first_malloc {mode} under specalloc"), &ours);
    assert_eq!(
        String::from_utf8_lossy(&ours.stdout),
        format!("first malloc ok {mode}\n")
    );
    let lines = std::fs::read_to_string(&report).unwrap_or_default();
    assert!(
        lines.lines().count() == 1 && !lines.contains(" allocs=0 "),
        "the program reports allocations from specalloc (its child leaves with _exit):\n{lines}"
    );
}

#[test]
fn first_malloc_after_many_fork_handlers() {
    first_malloc("atfork");
}

#[test]
fn first_malloc_with_no_pthread_key_left() {
    first_malloc("keys");
}

#[test]
fn private_allocator_closed_while_threads_run() {
    let dir = common::scratch("private-dl");
    let Some(exe) = common::compile("cc", "private_dl.c", &dir, &[]) else {
        return;
    };
    let o = Command::new(&exe)
        .arg(common::lib())
        .output()
        .expect("run private_dl");
    common::assert_ok("private_dl", &o);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "private allocator ok\n");
}
