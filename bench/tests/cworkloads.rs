//! The C workloads of the C-workload and scaling tables (`bench/c/`), not timed: each compiles
//! with `-O2 -Wall -Wextra` without a warning, the multi-threaded ones print the same line
//! under `LD_PRELOAD=libspecalloc.so` as on glibc's malloc at a small scale and at several
//! thread counts, a bad scale or thread count stops them with their usage, and the scaling
//! binary runs one tiny configuration end to end.
//!
//! `libspecalloc.so` is built as the C API's tests build it (`cargo build --release -p
//! specalloc-capi` into `target/capi-build`, so that the two share it), or taken from
//! `SPECALLOC_SO`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use specalloc_bench::preload::{self, Program};
use specalloc_bench::workers::workspace_root as root;

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("cworkloads")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Whether `cc` is there to build the workloads; prints a line saying `what` is skipped if not.
fn have_cc(what: &str) -> bool {
    let found = preload::have("cc");
    if !found {
        println!("SKIPPED {what}: `cc` is not installed");
    }
    found
}

fn lib() -> PathBuf {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| match std::env::var_os("SPECALLOC_SO") {
        Some(p) => PathBuf::from(p),
        None => preload::build_specalloc(
            &root(),
            &Path::new(env!("CARGO_TARGET_TMPDIR")).join("../capi-build"),
        )
        .unwrap(),
    })
    .clone()
}

/// `prog` run through `env`, which execs it (one process, one line of counters), with
/// specalloc's counters appended to `counters` at its exit (`SPECALLOC_STATS_AT_EXIT`).
fn counting(prog: &Program, counters: &Path) -> Program {
    let mut counted = prog.clone();
    counted.argv.splice(
        0..0,
        [
            "env".to_string(),
            format!("SPECALLOC_STATS_AT_EXIT={}", counters.display()),
        ],
    );
    counted
}

#[test]
fn every_workload_compiles_without_warnings() {
    if !have_cc("compiling the C workloads") {
        return;
    }
    let dir = scratch("compile");
    let mut names: Vec<String> = std::fs::read_dir(root().join("bench/c"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "c"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert!(names.len() >= 10, "{names:?}");
    // larsonspawn.c again, as C++, and with its workers running to the end.
    names.push("larsonsized".into());
    names.push("larsonpool".into());
    for name in &names {
        let (exe, warnings) = preload::compile(&root(), name, &dir).unwrap();
        assert!(exe.is_file(), "{name}");
        assert_eq!(warnings, "", "{name}.c: warnings");
    }
}

/// The multi-threaded workloads and the large-block one at a small scale: the same output on
/// specalloc as on glibc, at 1, 2 and 3 threads (3: prodcons's odd thread out), and a report
/// line that says how many threads ran. Each process appends its counters at exit
/// (`SPECALLOC_STATS_AT_EXIT`), which shows that it ran on specalloc.
#[test]
fn workloads_agree_under_specalloc_and_glibc() {
    if !have_cc("the C workloads under specalloc") {
        return;
    }
    let dir = scratch("agree");
    let counters = dir.join("stats-at-exit.txt");
    let so = lib();
    let mut runs = 0;
    for (name, scale) in [
        ("larson", "0.01"),
        ("larsonspawn", "0.01"),
        ("larsonsized", "0.01"),
        ("larsonpool", "0.01"),
        ("prodcons", "0.01"),
        ("medium", "0.01"),
        ("xmalloc", "0.01"),
        ("mallocthread", "0.005"),
        ("falseshare", "0.01"),
        ("largeblocks", "0.01"),
    ] {
        let exe = preload::compiled(&root(), name, &dir);
        let counts: &[&str] = if name == "largeblocks" {
            &["1"]
        } else {
            &["1", "2", "3"]
        };
        for &threads in counts {
            let prog = Program::c(name, &exe, &[scale.into(), threads.into()], &dir);
            let (_, glibc) = preload::run_one(&prog, None).unwrap();
            let (_, spec) = preload::run_one(&counting(&prog, &counters), Some(&so)).unwrap();
            runs += 1;
            let text = String::from_utf8_lossy(&glibc);
            let plural = if threads == "1" { "" } else { "s" };
            assert!(
                text.starts_with(&format!("{name}: {threads} thread{plural}, ")),
                "{name} at {threads}: {text}"
            );
            assert!(text.contains(", checksum "), "{text}");
            assert_eq!(
                text,
                String::from_utf8_lossy(&spec),
                "{name} at {threads} threads: specalloc's output differs from glibc's"
            );
        }
    }
    let reports = std::fs::read_to_string(&counters).unwrap_or_default();
    let allocating = reports
        .lines()
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("allocs=")))
        .filter(|n| n.parse::<u64>().unwrap() > 0)
        .count();
    assert_eq!(
        allocating, runs,
        "not every run allocated from specalloc:\n{reports}"
    );
}

