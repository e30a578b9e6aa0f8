//! A successful call leaves `errno` as it was, even when a system call inside it failed first
//! (`tests/c/errno.c`, run with `libspecalloc.so` preloaded): `realloc` whose roomier first try
//! is refused under an address-space limit, and every allocation entry point whose first
//! mapping is refused until the freed huge blocks kept for reuse are given back (a new chunk
//! for small blocks and page runs, a new mapping for a huge block). Skipped, with a line,
//! without `cc`.

mod common;

use std::process::Command;

#[test]
fn successful_calls_keep_errno() {
    let dir = common::scratch("errno");
    let Some(exe) = common::compile("cc", "errno.c", &dir, &[]) else {
        return;
    };
    let o = common::preloaded(Command::new(&exe));
    let out = String::from_utf8_lossy(&o.stdout);
    print!("{out}");
    common::assert_ok("errno.c", &o);
    assert!(
        out.contains("ok every successful call keeps errno"),
        "missing the last line in:\n{out}"
    );
}
