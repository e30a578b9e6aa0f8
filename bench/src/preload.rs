//! C programs under preloaded allocators, shared by the C-workload table (`ctable`) and the
//! scaling table (`scaling`): the allocators (glibc's malloc, `libspecalloc.so` twice for the
//! A/A control, and the peers), building the C workloads of `bench/c/`, running one program
//! with its resource usage (`wait4`), and interleaved rounds that check every run's output
//! against glibc's.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use crate::stats::median;

/// One run's measurements, from the clock and from `wait4`'s rusage.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Run {
    /// Wall time, s.
    pub wall: f64,
    /// User CPU time, s (all threads).
    pub user: f64,
    /// System CPU time, s.
    pub sys: f64,
    /// Minor page faults.
    pub minflt: f64,
    /// Peak resident set size, KiB.
    pub rss_kb: f64,
}

/// The median of one measurement over `runs`: `median_of(&runs, |r| r.wall)`.
pub fn median_of(runs: &[Run], f: fn(&Run) -> f64) -> f64 {
    median(&runs.iter().map(f).collect::<Vec<_>>())
}

/// An allocator to run the programs on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocator {
    /// Its name in the tables (`glibc`, `specalloc`, `specalloc A/A`, `mimalloc`, …).
    pub name: String,
    /// The library to preload (`LD_PRELOAD`); `None` for glibc's malloc.
    pub preload: Option<PathBuf>,
}

impl Allocator {
    /// Whether this is a peer (not specalloc, nor its A/A copy).
    pub fn is_peer(&self) -> bool {
        !self.name.starts_with("specalloc")
    }
}

/// Where the preload tables keep what they build and run: `target/preload` under the
/// workspace root (`libspecalloc.so`'s own target directory, snmalloc's shim, the compiled C
/// programs and their scratch files).
pub fn work_dir(root: &Path) -> PathBuf {
    root.join("target/preload")
}

/// The allocators, glibc first: glibc, specalloc and its A/A copy (`libspecalloc.so`, built
/// into `<work>/target` by [`build_specalloc`], or the library `CTABLE_SPECALLOC` names), then
/// mimalloc, jemalloc, tcmalloc and snmalloc where Debian's packages put them (`apt-get
/// install libmimalloc2.0 libjemalloc2 libtcmalloc-minimal4`), snmalloc's shim built by
/// [`build_snmalloc`], or where `CTABLE_<NAME>` (`CTABLE_SNMALLOC`, …) says. A peer that is
/// missing is left out with a line on stdout. `tool` prefixes the progress line (`[ctable]`).
/// `CTABLE_BEFORE`, when set, names another build of `libspecalloc.so` (an earlier version, say)
/// that runs in the same rounds as `specalloc before`, for a before/after comparison.
pub fn allocators(tool: &str, root: &Path, work: &Path) -> Vec<Allocator> {
    let so = match std::env::var_os("CTABLE_SPECALLOC") {
        Some(so) => PathBuf::from(so),
        None => {
            eprintln!(
                "[{tool}] building libspecalloc.so (cargo build --release -p specalloc-capi)"
            );
            build_specalloc(root, &work.join("target")).unwrap_or_else(|e| panic!("{e}"))
        }
    };
    let mut allocs = vec![
        Allocator {
            name: "glibc".into(),
            preload: None,
        },
        Allocator {
            name: "specalloc".into(),
            preload: Some(so.clone()),
        },
        Allocator {
            name: "specalloc A/A".into(),
            preload: Some(so),
        },
    ];
    if let Some(before) = std::env::var_os("CTABLE_BEFORE") {
        allocs.push(Allocator {
            name: "specalloc before".into(),
            preload: Some(PathBuf::from(before)),
        });
    }
    let lib = Path::new("/usr/lib/x86_64-linux-gnu");
    for (name, default) in [
        ("mimalloc", lib.join("libmimalloc.so.2")),
        ("jemalloc", lib.join("libjemalloc.so.2")),
        ("tcmalloc", lib.join("libtcmalloc_minimal.so.4")),
        ("snmalloc", build_snmalloc(work)),
    ] {
        let path = std::env::var_os(format!("CTABLE_{}", name.to_uppercase()))
            .map(PathBuf::from)
            .unwrap_or(default);
        if path.exists() {
            allocs.push(Allocator {
                name: name.into(),
                preload: Some(path),
            });
        } else {
            println!("{name}: left out ({} not found)", path.display());
        }
    }
    allocs
}

