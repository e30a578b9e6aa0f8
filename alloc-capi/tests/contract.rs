//! Every exported function's contract (`tests/c/contract.c`, compiled here with `cc`, run with
//! `libspecalloc.so` preloaded), and C++'s `new`/`delete` reaching specalloc through
//! libstdc++ (`tests/c/newdelete.cpp`). Skipped, with a line, where no compiler is installed.

mod common;

use std::process::Command;

#[test]
fn c_contract() {
    let dir = common::scratch("contract");
    let Some(exe) = common::compile("cc", "contract.c", &dir, &[]) else {
        return;
    };
    let o = common::preloaded(Command::new(&exe));
    common::assert_ok("contract.c", &o);
    let out = String::from_utf8_lossy(&o.stdout);
    print!("{out}");
    for group in [
        "ok malloc free malloc_usable_size",
        "ok calloc",
        "ok realloc",
        "ok reallocarray",
        "ok posix_memalign aligned_alloc memalign valloc pvalloc",
        "ok __libc_malloc",
        "ok first operations of a thread",
        "ok specalloc_stats specalloc_collect",
    ] {
        assert!(out.contains(group), "missing `{group}` in:\n{out}");
    }
    // specalloc_stats_print wrote the table to stderr.
    assert!(String::from_utf8_lossy(&o.stderr).contains("heaps made"));
}

#[test]
fn cpp_new_delete() {
    let dir = common::scratch("newdelete");
    // -O0: at -O1 GCC elides a `new` whose `delete` it sees, and nothing would be counted.
    let Some(exe) = common::compile("c++", "newdelete.cpp", &dir, &["-std=c++17", "-O0"]) else {
        return;
    };
    let o = common::preloaded(Command::new(&exe));
    common::assert_ok("newdelete.cpp", &o);
    let out = String::from_utf8_lossy(&o.stdout);
    print!("{out}");
    for form in [
        "ok new delete",
        "ok new[] delete[]",
        "ok sized delete",
        "ok aligned new delete",
        "ok aligned sized new[] delete[]",
        "ok nothrow new",
        "ok containers",
        "ok bad_alloc",
    ] {
        assert!(out.contains(form), "missing `{form}` in:\n{out}");
    }
}
