//! `fork` with `pthread_atfork` handlers that allocate and free (`tests/c/atfork.c`, run with
//! `libspecalloc.so` preloaded): handlers registered before the allocator's own (before the
//! first `malloc`, and from a constructor), by another preloaded library, and from a thread
//! after the first allocation, with threads allocating and freeing while the program forks 20
//! times. Every `fork` must return in both processes: a prepare handler that waited on a lock
//! the allocator's prepare handler holds would hang the parent, a child handler the child.
//! Each mode runs on glibc too, as the control. Skipped, with a line, without `cc`.

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