/// The heaps made in a run of `threadchain` at scale 0.5 (2,000 threads) with `blocks` blocks
/// per thread, whose output must be glibc's.
fn chain_heaps(blocks: u32) -> usize {
    let dir = scratch(&format!("threadchain-{blocks}"));
    let counters = dir.join("stats-at-exit.txt");
    let exe = preload::compiled(&root(), "threadchain", &dir);
    let prog = Program::c(
        "threadchain",
        &exe,
        &["0.5".into(), blocks.to_string()],
        &dir,
    );
    let (_, glibc) = preload::run_one(&prog, None).unwrap();
    let text = String::from_utf8_lossy(&glibc).into_owned();
    assert!(
        text.starts_with("threadchain: 2000 threads live at once, checksum "),
        "{text}"
    );
    let (_, spec) = preload::run_one(&counting(&prog, &counters), Some(&lib())).unwrap();
    assert_eq!(text, String::from_utf8_lossy(&spec));
    let report = std::fs::read_to_string(&counters).unwrap();
    report
        .split_whitespace()
        .find_map(|w| w.strip_prefix("heaps="))
        .unwrap_or_else(|| panic!("no heap count in {report}"))
        .parse()
        .unwrap()
}

/// Thousands of threads alive at once, each with blocks of its own (`threadchain`): the same
/// output as on glibc. Threads that allocate 4 blocks each have no heap of their own (the
/// shared heap serves a thread's first allocations while many threads allocate); threads that
/// allocate 24 each (more than a thread makes without a heap) each had a heap of their own (a
/// thread that took over another live thread's heap would share it, and the heaps made would
/// fall short).
#[test]
fn a_chain_of_live_threads_agrees_and_each_has_a_heap_when_it_needs_one() {
    if !have_cc("the chain of live threads") {
        return;
    }
    let few = chain_heaps(4);
    // The first 8 threads to allocate, before many did, and a few that found the shared heap's
    // lock taken.
    assert!(
        few < 200,
        "{few} heaps for 2000 live threads with 4 blocks each"
    );
    let many = chain_heaps(24);
    // The chain's 2000 threads and the main thread.
    assert!(
        many >= 2001,
        "{many} heaps for 2000 live threads with 24 blocks each"
    );
}

/// A scale or thread count that makes no sense stops the workload with its usage (it never
/// falls back to the full work).
#[test]
fn workloads_reject_bad_arguments() {
    if !have_cc("the C workloads' arguments") {
        return;
    }
    let exe = preload::compiled(&root(), "xmalloc", &scratch("arguments"));
    for (args, why) in [
        (["0", "1"], "SCALE must be a positive number"),
        (["x", "1"], "SCALE must be a positive number"),
        (["1", "0"], "THREADS must be a whole number from 1 to 1024"),
        (
            ["1", "2000"],
            "THREADS must be a whole number from 1 to 1024",
        ),
    ] {
        let o = Command::new(&exe).args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("[SCALE [THREADS]]") && err.contains(why),
            "{args:?}: {err}"
        );
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// `scaling --quick` on one program at two thread counts and a hundredth of the work, with the
/// library above and snmalloc left out (building its shim takes minutes): the table and the
/// chart are written, and they name what ran.
#[test]
fn scaling_runs_one_tiny_configuration() {
    if !have_cc("the scaling table") {
        return;
    }
    let out = scratch("scaling");
    let o = Command::new(env!("CARGO_BIN_EXE_scaling"))
        .args([
            "--quick",
            "--rounds",
            "1",
            "--threads",
            "1,3",
            "--programs",
            "xmalloc",
        ])
        .args(["--scale", "0.01", "--out"])
        .arg(&out)
        .env("CTABLE_SPECALLOC", lib())
        .env("CTABLE_SNMALLOC", out.join("no-snmalloc.so"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let md = std::fs::read_to_string(out.join("results.md")).unwrap();
    let cores = std::thread::available_parallelism().unwrap().get();
    for text in [
        "NOT A MEASUREMENT",
        &format!("This machine has {cores} cores"),
        "### xmalloc",
        "million allocations per second",
        "| specalloc A/A |",
        "| A/A control ",
        "| geometric mean ",
    ] {
        assert!(md.contains(text), "{text} missing from:\n{md}");
    }
    let oversubscribed = if cores < 3 { "3*" } else { "3" };
    assert!(
        md.contains(&format!(" {oversubscribed} |")),
        "3 threads on {cores} cores:\n{md}"
    );
    assert!(stdout.contains("snmalloc: left out"), "{stdout}");
    let svg = std::fs::read_to_string(out.join("scaling.svg")).unwrap();
    assert!(
        svg.contains("xmalloc") && svg.contains("specalloc"),
        "{svg}"
    );
}
