//! What the allocator sets up for itself, against programs that use up what it needs or
//! unload it (run with `libspecalloc.so` preloaded, or loaded with `dlopen`; each on glibc too,
//! as the control). Skipped, with a line, without `cc`.
//!
//! - `tests/c/first_malloc.c atfork`: 60 `pthread_atfork` registrations before the first
//!   `malloc` (glibc grows its array of handlers with `malloc`, from inside the registration);
//!   the same after a library whose constructor runs before the allocator's registered 60
//!   (`tests/c/handlers_lib.c`: the first `malloc` is made from inside its registration);
//! - `tests/c/first_malloc.c keys`: every pthread key taken before the first `malloc`, by
//!   `main`, or by a library whose constructor runs before the allocator's
//!   (`tests/c/keys_lib.c`);
//! - `tests/c/private_dl.c`: `libspecalloc.so` loaded with `dlopen` as a private allocator
//!   (its `malloc` and `free` found with `dlsym`), used by 4 threads, closed, and the threads
//!   exit.

mod common;

use std::process::Command;

/// Runs `first_malloc MODE` on glibc and under specalloc (with `also`, a library of
/// `tests/c/` preloaded after it), whose processes must report allocations
/// (`SPECALLOC_STATS_AT_EXIT`).
fn first_malloc(mode: &str, also: Option<&str>) {
    let lib_name = also.map_or(String::new(), |src| {
        format!("-{}", src.trim_end_matches(".c"))
    });
    let dir = common::scratch(&format!("first-malloc-{mode}{lib_name}"));
    let Some(exe) = common::compile("cc", "first_malloc.c", &dir, &[]) else {
        return;
    };
    let also = match also {
        Some(src) => match common::compile("cc", src, &dir, &["-shared", "-fPIC"]) {
            Some(lib) => Some(lib.display().to_string()),
            None => return,
        },
        None => None,
    };
    let mut glibc = Command::new(&exe);
    glibc.arg(mode);
    if let Some(lib) = &also {
        glibc.env("LD_PRELOAD", lib);
    }
    let glibc = glibc.output().expect("run first_malloc");
    common::assert_ok(&format!("first_malloc {mode} on glibc"), &glibc);
    let report = dir.join("stats-at-exit.txt");
    let mut preload = common::lib().display().to_string();
    if let Some(lib) = &also {
        preload = format!("{preload}:{lib}");
    }
    let ours = Command::new(&exe)
        .arg(mode)
        .env("SPECALLOC_STATS_AT_EXIT", &report)
        .env("LD_PRELOAD", preload)
        .output()
        .expect("run first_malloc");
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
    first_malloc("atfork", None);
}

/// The first malloc made from inside `pthread_atfork`, by a library whose constructor runs
/// before the allocator's (`tests/c/handlers_lib.c`): the allocator's own constructor must not
/// run from inside that malloc (it registers fork handlers too).
#[test]
fn first_malloc_inside_a_librarys_fork_handler_registration() {
    first_malloc("atfork", Some("handlers_lib.c"));
}

/// The keys taken by `main` (the allocator took its own when it was loaded), and taken before
/// the allocator was loaded (its threads are served by the shared fallback heap).
#[test]
fn first_malloc_with_no_pthread_key_left() {
    first_malloc("keys", None);
    first_malloc("keys-taken", Some("keys_lib.c"));
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
