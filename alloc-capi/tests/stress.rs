//! Under `LD_PRELOAD`: a C stress program (`tests/c/stress.c`: threads churning with
//! cross-thread frees, short threads exiting mid-stream, `fork` and `fork`+`exec` under load,
//! counters back to the baseline at the end) and `dlopen`/`dlclose` of a library that
//! allocates (`tests/c/dlopen.c`, `tests/c/dlib.c`). Skipped, with a line, without `cc`.

mod common;

use std::process::Command;

#[test]
fn c_stress() {
    let dir = common::scratch("stress");
    let Some(exe) = common::compile("cc", "stress.c", &dir, &["-O2"]) else {
        return;
    };
    let o = common::preloaded(Command::new(&exe));
    common::assert_ok("stress.c", &o);
    let out = String::from_utf8_lossy(&o.stdout);
    print!("{out}{}", String::from_utf8_lossy(&o.stderr));
    for line in [
        "forks under load, children and exec'd images exited 0",
        "blocks drained",
        "ok back to the baseline",
    ] {
        assert!(out.contains(line), "missing `{line}` in:\n{out}");
    }
}

#[test]
fn dlopen_dlclose() {
    let dir = common::scratch("dlopen");
    let Some(lib) = common::compile("cc", "dlib.c", &dir, &["-shared", "-fPIC"]) else {
        return;
    };
    let Some(exe) = common::compile("cc", "dlopen.c", &dir, &[]) else {
        return;
    };
    let mut cmd = Command::new(&exe);
    cmd.arg(&lib);
    let o = common::preloaded(cmd);
    common::assert_ok("dlopen.c", &o);
    let out = String::from_utf8_lossy(&o.stdout);
    print!("{out}{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("ok 200 dlopen/dlclose rounds"), "{out}");
}
