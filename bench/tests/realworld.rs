//! The real-workload suite's programs run, and their checksums agree under
//! specalloc and the system allocator, at a tiny scale: each program runs
//! in this process (no `#[global_allocator]` here: the system allocator)
//! and in the suite's worker built with specalloc as its global allocator
//! (the binary cargo builds for this package's tests). With `--features
//! annotated` the worker's annotated variants (`--annotated`: the same source
//! under `#[specialize]`) are checked too; without it the library's unit test
//! checks them in process.

use std::process::Command;

use specalloc_bench::realworld::report::RunLine;
use specalloc_bench::realworld::{ANNOTATED, PROGRAMS};

#[test]
fn checksums_agree_under_specalloc_and_system() {
    let worker = env!("CARGO_BIN_EXE_realworld_worker");
    let describe = Command::new(worker).arg("describe").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&describe.stdout).trim(),
        "global,specalloc"
    );
    for p in PROGRAMS {
        let system = (p.run)(1);
        let out = Command::new(worker)
            .args(["run", p.name, "--scale", "1"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}: {out:?}", p.name);
        let run = RunLine::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
        assert_eq!(run.program, p.name);
        assert_eq!(run.global, "specalloc");
        assert_eq!(
            run.checksum, system,
            "{}: specalloc {:016x}, system {system:016x}",
            p.name, run.checksum
        );
        if cfg!(feature = "annotated") && ANNOTATED.contains(&p.name) {
            let out = Command::new(worker)
                .args(["run", p.name, "--scale", "1", "--annotated"])
                .output()
                .unwrap();
            assert!(out.status.success(), "{} --annotated: {out:?}", p.name);
            let run = RunLine::parse(&String::from_utf8_lossy(&out.stdout)).unwrap();
            assert_eq!(
                run.checksum, system,
                "{} annotated: specalloc {:016x}, system {system:016x}",
                p.name, run.checksum
            );
        }
    }
}

#[test]
fn worker_rejects_bad_arguments_with_usage() {
    let worker = env!("CARGO_BIN_EXE_realworld_worker");
    for args in [
        &["run", "nope"][..],
        &["run", "json", "--scale", "0"],
        &["run", "syn", "--annotated"],
        &["--bogus"],
    ] {
        let out = Command::new(worker).args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("usage: realworld_worker"), "{args:?}: {err}");
    }
    let out = Command::new(worker).arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("usage: realworld_worker"));
}
