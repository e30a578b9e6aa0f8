//! `libspecalloc.so` reads its thread-locals with the initial-exec TLS model: no function of the
//! allocator calls `__tls_get_addr` (the general-dynamic model's call, which stable Rust's
//! `thread_local!` makes in a shared library), as `objdump -d` shows; the calls left are std's
//! own (panics, thread-local destructors, captured output), and the library is marked
//! `STATIC_TLS`. Skipped, with a line, without `objdump` and `readelf`.

mod common;

use std::process::Command;

#[test]
fn no_allocator_function_calls_tls_get_addr() {
    if !common::have("objdump", "the TLS-model check") || !common::have("readelf", "the TLS check")
    {
        return;
    }
    let lib = common::lib();
    let o = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", "-C"])
        .arg(&lib)
        .output()
        .expect("run objdump");
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    // The functions (as `objdump` heads them: `addr <name>:`) with a call of `__tls_get_addr`.
    let mut function = "";
    let mut callers: Vec<&str> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_suffix(">:").and_then(|l| l.split_once(" <")) {
            function = name.1;
        } else if line.contains("call") && line.contains("__tls_get_addr") {
            callers.push(function);
        }
    }
    // The entry points themselves are there and were read (under their own name, or another
    // one at the same address: the linker folds identical functions, `malloc` and
    // `__libc_malloc`).
    let nm = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("run nm");
    let symbols = String::from_utf8_lossy(&nm.stdout);
    for f in ["malloc", "free", "calloc", "realloc", "posix_memalign"] {
        let addr = symbols
            .lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                let (a, _, name) = (w.next()?, w.next()?, w.next()?);
                (name == f).then(|| a.to_string())
            })
            .unwrap_or_else(|| panic!("`{f}` is not exported"));
        assert!(
            text.contains(&format!("{addr} <")),
            "no function at `{f}`'s address {addr} in the disassembly"
        );
    }
    let ours: Vec<_> = callers
        .iter()
        .filter(|f| !f.starts_with("std::") && !f.starts_with("<std::"))
        .collect();
    assert!(
        ours.is_empty(),
        "functions other than std's call __tls_get_addr: {ours:?}"
    );
    let dynamic = Command::new("readelf")
        .arg("-d")
        .arg(&lib)
        .output()
        .expect("run readelf");
    assert!(
        String::from_utf8_lossy(&dynamic.stdout).contains("STATIC_TLS"),
        "the library is not marked STATIC_TLS"
    );
}