/// Builds `libspecalloc.so` (`cargo build --release -p specalloc-capi`) in the target
/// directory `target`; returns its path.
pub fn build_specalloc(root: &Path, target: &Path) -> Result<PathBuf, String> {
    let mut cmd = Command::new(crate::workers::cargo());
    cmd.args(["build", "--release", "--quiet", "-p", "specalloc-capi"])
        .arg("--manifest-path")
        .arg(root.join("Cargo.toml"))
        .env("CARGO_TARGET_DIR", target);
    let st = cmd.status().map_err(|e| format!("running {cmd:?}: {e}"))?;
    if !st.success() {
        return Err(format!("building libspecalloc.so failed ({st}): {cmd:?}"));
    }
    let so = target.join("release/libspecalloc.so");
    so.canonicalize()
        .map_err(|e| format!("{}: {e}", so.display()))
}

/// snmalloc's shim (`libsnmallocshim.so`) built with `c++` from the sources the snmalloc-sys
/// crate ships (in cargo's registry once the bench's `peers` feature was built), as its CMake
/// file builds it, into `work`; the path it would have when that is not possible.
pub fn build_snmalloc(work: &Path) -> PathBuf {
    let out = work.join("libsnmallocshim.so");
    if out.exists() {
        return out;
    }
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cargo")));
    let Some(registry) = home.map(|h| h.join("registry/src")) else {
        return out;
    };
    let src = std::fs::read_dir(&registry)
        .into_iter()
        .flatten()
        .flatten()
        .flat_map(|index| {
            std::fs::read_dir(index.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("snmalloc-sys-"))
        })
        .map(|p| p.join("snmalloc/src"));
    let Some(src) = src.filter(|s| s.exists()) else {
        return out;
    };
    eprintln!("building snmalloc's shim from {}", src.display());
    let _ = std::fs::create_dir_all(work);
    let st = Command::new("c++")
        .args([
            "-std=c++17",
            "-O3",
            "-fPIC",
            "-shared",
            "-fno-exceptions",
            "-fno-rtti",
            "-fvisibility=hidden",
            "-ftls-model=initial-exec",
            "-fomit-frame-pointer",
            "-mcx16",
            "-DNDEBUG",
            "-DSNMALLOC_USE_WAIT_ON_ADDRESS=1",
            "-DSNMALLOC_USE_PTHREAD_DESTRUCTORS",
            "-DSNMALLOC_EXPORT=__attribute__((visibility(\"default\")))",
            "-pthread",
            "-I",
        ])
        .arg(&src)
        .arg(src.join("snmalloc/override/malloc.cc"))
        .arg(src.join("snmalloc/override/new.cc"))
        .arg("-o")
        .arg(&out)
        .status();
    if !st.is_ok_and(|s| s.success()) {
        eprintln!("building snmalloc's shim failed");
    }
    out
}

/// Whether `prog` is on `PATH`.
pub fn have(prog: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
        .unwrap_or(false)
}

/// The source of workload `name` in `bench/c/`: `<name>.c`, but `larsonspawn.c` for
/// `larsonsized` and `larsonpool`.
pub fn source(name: &str) -> String {
    match name {
        "larsonsized" | "larsonpool" => "larsonspawn.c".into(),
        _ => format!("{name}.c"),
    }
}

