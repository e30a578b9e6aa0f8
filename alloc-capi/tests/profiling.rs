//! The heap profiler under `LD_PRELOAD` (`SPECALLOC_PROF`): a C program's dump at exit, on a
//! signal and in a forked child, one file each, never overwritten; `go tool pprof` names the C
//! functions with the bytes they allocated; and a real program (python3) profiled end to end.
//! Skipped, with a line, without `cc`, `go` or python3.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The dumps under `dir` whose names start with `stem`.
fn dumps(dir: &Path, stem: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(stem) && n.ends_with(".heap.pb.gz")
        })
        .collect();
    v.sort();
    v
}

/// `go tool pprof <args> <file>`'s output, or `None` without `go` (with a line).
fn pprof(args: &[&str], file: &Path) -> Option<String> {
    if !common::have("go", "pprof's reading of the dumps") {
        return None;
    }
    let o = Command::new("go")
        .args(["tool", "pprof"])
        .args(args)
        .arg(file)
        .output()
        .expect("run go tool pprof");
    common::assert_ok("go tool pprof", &o);
    Some(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// The figure in MB that `pprof -top` prints for `func` (its flat column).
fn flat_mb(top: &str, func: &str) -> f64 {
    let line = top
        .lines()
        .find(|l| l.contains(func))
        .unwrap_or_else(|| panic!("{func} not in:\n{top}"));
    let first = line.split_whitespace().next().unwrap();
    let (num, unit) = first.split_at(first.find(|c: char| c.is_ascii_alphabetic()).unwrap());
    let v: f64 = num.parse().unwrap();
    match unit {
        "GB" => v * 1e3,
        "MB" => v,
        "kB" => v / 1e3,
        "B" => v / 1e6,
        u => panic!("unit {u} in {line}"),
    }
}

#[test]
fn a_c_program_at_exit_on_a_signal_and_in_a_child() {
    let dir = common::scratch("profiling");
    let Some(exe) = common::compile("cc", "prof.c", &dir, &[]) else {
        return;
    };
    for old in dumps(&dir, "prof") {
        std::fs::remove_file(old).unwrap();
    }
    let mut cmd = Command::new(&exe);
    cmd.args(["signal", "fork"])
        .env("SPECALLOC_PROF", dir.join("prof"))
        .env("SPECALLOC_PROF_RATE", "65536")
        .env("SPECALLOC_PROF_SIGNAL", "12");
    let o = common::preloaded(cmd);
    common::assert_ok("prof.c under the profiler", &o);
    let files = dumps(&dir, "prof");
    // The parent's signal dump and exit dump, and the child's exit dump (another pid).
    assert_eq!(files.len(), 3, "{files:?}");
    let pids: std::collections::BTreeSet<String> = files
        .iter()
        .map(|f| {
            f.file_name()
                .unwrap()
                .to_string_lossy()
                .split('.')
                .nth(1)
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(pids.len(), 2, "{files:?}");
    // The parent's exit dump: the second of the pid with two files (the child inherits the
    // numbering, so its one file may be number 1 as well).
    let name = |f: &PathBuf| f.file_name().unwrap().to_string_lossy().into_owned();
    let parent = pids
        .iter()
        .find(|pid| {
            files
                .iter()
                .filter(|f| name(f).split('.').nth(1) == Some(pid))
                .count()
                == 2
        })
        .expect("a pid with two dumps");
    let exit = files
        .iter()
        .find(|f| name(f) == format!("prof.{parent}.1.heap.pb.gz"))
        .expect("the parent's second dump");
    let Some(inuse) = pprof(&["-top", "-sample_index=inuse_space"], exit) else {
        return;
    };
    println!("{inuse}");
    let kept = flat_mb(&inuse, "keep_records");
    assert!(
        (kept - 8.0).abs() < 8.0 * 0.3,
        "keep_records holds {kept} MB, not 8"
    );
    let alloc = pprof(&["-top", "-sample_index=alloc_space"], exit).unwrap();
    println!("{alloc}");
    let churned = flat_mb(&alloc, "churn_buffers");
    // Churned twice in the parent (before and after the signal).
    assert!(
        (churned - 163.84).abs() < 163.84 * 0.15,
        "churn_buffers allocated {churned} MB, not 163.84"
    );
    // Source lines, from the program's debug information.
    let list = pprof(&["-list", "keep_records"], exit).unwrap();
    assert!(list.contains("malloc(400)"), "{list}");
}

#[test]
fn dump_requests_during_forks_do_not_hang() {
    let dir = common::scratch("profiling-storm");
    let Some(exe) = common::compile("cc", "prof.c", &dir, &[]) else {
        return;
    };
    for old in dumps(&dir, "storm") {
        std::fs::remove_file(old).unwrap();
    }
    // A small interval: many samples, and dumps that take a while.
    let mut cmd = Command::new("timeout");
    cmd.arg("120")
        .arg(&exe)
        .arg("storm")
        .env("SPECALLOC_PROF", dir.join("storm"))
        .env("SPECALLOC_PROF_RATE", "4096")
        .env("SPECALLOC_PROF_SIGNAL", "12");
    let o = common::preloaded(cmd);
    common::assert_ok("prof.c storm under the profiler (exit 124: it hung)", &o);
    // Every process wrote its exit dump, or (a child forked while its parent wrote one, whose
    // symboliser it cannot use) said it writes none: the parent and 20 children at least.
    let files = dumps(&dir, "storm");
    let stderr = String::from_utf8_lossy(&o.stderr);
    let declined = stderr.matches("it writes no profile").count();
    assert!(
        files.len() + declined >= 21,
        "{} dumps, {declined} declined:\n{stderr}",
        files.len()
    );
    for f in &files {
        let b = std::fs::read(f).unwrap();
        assert_eq!(&b[..2], &[0x1f, 0x8b], "{f:?} is gzip");
    }
}

#[test]
fn unwinding_while_another_thread_loads_libraries_does_not_hang() {
    let dir = common::scratch("profiling-dlopen");
    let Some(exe) = common::compile("cc", "prof.c", &dir, &[]) else {
        return;
    };
    for old in dumps(&dir, "dl") {
        std::fs::remove_file(old).unwrap();
    }
    // Every 4 KiB: the main thread walks its stack hundreds of thousands of times while the
    // loader's lists change under `dlopen` and `dlclose` (and their own allocations).
    let mut cmd = Command::new("timeout");
    cmd.arg("120")
        .arg(&exe)
        .arg("dlopen")
        .env("SPECALLOC_PROF", dir.join("dl"))
        .env("SPECALLOC_PROF_RATE", "4096");
    let o = common::preloaded(cmd);
    common::assert_ok("prof.c dlopen under the profiler (exit 124: it hung)", &o);
    // The program's dump (and `timeout`'s own, which the preload reaches too).
    assert!(!dumps(&dir, "dl").is_empty());
}

#[test]
fn python_end_to_end() {
    if !common::have("python3", "the end-to-end profile of a real program") {
        return;
    }
    let dir = common::scratch("profiling-python");
    for old in dumps(&dir, "py") {
        std::fs::remove_file(old).unwrap();
    }
    // The interpreter itself, not a wrapper script (whose every process would write a dump).
    let o = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(o.stdout).unwrap().trim().to_string();
    let mut cmd = Command::new(&python);
    cmd.args([
        "-c",
        "x = [bytes(1000) for _ in range(20000)]; print(len(x))",
    ])
    .env("SPECALLOC_PROF", dir.join("py"));
    let o = common::preloaded(cmd);
    common::assert_ok("python3 under the profiler", &o);
    let files = dumps(&dir, "py");
    assert_eq!(files.len(), 1, "{files:?}");
    let Some(top) = pprof(&["-top", "-sample_index=alloc_space"], &files[0]) else {
        return;
    };
    println!("{top}");
    // 20 MB of bytes objects, and python's own allocations: pprof's total is at least that,
    // and the interpreter's allocating functions are named.
    let total = top
        .lines()
        .find_map(|l| l.split("Total samples = ").nth(1))
        .expect(&top)
        .trim();
    let (num, unit) = total.split_at(total.find(|c: char| c.is_ascii_alphabetic()).unwrap());
    let mb = num.parse::<f64>().unwrap()
        * match unit {
            "GB" => 1e3,
            "MB" => 1.0,
            "kB" => 1e-3,
            u => panic!("unit {u}"),
        };
    assert!(mb > 15.0, "{mb} MB in all");
    assert!(
        top.contains("_PyObject_"),
        "the interpreter's functions:\n{top}"
    );
}
