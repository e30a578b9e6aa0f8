//! Every exported function's contract (`tests/c/contract.c`, compiled here with `cc`, run with
//! `libspecalloc.so` preloaded), and C++'s `new`/`delete`, which the library defines
//! (`tests/c/newdelete.cpp`). Skipped, with a line, where no compiler is installed.

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
        "ok __libc_valloc __libc_pvalloc cfree free_sized free_aligned_sized",
        "ok free keeps errno",
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
        "ok operators are specalloc's",
        "ok new delete",
        "ok new[] delete[]",
        "ok sized delete",
        "ok aligned new delete",
        "ok aligned sized new[] delete[]",
        "ok nothrow new",
        "ok containers",
        "ok bad_alloc",
        "ok new-handler and failures",
        "ok bad alignment",
    ] {
        assert!(out.contains(form), "missing `{form}` in:\n{out}");
    }
}

/// The allocation entry points `libspecalloc.so` must define: every one of these that the
/// system's C library exports (at any version) is exported by the library too, so that no
/// block can come from glibc's allocator under the preload and reach specalloc's `free`, or the
/// other way round.
const ENTRY_POINTS: &[&str] = &[
    "malloc",
    "free",
    "cfree",
    "free_sized",
    "free_aligned_sized",
    "calloc",
    "realloc",
    "reallocarray",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "malloc_usable_size",
    "__libc_malloc",
    "__libc_free",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_memalign",
    "__libc_valloc",
    "__libc_pvalloc",
];

/// The defined dynamic symbols of `lib` (`nm -D --defined-only`), without their versions.
fn dynamic_symbols(lib: &std::path::Path) -> Vec<String> {
    let o = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib)
        .output()
        .expect("run nm");
    assert!(o.status.success(), "nm {} failed", lib.display());
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().nth(2))
        .map(|s| s.split('@').next().unwrap_or(s).to_string())
        .collect()
}

/// The C library this test runs on (from its own memory map).
fn libc_path() -> std::path::PathBuf {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
        .map(std::path::PathBuf::from)
        .expect("libc in the memory map")
}

#[test]
fn exports_every_glibc_entry_point() {
    if !common::have("nm", "the export check") {
        return;
    }
    let libc = dynamic_symbols(&libc_path());
    let ours = dynamic_symbols(&common::lib());
    // Every name of the family the C library has, specalloc has: the list covers what glibc
    // exports (checked here: a name of the family glibc gains must be added to the list, or to
    // those that allocate no heap memory).
    const NOT_HEAP: &[&str] = &["__sched_cpualloc", "inet6_option_alloc", "pkey_alloc"];
    let family = |s: &str| {
        let base = s.strip_prefix("__libc_").unwrap_or(s);
        let name = base.ends_with("alloc") || base.ends_with("memalign");
        let free = matches!(base, "free" | "cfree" | "free_sized" | "free_aligned_sized");
        (name || free) && !NOT_HEAP.contains(&s)
    };
    for s in libc.iter().filter(|s| family(s)) {
        assert!(
            ENTRY_POINTS.contains(&s.as_str()),
            "glibc exports `{s}`, which the list of entry points lacks"
        );
    }
    let missing: Vec<_> = ENTRY_POINTS
        .iter()
        .filter(|n| libc.iter().any(|s| s == *n) && !ours.iter().any(|s| s == *n))
        .collect();
    assert!(
        missing.is_empty(),
        "libspecalloc.so does not export {missing:?}"
    );
    // And the names glibc gained after this system's version, exported all the same.
    for n in ["free_sized", "free_aligned_sized", "cfree"] {
        assert!(ours.iter().any(|s| s == n), "`{n}` is not exported");
    }
}

/// `libspecalloc.a` linked into a C++ program (`tests/c/newdelete_linked.cpp`): with libstdc++
/// shared, `new` and `delete` are specalloc's and a failed `new` throws `std::bad_alloc`; with
/// libstdc++ linked in too (`-static-libstdc++`), the same, but a failed `new` has no C++
/// runtime's operator to hand the request to, and stops the program with a message.
#[test]
fn cpp_new_delete_with_the_static_library() {
    let archive = common::lib().with_file_name("libspecalloc.a");
    if !archive.exists() {
        println!("SKIPPED: no {} beside the library", archive.display());
        return;
    }
    let archive = archive.to_str().expect("a UTF-8 path").to_string();
    for (name, extra) in [("shared", None), ("static", Some("-static-libstdc++"))] {
        let dir = common::scratch(&format!("newdelete-linked-{name}"));
        let mut flags = vec!["-std=c++17", archive.as_str()];
        flags.extend(extra);
        let Some(exe) = common::compile("c++", "newdelete_linked.cpp", &dir, &flags) else {
            return;
        };
        if name == "shared" {
            let o = Command::new(&exe).output().expect("run the program");
            let out = String::from_utf8_lossy(&o.stdout);
            common::assert_ok("newdelete_linked.cpp", &o);
            assert!(
                out.contains("ok new delete") && out.contains("ok bad_alloc"),
                "{out}"
            );
        } else {
            // Everything but the failure works as with libstdc++ shared.
            let o = Command::new(&exe)
                .arg("fail")
                .output()
                .expect("run the program");
            let out = String::from_utf8_lossy(&o.stdout);
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(out.contains("ok new delete"), "{out}\n{err}");
            assert!(!out.contains("returned"), "{out}");
            assert!(!o.status.success(), "{:?}", o.status);
            assert!(err.contains("no C++ runtime"), "{err}");
        }
    }
}