/// Compiles the C workload `bench/c/<name>.c` with `cc -O2 -Wall -Wextra -pthread` into
/// `<dir>/<name>`; returns its path and the compiler's warnings (empty: the workloads compile
/// without any, which the bench's tests check). `larsonsized` is `larsonspawn.c` compiled as
/// C++ (`c++ -x c++ -DSIZED`): its blocks come from `new[]` and go back by sized `delete[]`;
/// `larsonpool` is `larsonspawn.c` with `-DPOOL` (workers that run to the end).
pub fn compile(root: &Path, name: &str, dir: &Path) -> Result<(PathBuf, String), String> {
    let (compiler, extra): (&str, &[&str]) = match name {
        "larsonsized" => (
            "c++",
            &["-x", "c++", "-std=c++17", "-DSIZED", "-fsized-deallocation"],
        ),
        "larsonpool" => ("cc", &["-DPOOL"]),
        _ => ("cc", &[]),
    };
    if !have(compiler) {
        return Err(format!("{compiler} is needed to build the C workloads"));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let exe = dir.join(name);
    let mut cmd = Command::new(compiler);
    cmd.args(extra)
        .args(["-O2", "-Wall", "-Wextra", "-pthread", "-o"])
        .arg(&exe)
        .arg(root.join("bench/c").join(source(name)));
    let out = cmd.output().map_err(|e| format!("running {cmd:?}: {e}"))?;
    let warnings = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() {
        return Err(format!("{cmd:?} failed ({}):\n{warnings}", out.status));
    }
    Ok((exe, warnings))
}

/// [`compile`] for the tables: stops on an error, passes warnings on to stderr.
pub fn compiled(root: &Path, name: &str, dir: &Path) -> PathBuf {
    let (exe, warnings) = compile(root, name, dir).unwrap_or_else(|e| panic!("{e}"));
    eprint!("{warnings}");
    exe
}

/// A command to run on every allocator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// Its name in the tables and progress lines.
    pub name: String,
    /// The command and its arguments.
    pub argv: Vec<String>,
    /// The directory it runs in.
    pub dir: PathBuf,
    /// Files to remove before each run (the sqlite database).
    pub scratch: Vec<PathBuf>,
}

impl Program {
    /// A compiled C workload run as `exe ARGS…` in `dir`.
    pub fn c(name: impl Into<String>, exe: &Path, args: &[String], dir: &Path) -> Program {
        let mut argv = vec![exe.display().to_string()];
        argv.extend(args.iter().cloned());
        Program {
            name: name.into(),
            argv,
            dir: dir.to_path_buf(),
            scratch: vec![],
        }
    }
}

/// Runs `prog` once with `preload` (none: glibc's malloc); returns its measurements and its
/// output (stdout; stderr goes to ours), or what went wrong: it could not start, or it failed.
// The child is reaped by `wait4`, which also gives its resource usage (`Child::wait` does not).
#[allow(clippy::zombie_processes)]
pub fn run_one(prog: &Program, preload: Option<&Path>) -> Result<(Run, Vec<u8>), String> {
    for f in &prog.scratch {
        let _ = std::fs::remove_file(f);
    }
    let mut cmd = Command::new(&prog.argv[0]);
    cmd.args(&prog.argv[1..])
        .current_dir(&prog.dir)
        .env("PYTHONHASHSEED", "0")
        .env("LC_ALL", "C")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    if let Some(p) = preload {
        cmd.env("LD_PRELOAD", p);
    }
    let t = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("{}: starting {:?}: {e}", prog.name, prog.argv))?;
    let mut out = Vec::new();
    let read = std::io::Read::read_to_end(child.stdout.as_mut().unwrap(), &mut out);
    let mut status = 0;
    // SAFETY: an all-zero rusage is valid; wait4 fills it for the child we started.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, writing into live locals.
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut ru) };
    let wall = t.elapsed().as_secs_f64();
    if pid != child.id() as libc::pid_t {
        return Err(format!(
            "{}: wait4: {}",
            prog.name,
            std::io::Error::last_os_error()
        ));
    }
    read.map_err(|e| format!("{}: reading its output: {e}", prog.name))?;
    if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
        return Err(format!(
            "{} failed (wait status {status}) with LD_PRELOAD={}",
            prog.name,
            preload.map_or("(none)".into(), |p| p.display().to_string())
        ));
    }
    let secs = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    Ok((
        Run {
            wall,
            user: secs(ru.ru_utime),
            sys: secs(ru.ru_stime),
            minflt: ru.ru_minflt as f64,
            rss_kb: ru.ru_maxrss as f64,
        },
        out,
    ))
}

/// The first lines of a table's report: the commit, the date, the command line that reproduces
/// this run of bench binary `bin`, the machine and its load; then `quick_note` in bold when
/// given (the run is `--quick`, not a measurement).
pub fn report_header(bin: &str, quick_note: Option<&str>) -> String {
    let date = crate::workers::output(Command::new("date").args(["-u", "+%Y-%m-%d"]))
        .map(|d| d.trim().to_string())
        .unwrap_or_default();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut header = format!(
        "commit {}, {date}, `{}`\nmachine: {}; load {}\n",
        crate::workers::commit(),
        crate::cli::command_line(bin, &args),
        crate::workers::machine(),
        crate::workers::loadavg()
    );
    if let Some(note) = quick_note {
        header += &format!("**{note}**\n");
    }
    header
}

