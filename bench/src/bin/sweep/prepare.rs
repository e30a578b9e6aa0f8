//! Building every worker configuration (one `cargo build` each, with
//! exactly its features, in one shared target directory) and checking each
//! binary before it is timed; the feature-unification trap.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use specalloc_bench::sweep::{self, Build, Check, Description, Expect};
use specalloc_bench::workers::{build_worker, cargo, output, progress, target_dir, workspace_root};

use crate::Opts;

/// A built worker and the outcome of its check.
pub(crate) struct Worker {
    pub(crate) build: Build,
    pub(crate) bin: PathBuf,
    pub(crate) desc: Option<Description>,
    pub(crate) check: Check,
}

impl Worker {
    pub(crate) fn ok(&self) -> bool {
        self.desc.is_some() && self.check.ok()
    }
}

/// Builds and checks every worker; fails if the specialised build (which
/// holds the baseline) is refused.
///
/// The builds share the driver's target directory (cargo keeps each feature
/// set's artifacts apart, so what they have in common is compiled once); each
/// binary is copied to `<out>/workers/<name>/` before the next build replaces
/// it. The check table goes to `<out>/checks.txt`, and to stdout with
/// `--verify` or when a build is refused; otherwise one line says all passed.
pub(crate) fn prepare(opts: &Opts, print_checks: bool) -> Result<Vec<Worker>, String> {
    let mut workers = Vec::new();
    let builds = sweep::builds(opts.peers);
    let target = target_dir();
    for (k, build) in builds.iter().enumerate() {
        let bin = build_worker(
            &progress("sweep", k + 1, builds.len(), build.name, build.features),
            "specalloc-bench",
            "sweep_worker",
            build.features,
            &target,
            &opts
                .out
                .join("workers")
                .join(build.name)
                .join("sweep_worker"),
        )?;
        let (desc, check) = check_worker(build.expect, &bin)?;
        workers.push(Worker {
            build: build.clone(),
            bin,
            desc,
            check,
        });
    }
    let report = check_report(
        &workers,
        "build checks: each worker built with exactly its features, then checked against \
         `nm -C --defined-only`",
    );
    let _ = std::fs::create_dir_all(&opts.out);
    let file = opts.out.join("checks.txt");
    let _ = std::fs::write(&file, &report);
    if print_checks || workers.iter().any(|w| !w.ok()) {
        print!("{report}");
    } else {
        eprintln!(
            "[sweep] {} workers built and checked with nm: all ok ({})",
            workers.len(),
            file.display()
        );
    }
    if !workers[0].ok() {
        return Err("the specialised build was refused; nothing to compare with".into());
    }
    Ok(workers)
}

/// Describes and `nm`s one worker binary and checks it.
fn check_worker(expect: Expect, bin: &Path) -> Result<(Option<Description>, Check), String> {
    let nm = output(Command::new("nm").args(["-C", "--defined-only"]).arg(bin))?;
    let symbols = sweep::parse_nm(&nm);
    let text = output(Command::new(bin).arg("describe"))?;
    Ok(match sweep::parse_description(&text) {
        Ok(desc) => {
            let check = sweep::verify(expect, &desc, &symbols);
            (Some(desc), check)
        }
        Err(e) => (
            None,
            Check {
                routines: sweep::routine_addresses(&symbols).len(),
                problems: vec![format!("describe: {e}")],
                notes: vec![],
            },
        ),
    })
}

fn check_report(workers: &[Worker], header: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{header}");
    let _ = writeln!(
        out,
        "{:<12} {:<10} {:<14} {:>9}  verdict",
        "build", "global", "specialisation", "routines"
    );
    for w in workers {
        let (global, spec) = match &w.desc {
            Some(d) => (
                d.global.as_str(),
                if d.size_specialized {
                    "on"
                } else {
                    "off (opt-out)"
                },
            ),
            None => ("?", "?"),
        };
        let verdict = if w.ok() {
            let mut v = "ok".to_string();
            for n in &w.check.notes {
                let _ = write!(v, " ({n})");
            }
            v
        } else {
            let p = &w.check.problems;
            let mut v = format!(
                "REFUSED, not timed or reported: {}",
                p[..p.len().min(3)].join("; ")
            );
            if p.len() > 3 {
                let _ = write!(v, "; and {} more", p.len() - 3);
            }
            v
        };
        let _ = writeln!(
            out,
            "{:<12} {:<10} {:<14} {:>9}  {verdict}",
            w.build.name, global, spec, w.check.routines
        );
    }
    let _ = writeln!(
        out,
        "(routines: distinct addresses of specalloc_runtime::routines::* symbols; the specialised \
         build must call the routine of each size and path, the opt-out build must have none)"
    );
    out
}

/// The silent trap, demonstrated: the worker built in one `cargo build`
/// with the facade crate and the facade's `no-size-specialized` feature.
/// Cargo unifies the runtime's features across the build, so the worker's
/// "specialised" configuration is the opt-out; the check must refuse it.
pub(crate) fn trap(opts: &Opts) -> Result<(), String> {
    let dir = opts.out.join("builds").join("trap");
    let mut cmd = Command::new(cargo());
    cmd.current_dir(workspace_root())
        .args([
            "build",
            "--release",
            "-p",
            "specalloc",
            "-p",
            "specalloc-bench",
            "--features",
            "specalloc/no-size-specialized",
            "--target-dir",
        ])
        .arg(&dir);
    eprintln!("[sweep] trap: {cmd:?}");
    let status = cmd.status().map_err(|e| format!("running {cmd:?}: {e}"))?;
    if !status.success() {
        return Err(format!("{cmd:?} failed ({status})"));
    }
    let bin = dir.join("release").join("sweep_worker");
    let (desc, check) = check_worker(Expect::Specialised, &bin)?;
    let w = Worker {
        build: Build {
            name: "trap",
            features: &[],
            expect: Expect::Specialised,
        },
        bin,
        desc,
        check,
    };
    let mut report = String::from(
        "trap: sweep_worker built in one cargo build with the facade and \
         `--features specalloc/no-size-specialized`, checked as the specialised build\n\
         command: cargo build --release -p specalloc -p specalloc-bench --features \
         specalloc/no-size-specialized\n",
    );
    report.push_str(&check_report(std::slice::from_ref(&w), "check:"));
    print!("{report}");
    let _ = std::fs::create_dir_all(&opts.out);
    let _ = std::fs::write(opts.out.join("trap.txt"), &report);
    if w.ok() {
        return Err("the check accepted a build with the opt-out switch unified in".into());
    }
    Ok(())
}
