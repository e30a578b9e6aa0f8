//! `fork` with `pthread_atfork` handlers that allocate and free (`tests/c/atfork.c`, run with
//! `libspecalloc.so` preloaded): handlers registered before the allocator's own (by another
//! preloaded library, whose constructor runs before the allocator's), and after it (in `main`
//! before the first `malloc`, from the program's constructor, from a thread after the first
//! allocation), with threads allocating and freeing while the program forks 20 times. Every
//! `fork` must return in both processes: a prepare handler that waited on a lock the
//! allocator's prepare handler holds would hang the parent, a child handler the child. Each
//! mode runs on glibc too, as the control. Skipped, with a line, without `cc`.

mod common;

use std::process::Command;

#[test]
fn fork_handlers_may_allocate() {
    let dir = common::scratch("atfork");
    let Some(exe) = common::compile("cc", "atfork.c", &dir, &["-O1"]) else {
        return;
    };
    let Some(lib) = common::compile("cc", "atfork_lib.c", &dir, &["-shared", "-fPIC"]) else {
        return;
    };
    for mode in ["prepare", "child", "before", "ctor", "library", "thread"] {
        let run = |preload: Option<String>| {
            let mut cmd = Command::new(&exe);
            cmd.arg(mode);
            if mode == "ctor" {
                cmd.env("ATFORK_CTOR", "1");
            }
            if let Some(p) = preload {
                cmd.env("LD_PRELOAD", p);
            }
            cmd.output().expect("run atfork")
        };
        let extra = |base: String| {
            if mode == "library" {
                format!("{base}:{}", lib.display())
            } else {
                base
            }
        };
        let glibc = run((mode == "library").then(|| lib.display().to_string()));
        common::assert_ok(&format!("atfork {mode} on glibc"), &glibc);
        let ours = run(Some(extra(common::lib().display().to_string())));
        common::assert_ok(&format!("atfork {mode} under specalloc"), &ours);
        let out = String::from_utf8_lossy(&ours.stdout);
        assert_eq!(out, format!("fork ok {mode}\n"));
    }
}

/// A `fork` made by a `fork` handler that runs while the allocator's handlers hold its locks
/// (`tests/c/nested_fork.c`: the handler is registered by a library whose constructor runs
/// before `libspecalloc.so`'s), in a prepare, a parent and a child handler, with and without
/// a second thread allocating: every fork returns in every process, and the nested child
/// allocates in every size range, as on glibc.
#[test]
fn a_fork_handler_may_fork() {
    nested_forks("nested-fork", "", &[]);
}

/// As [`a_fork_handler_may_fork`], and the nested child starts a thread that allocates (and
/// waits for it), as it can on glibc: in a prepare, a parent and a child handler, with and
/// without a second thread allocating in the parent.
#[test]
fn a_nested_fork_child_may_start_threads() {
    nested_forks(
        "nested-fork-thread",
        ", a thread in the nested child",
        &[("NESTED_FORK_THREAD", "1")],
    );
}

/// Runs `tests/c/nested_fork.c` (built in the scratch directory `scratch`) on glibc and
/// preloaded, in each handler mode, with and without a second thread, with `env` set; each
/// must exit 0 and print its line. `what` ends the failure messages.
fn nested_forks(scratch: &str, what: &str, env: &[(&str, &str)]) {
    let dir = common::scratch(scratch);
    let Some(lib) = common::compile("cc", "nested_fork_lib.c", &dir, &["-shared", "-fPIC"]) else {
        return;
    };
    let lib = lib.display().to_string();
    let Some(exe) = common::compile("cc", "nested_fork.c", &dir, &[&lib]) else {
        return;
    };
    for mode in ["prepare", "parent", "child"] {
        for thread in [&[][..], &["thread"][..]] {
            let what = format!("nested fork {mode} {thread:?}{what}");
            let mut cmd = Command::new(&exe);
            cmd.args(thread)
                .env("NESTED_FORK", mode)
                .envs(env.iter().copied());
            let glibc = cmd.output().expect("run nested_fork");
            common::assert_ok(&format!("{what} on glibc"), &glibc);
            let ours = common::preloaded(cmd);
            common::assert_ok(&format!("{what} under specalloc"), &ours);
            let suffix = if thread.is_empty() { "" } else { " thread" };
            assert_eq!(
                String::from_utf8_lossy(&ours.stdout),
                format!("nested fork ok {mode}{suffix}\n")
            );
        }
    }
}

/// A fork whose handler, registered before the allocator's, forks again, and the nested child
/// returns from the handler through the rest of the outer fork's handlers
/// (`tests/c/nested_fork_return.c`; from a prepare handler, the nested child makes the outer
/// fork itself), for a prepare, a parent and a child handler: with the background purge on,
/// each process has one purge thread (in a nested child, the allocator's child handler runs for
/// the nested fork and then its parent or child handler for the outer one), and allocates.
#[test]
fn a_nested_fork_child_has_one_purge_thread() {
    nested_fork_return("nested-fork-return", &[], &[Some("10")]);
}

/// As [`a_nested_fork_child_has_one_purge_thread`], and the nested child starts a thread in the
/// handler that forked it, which allocates and frees (a block of the forking thread's among
/// them), before it returns through the rest of the outer fork's handlers: the thread does not
/// wait for the outer fork's locks, and the outer fork's handlers leave the nested child as
/// the nested fork's left it (one purge thread with the purge on, allocating), as on glibc.
#[test]
fn a_nested_fork_child_may_start_threads_and_return() {
    nested_fork_return(
        "nested-fork-return-thread",
        &[("NESTED_RETURN_THREAD", "1")],
        &[Some("0"), Some("10")],
    );
}

/// Runs `tests/c/nested_fork_return.c` with `env`, in each handler kind and with each purge
/// interval (`SPECALLOC_BACKGROUND_PURGE_MS`, `Some("0")`: off; `None`: the default, whose
/// trimmer starts with a second thread and outlives it by up to 3 s, which the thread counts
/// would see), on glibc and under specalloc.
fn nested_fork_return(scratch: &str, env: &[(&str, &str)], purges: &[Option<&str>]) {
    let dir = common::scratch(scratch);
    let Some(lib) = common::compile(
        "cc",
        "nested_fork_return_lib.c",
        &dir,
        &["-shared", "-fPIC"],
    ) else {
        return;
    };
    let lib = lib.display().to_string();
    let Some(exe) = common::compile("cc", "nested_fork_return.c", &dir, &[&lib]) else {
        return;
    };
    for mode in ["prepare", "parent", "child"] {
        for purge in purges {
            let what = format!("nested fork return {mode} {env:?}, purge {purge:?}");
            let mut cmd = Command::new(&exe);
            cmd.env("NESTED_RETURN_MODE", mode)
                .envs(env.iter().copied());
            let glibc = cmd.output().expect("run nested_fork_return");
            common::assert_ok(&format!("{what} on glibc"), &glibc);
            if let Some(ms) = purge {
                cmd.env("SPECALLOC_BACKGROUND_PURGE_MS", ms);
            }
            let ours = common::preloaded(cmd);
            common::assert_ok(&format!("{what} under specalloc"), &ours);
            assert_eq!(
                String::from_utf8_lossy(&ours.stdout),
                "nested fork return ok\n"
            );
        }
    }
}