/// The samples of interleaved rounds.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    /// `runs[p][k]`: program `p`'s runs on allocator `k`, one per round.
    pub runs: Vec<Vec<Vec<Run>>>,
    /// `outputs[p]`: program `p`'s output, the same on every allocator.
    pub outputs: Vec<Vec<u8>>,
}

/// Runs every program on every allocator `rounds` times, interleaved: each round runs each
/// program on all allocators in turn, starting one allocator later than the round before (so
/// that no allocator always runs first or after the same one); `allocs[0]` (glibc) runs first
/// in the first round, and every other run's output must equal its output, byte for byte (the
/// run stops otherwise). Prints a progress line per program and round to stderr, prefixed with
/// `[tool]`.
pub fn interleaved(
    tool: &str,
    programs: &[Program],
    allocs: &[Allocator],
    rounds: usize,
) -> Samples {
    let n = programs.len();
    let a = allocs.len();
    let mut runs: Vec<Vec<Vec<Run>>> = vec![vec![Vec::new(); a]; n];
    let mut expected: Vec<Option<Vec<u8>>> = vec![None; n];
    let start = Instant::now();
    for r in 0..rounds {
        for (p, prog) in programs.iter().enumerate() {
            let t = Instant::now();
            for i in 0..a {
                let k = (i + r) % a;
                let (run, out) =
                    run_one(prog, allocs[k].preload.as_deref()).unwrap_or_else(|e| panic!("{e}"));
                match &expected[p] {
                    None if k == 0 => expected[p] = Some(out),
                    Some(e) if *e != out => panic!(
                        "{} on {}: output differs from glibc's:\n{}\nglibc's:\n{}",
                        prog.name,
                        allocs[k].name,
                        String::from_utf8_lossy(&out),
                        String::from_utf8_lossy(e)
                    ),
                    _ => {}
                }
                runs[p][k].push(run);
            }
            eprintln!(
                "[{tool}] round {}/{rounds}, program {}/{n}: {} on {a} allocators, {:.1} s \
                 (output same as glibc's; {:.0} s in all)",
                r + 1,
                p + 1,
                prog.name,
                t.elapsed().as_secs_f64(),
                start.elapsed().as_secs_f64()
            );
        }
    }
    Samples {
        runs,
        outputs: expected
            .into_iter()
            .map(Option::unwrap_or_default)
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(name: &str, script: &str) -> Program {
        Program {
            name: name.into(),
            argv: vec!["sh".into(), "-c".into(), script.into()],
            dir: std::env::temp_dir(),
            scratch: vec![],
        }
    }

    fn glibc_twice() -> Vec<Allocator> {
        ["glibc", "again"]
            .map(|name| Allocator {
                name: name.into(),
                preload: None,
            })
            .to_vec()
    }

    #[test]
    fn run_one_measures_and_reports_failure() {
        let (run, out) = run_one(&sh("echo", "echo hi"), None).unwrap();
        assert_eq!(out, b"hi\n");
        assert!(run.wall > 0.0 && run.rss_kb > 0.0, "{run:?}");
        let e = run_one(&sh("false", "exit 3"), None).unwrap_err();
        assert!(e.starts_with("false failed"), "{e}");
    }

    #[test]
    fn interleaved_keeps_every_sample_and_the_output() {
        let s = interleaved(
            "test",
            &[sh("a", "echo a"), sh("b", "echo b")],
            &glibc_twice(),
            3,
        );
        assert_eq!(s.outputs, [b"a\n".to_vec(), b"b\n".to_vec()]);
        assert!(s.runs.iter().flatten().all(|k| k.len() == 3));
        assert!(median_of(&s.runs[0][1], |r| r.wall) > 0.0);
    }

    #[test]
    #[should_panic(expected = "output differs from glibc's")]
    fn interleaved_stops_when_an_output_differs() {
        // A different output on every run: the second allocator's first run differs.
        interleaved("test", &[sh("clock", "date +%N")], &glibc_twice(), 1);
    }
}
