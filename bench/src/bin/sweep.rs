//! The size sweep: what one allocation costs, size by size, for the
//! size-specialised entry points against the generic path, the opt-out
//! build, the fully inlined generic path and other allocators.
//!
//! # What it compares
//!
//! Sizes 1 to 15 bytes (tiny) and 16, 24, 32, 48, 64, 80, 96, 112, 128,
//! 160, 256, 512, 1024 bytes; the `plain` path (`alloc`) and the `zeroed`
//! path (`alloc_zeroed`, memory must read zero); two shapes: `alloc` (1000
//! allocations timed, their frees not; ns per allocation) and `pair` (alloc
//! and free at once; ns per pair). Configurations:
//!
//! * `generic`: `std::alloc::alloc` with the type's constant layout through
//!   the global allocator (specalloc), in loops compiled in this library
//!   crate, so the allocator shim is called out of line, as from any crate
//!   but the one declaring the global allocator; every table's baseline;
//! * `specialised`: `specalloc_runtime::spec::uninit::<T>()` /
//!   `spec::zeroed::<T>()`, which call the routine of `T`'s size class;
//! * `specialised A/A`: the same binary again, in a separate process: the
//!   control, whose true difference is zero;
//! * `inline`: `specalloc_runtime::alloc_inline` (the generic path with the
//!   lookup folded at the constant layout);
//! * `generic-local`: `std::alloc::alloc` called directly in the crate that
//!   declares the `#[global_allocator]`, where the optimiser may inline the
//!   allocator shim (what `Box::new` costs in that crate);
//! * `opt-out`: the `spec::` calls in a build with `no-size-specialized`;
//! * `system`, and with `--features peers` `mimalloc`, `jemalloc`,
//!   `snmalloc` (0.3): each the global allocator of its own build, called
//!   like `generic`.
//!
//! Every block is freed through one out-of-line `std::alloc::dealloc`
//! call. The loops are in `src/sweep_loops.rs`, the configurations in
//! `src/bin/sweep_worker.rs`.
//!
//! # How
//!
//! 1. **Build** the worker once per configuration family, each with exactly
//!    its features into its own target directory (`<out>/builds/<name>`),
//!    so cargo's feature unification cannot carry the opt-out switch (or an
//!    allocator) from one into another.
//! 2. **Verify** each binary before timing it: its self-description must
//!    match (global allocator, opt-out state, configurations) and `nm` must
//!    agree: in the specialised build every specialised cell calls the
//!    routine of its size and path (and routines are present), in the
//!    opt-out build there is no routine at all, and the generic cells run
//!    the library's loop instances, not the binary's own. A build that
//!    fails is **refused**: it is not timed and not reported.
//! 3. **Calibrate** an iteration count per cell (about `--target-us` µs per
//!    sample), once.
//! 4. **Rounds**: each round takes one sample of every cell of every
//!    configuration, in worker processes of about `--cells-per-run` (16)
//!    cells each, started in a freshly shuffled order (the cells of a
//!    build are shuffled and cut into slices anew each round). Each process
//!    warms its cells up, then samples them in shuffled order. Samples are
//!    pooled over rounds (n = rounds), so drift of the machine spreads over
//!    all configurations instead of biasing whichever ran last —
//!    back-to-back processes lie — and a burst of load hits a few cells,
//!    not a whole configuration. A sample is the fastest of `--sub` (5)
//!    consecutive runs of a fifth of its length: on a shared machine a
//!    preemption only ever slows a run. The A/A processes get argument
//!    lists of the same length as the specialised ones (`--aa 1` against
//!    `--aa 0`), and the worker allocates nothing between samples, so the
//!    two differ in nothing but the moment they run.
//! 5. **Tables**, benchstat-style, per path and shape: median ± spread per
//!    configuration, the change against `generic` with the Mann-Whitney
//!    p-value (`~` when p ≥ 0.05), the geomean; then the A/A controls and
//!    the targets (specialised ≤ 0.6× generic; specialised pair faster than
//!    every peer).
//!
//! # Running
//!
//! ```text
//! cargo run --release -p specalloc-bench --features peers --bin sweep            # ~5 min
//! cargo run --release -p specalloc-bench --bin sweep -- --quick                  # ~1 min
//! cargo run --release -p specalloc-bench --features peers --bin sweep -- --callgrind
//! cargo run --release -p specalloc-bench --bin sweep -- --binsize
//! cargo run --release -p specalloc-bench --features peers --bin sweep -- --verify
//! ```
//!
//! The first run builds every worker (the peers take minutes: jemalloc and
//! snmalloc compile C/C++). Output: the tables on stdout and in
//! `<out>/sweep.txt`, raw samples in `<out>/sweep.csv`, one line per cell in
//! `<out>/sweep-summary.csv`; `<out>` is `target/sweep` unless `--out`.
//!
//! `--callgrind` runs each worker under `valgrind --tool=callgrind` and
//! reports instructions per operation: each cell is run for N and 2N
//! operations between two calls of a boundary function on which callgrind
//! dumps its counters, and the difference over N cancels the fixed costs.
//!
//! `--binsize` builds `examples/nm_probe.rs` (ten size classes) with and
//! without the opt-out switch and reports both sizes, as built and
//! stripped, their difference, and the routines `nm` finds in each.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use specalloc_bench::harness::{self, Results};
use specalloc_bench::stats;
use specalloc_bench::sweep::{
    self, AllocPath, Build, CellId, Check, Description, Expect, Pool, SampleLine, Shape, AA_SUFFIX,
    GENERIC, INLINE, LOCAL, OPT_OUT, SIZES, SPECIALISED,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Sweep,
    Verify,
    Callgrind,
    Binsize,
    Trap,
}

#[derive(Clone, Debug)]
struct Opts {
    mode: Mode,
    quick: bool,
    rounds: usize,
    target_us: u64,
    seed: u64,
    out: PathBuf,
    peers: bool,
    cg_n: usize,
    sub: u64,
    cells_per_run: usize,
    args: Vec<String>,
}

fn usage() -> String {
    "usage: sweep [--quick] [--rounds N] [--target-us N] [--seed N] [--out DIR] [--no-peers]\n\
     \x20            [--sub K] [--cells-per-run K]\n\
     \x20      sweep --verify | --callgrind [--cg-n N] | --binsize | --trap\n\
     \n\
     --quick        5 rounds of ~0.5 ms samples (about a minute; a smoke test)\n\
     --rounds N     timed rounds, i.e. samples per cell (default 30)\n\
     --target-us N  length of one sample in µs (default 2000)\n\
     --sub K        a sample is the fastest of K runs of 1/K of it (default 5; 1: plain)\n\
     --cells-per-run K  cells per worker invocation (default 16; 0: all of a process's)\n\
     --seed N       seed of the shuffled orders\n\
     --out DIR      output directory (default target/sweep)\n\
     --no-peers     leave mimalloc, jemalloc and snmalloc out (built with --features peers)\n\
     --verify       build and check every configuration, run nothing\n\
     --callgrind    instructions per operation, under valgrind --tool=callgrind\n\
     --cg-n N       operations per callgrind measurement (default 1000)\n\
     --binsize      binary-size cost of specialisation (examples/nm_probe.rs)\n\
     --trap         show the check refusing a worker built together with a crate\n\
     \x20              that enables the opt-out switch (cargo feature unification)\n"
        .to_string()
}

fn parse_args(args: Vec<String>) -> Result<Opts, String> {
    let mut o = Opts {
        mode: Mode::Sweep,
        quick: false,
        rounds: 30,
        target_us: 2000,
        seed: 0x5eed_a110c,
        out: sweep::target_dir().join("sweep"),
        peers: cfg!(feature = "peers"),
        cg_n: 1000,
        sub: 5,
        cells_per_run: 16,
        args: args.clone(),
    };
    let (mut rounds, mut target) = (None, None);
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| it.next().ok_or(format!("{flag} needs a value"));
        let mut number = |flag: &str| -> Result<u64, String> {
            let v = value(flag)?;
            v.parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or(format!("{flag}: not a positive integer: {v}"))
        };
        match a.as_str() {
            "--quick" => o.quick = true,
            "--rounds" => rounds = Some(number("--rounds")? as usize),
            "--target-us" => target = Some(number("--target-us")?),
            "--seed" => o.seed = number("--seed")?,
            "--cg-n" => o.cg_n = number("--cg-n")? as usize,
            "--sub" => o.sub = number("--sub")?,
            "--cells-per-run" => {
                let v = value("--cells-per-run")?;
                o.cells_per_run = v
                    .parse()
                    .map_err(|_| format!("--cells-per-run: not an integer: {v}"))?;
            }
            "--out" => o.out = PathBuf::from(value("--out")?),
            "--no-peers" => o.peers = false,
            "--verify" => o.mode = Mode::Verify,
            "--callgrind" => o.mode = Mode::Callgrind,
            "--binsize" => o.mode = Mode::Binsize,
            "--trap" => o.mode = Mode::Trap,
            "-h" | "--help" => return Err(usage()),
            other => return Err(format!("unknown argument: {other}\n\n{}", usage())),
        }
    }
    if o.quick {
        o.rounds = 5;
        o.target_us = 500;
    }
    o.rounds = rounds.unwrap_or(o.rounds);
    o.target_us = target.unwrap_or(o.target_us);
    Ok(o)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let help = args.iter().any(|a| a == "-h" || a == "--help");
    let opts = match parse_args(args) {
        Ok(o) => o,
        Err(msg) => {
            eprint!("{msg}");
            std::process::exit(if help { 0 } else { 2 });
        }
    };
    if opts.peers && !cfg!(feature = "peers") {
        eprintln!("note: peers need `--features peers`");
    }
    let result = match opts.mode {
        Mode::Binsize => binsize(&opts),
        Mode::Trap => trap(&opts),
        Mode::Sweep | Mode::Verify | Mode::Callgrind => {
            prepare(&opts).and_then(|workers| match opts.mode {
                Mode::Sweep => run_sweep(&opts, &workers),
                Mode::Callgrind => callgrind(&opts, &workers),
                _ => Ok(()),
            })
        }
    };
    if let Err(e) = result {
        eprintln!("sweep: error: {e}");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------------------
// Build and verify
// ---------------------------------------------------------------------------

/// A built worker and the outcome of its check.
struct Worker {
    build: Build,
    bin: PathBuf,
    desc: Option<Description>,
    check: Check,
}

impl Worker {
    fn ok(&self) -> bool {
        self.desc.is_some() && self.check.ok()
    }
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// Runs a command; returns its stdout, or an error naming it.
fn output(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("running {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `cargo build --release` of one package target with exactly `features`,
/// into its own `target_dir`.
fn cargo_build(
    package: &str,
    target: &[&str],
    features: &[&str],
    target_dir: &Path,
) -> Result<(), String> {
    let mut cmd = Command::new(cargo());
    cmd.current_dir(sweep::workspace_root())
        .args(["build", "--release", "-p", package])
        .args(target)
        .arg("--target-dir")
        .arg(target_dir);
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    let status = cmd.status().map_err(|e| format!("running {cmd:?}: {e}"))?;
    if !status.success() {
        return Err(format!("{cmd:?} failed ({status})"));
    }
    Ok(())
}

/// Builds and checks every worker; fails if the specialised build (which
/// holds the baseline) is refused.
fn prepare(opts: &Opts) -> Result<Vec<Worker>, String> {
    let mut workers = Vec::new();
    for build in sweep::builds(opts.peers) {
        let dir = opts.out.join("builds").join(build.name);
        eprintln!(
            "[sweep] building {} (features: {}) into {}",
            build.name,
            if build.features.is_empty() {
                "none".to_string()
            } else {
                build.features.join(",")
            },
            dir.display()
        );
        cargo_build(
            "specalloc-bench",
            &["--bin", "sweep_worker"],
            build.features,
            &dir,
        )?;
        let bin = dir.join("release").join("sweep_worker");
        let (desc, check) = check_worker(build.expect, &bin)?;
        workers.push(Worker {
            build,
            bin,
            desc,
            check,
        });
    }
    let report = check_report(
        &workers,
        "build checks: each worker built alone into its own target directory, then checked \
         against `nm -C --defined-only`",
    );
    print!("{report}");
    let _ = std::fs::create_dir_all(&opts.out);
    let _ = std::fs::write(opts.out.join("checks.txt"), &report);
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
fn trap(opts: &Opts) -> Result<(), String> {
    let dir = opts.out.join("builds").join("trap");
    let mut cmd = Command::new(cargo());
    cmd.current_dir(sweep::workspace_root())
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

// ---------------------------------------------------------------------------
// The timed sweep
// ---------------------------------------------------------------------------

/// One worker process of a round.
struct Proc<'a> {
    label: String,
    worker: &'a Worker,
    iters: PathBuf,
    suffix: &'static str,
}

use specalloc_bench::harness::SplitMix64 as Rng;

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let rustc = output(Command::new("rustc").arg("-V"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "rustc ?".into());
    format!("{model}, {cpus} CPUs; {rustc}")
}

/// The command line that reproduces this run.
fn command_line(opts: &Opts) -> String {
    let mut s = "cargo run --release -p specalloc-bench".to_string();
    if cfg!(feature = "peers") {
        s.push_str(" --features peers");
    }
    s.push_str(" --bin sweep");
    if !opts.args.is_empty() {
        s.push_str(" -- ");
        s.push_str(&opts.args.join(" "));
    }
    s
}

fn run_sweep(opts: &Opts, workers: &[Worker]) -> Result<(), String> {
    let ok: Vec<&Worker> = workers.iter().filter(|w| w.ok()).collect();
    let load_start = loadavg();
    // Calibrate each build once; the A/A process uses the same counts.
    let mut procs = Vec::new();
    for w in &ok {
        eprintln!("[sweep] calibrating {}", w.build.name);
        let text = output(
            Command::new(&w.bin)
                .args(["calibrate", "--target-us"])
                .arg(opts.target_us.to_string()),
        )?;
        let file = opts.out.join(format!("iters-{}.txt", w.build.name));
        std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
        procs.push(Proc {
            label: w.build.name.to_string(),
            worker: w,
            iters: file.clone(),
            suffix: "",
        });
        if w.build.expect == Expect::Specialised {
            procs.push(Proc {
                label: format!("{}{AA_SUFFIX}", w.build.name),
                worker: w,
                iters: file,
                suffix: AA_SUFFIX,
            });
        }
    }

    let mut pool = Pool::default();
    let mut rng = Rng(opts.seed);
    // The configurations each process reports, and its slices: a process
    // invocation runs about `cells_per_run` cells, so that one moment of
    // load on the machine hits a few cells of one configuration, not all
    // cells of a process.
    let configs: Vec<Vec<String>> = procs
        .iter()
        .map(|p| {
            p.worker
                .desc
                .as_ref()
                .map(|d| {
                    d.configs
                        .iter()
                        .map(|c| format!("{c}{}", p.suffix))
                        .collect()
                })
                .unwrap_or_default()
        })
        .collect();
    let slices: Vec<usize> = configs
        .iter()
        .map(|c| {
            let cells = c.len() * SIZES.len() * 4;
            if opts.cells_per_run == 0 {
                1
            } else {
                cells.div_ceil(opts.cells_per_run).max(1)
            }
        })
        .collect();
    let start = Instant::now();
    let tty = std::io::stderr().is_terminal();
    for round in 0..opts.rounds {
        // One seed per process and round: its slices partition its cells.
        let seeds: Vec<u64> = procs.iter().map(|_| rng.next_u64()).collect();
        let mut runs: Vec<(usize, usize)> = (0..procs.len())
            .flat_map(|p| (0..slices[p]).map(move |s| (p, s)))
            .collect();
        rng.shuffle(&mut runs);
        let mut counts = vec![0; procs.len()];
        for &(i, slice) in &runs {
            let p = &procs[i];
            let text = output(
                Command::new(&p.worker.bin)
                    .arg("run")
                    .arg("--iters-file")
                    .arg(&p.iters)
                    .arg("--seed")
                    .arg(format!("{:020}", seeds[i]))
                    .args(["--aa", if p.suffix.is_empty() { "0" } else { "1" }])
                    .arg("--sub")
                    .arg(opts.sub.to_string())
                    .arg("--slice")
                    .arg(format!("{slice:04}"))
                    .arg("--slices")
                    .arg(format!("{:04}", slices[i])),
            )?;
            for line in text.lines() {
                let s = SampleLine::parse(line)
                    .ok_or_else(|| format!("{}: bad sample line {line:?}", p.label))?;
                if !configs[i].contains(&s.cell.config) {
                    return Err(format!(
                        "{} reported configuration {:?}, not one of its own {:?}",
                        p.label, s.cell.config, configs[i]
                    ));
                }
                pool.add(&s, round);
                counts[i] += 1;
            }
        }
        for (i, p) in procs.iter().enumerate() {
            let want = configs[i].len() * SIZES.len() * 4;
            if counts[i] != want {
                return Err(format!(
                    "{}: {} samples in round {round}, expected {want}",
                    p.label, counts[i]
                ));
            }
        }
        let elapsed = start.elapsed().as_secs_f64();
        let left = elapsed / (round + 1) as f64 * (opts.rounds - round - 1) as f64;
        let msg = format!(
            "[sweep] round {}/{} done: {elapsed:.0} s elapsed, ~{left:.0} s left (load {})",
            round + 1,
            opts.rounds,
            loadavg()
        );
        if tty {
            eprint!("\r\x1b[K{msg}");
        } else {
            eprintln!("{msg}");
        }
    }
    if tty {
        eprintln!();
    }
    let load_end = loadavg();

    // Tables.
    let mut available: Vec<String> = ok
        .iter()
        .flat_map(|w| {
            w.desc
                .as_ref()
                .map(|d| d.configs.clone())
                .unwrap_or_default()
        })
        .collect();
    available.push(format!("{SPECIALISED}{AA_SUFFIX}"));
    let cols = sweep::columns(&available);
    let mut all_cols = cols.clone();
    for c in [GENERIC, INLINE] {
        all_cols.push(format!("{c}{AA_SUFFIX}"));
    }
    let aa_pairs: Vec<(String, String)> = [SPECIALISED, GENERIC, INLINE]
        .iter()
        .map(|c| (format!("{c}{AA_SUFFIX}"), c.to_string()))
        .collect();

    let mut report = String::new();
    let _ = writeln!(
        report,
        "size sweep: {} rounds; each round samples every cell of the {} worker processes once, \
         in {} invocations of ~{} cells each, started in a fresh shuffled order; samples pooled \
         over rounds",
        opts.rounds,
        procs.len(),
        slices.iter().sum::<usize>(),
        opts.cells_per_run
    );
    let _ = writeln!(report, "machine: {}", machine());
    let _ = writeln!(
        report,
        "load average (1/5/15 min): {load_start} at start, {load_end} at end; {:.0} s of rounds",
        start.elapsed().as_secs_f64()
    );
    let _ = writeln!(report, "command: {}", command_line(opts));
    let _ = writeln!(
        report,
        "sample: the fastest of {} consecutive runs of ~{} µs each; `generic` is the baseline \
         of every `vs generic` column",
        opts.sub,
        opts.target_us / opts.sub.max(1)
    );
    if opts.quick {
        let _ = writeln!(
            report,
            "note: --quick: few, short rounds; a smoke test, not a measurement"
        );
    }
    let refused: Vec<&str> = workers
        .iter()
        .filter(|w| !w.ok())
        .map(|w| w.build.name)
        .collect();
    if !refused.is_empty() {
        let _ = writeln!(
            report,
            "REFUSED builds (failed their check; not reported): {}",
            refused.join(", ")
        );
    }

    let mut raw = Vec::new();
    let mut summary_csv = format!("{}\n", sweep::SUMMARY_CSV_HEADER);
    let mut overview = Vec::new();
    let mut compact = String::new();
    let mut aa_all: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for path in AllocPath::ALL {
        for shape in Shape::ALL {
            let res = pool.results(path, shape, &cols);
            let full = pool.results(path, shape, &all_cols);
            let aa: Vec<(String, Option<sweep::AaResult>)> = aa_pairs
                .iter()
                .map(|(a, b)| (format!("{a} vs {b}"), sweep::aa(&full, a, b)))
                .collect();
            for (a, b) in &aa_pairs {
                aa_all.entry(format!("{a} vs {b}")).or_default().extend(
                    sweep::ratios(&full, a, b)
                        .into_iter()
                        .filter(|x| x.is_finite()),
                );
            }
            let _ = writeln!(report);
            report.push_str(&res.table("size (B)"));
            report.push_str(&sweep::summary(&res, &aa));
            compact.push_str(&sweep::ratio_table(&res));
            compact.push('\n');
            sweep::summary_csv_rows(&res, &mut summary_csv);
            overview.push(overview_line(&res, &full));
            raw.push(full);
        }
    }
    let _ = writeln!(report);
    report.push_str(&compact);
    let _ = writeln!(
        report,
        "overview: geomean over sizes of the ratio of medians to generic; A/A: specialised A/A \
         against specialised (geomean, and the largest single-size difference)"
    );
    let mut lines = vec![[
        "table",
        "specialised",
        "(8…1024 B)",
        "(1…15 B)",
        "inline",
        "generic-local",
        "opt-out",
        "A/A",
        "A/A max |Δ|",
    ]
    .map(String::from)
    .to_vec()];
    lines.extend(overview);
    report.push_str(&align(&lines));
    for (label, r) in &aa_all {
        let _ = writeln!(
            report,
            "A/A control, all four tables: {label}: geomean {} over {} cells",
            sweep::fmt_pct(stats::geomean(r)),
            r.len()
        );
    }

    print!("{report}");
    let txt = opts.out.join("sweep.txt");
    let csv = opts.out.join("sweep.csv");
    let summary = opts.out.join("sweep-summary.csv");
    std::fs::write(&txt, &report).map_err(|e| format!("{}: {e}", txt.display()))?;
    std::fs::write(&summary, &summary_csv).map_err(|e| format!("{}: {e}", summary.display()))?;
    harness::write_csv(&csv, &raw).map_err(|e| format!("{}: {e}", csv.display()))?;
    eprintln!(
        "[sweep] tables: {}; raw samples: {}; per-cell summary: {}",
        txt.display(),
        csv.display(),
        summary.display()
    );
    Ok(())
}

/// One line of the overview: geomean ratios of one table.
fn overview_line(res: &Results, full: &Results) -> Vec<String> {
    let g =
        |a: &str, sizes: &[usize]| sweep::fmt_ratio(sweep::geomean_ratio(res, a, GENERIC, sizes));
    let aa = sweep::ratios(full, &format!("{SPECIALISED}{AA_SUFFIX}"), SPECIALISED);
    let worst = aa
        .iter()
        .filter(|x| x.is_finite())
        .map(|x| (x - 1.0).abs())
        .fold(0.0, f64::max);
    vec![
        res.name.clone(),
        g(SPECIALISED, &SIZES),
        g(SPECIALISED, &sweep::REFERENCE_SIZES),
        g(SPECIALISED, &sweep::TINY_SIZES),
        g(INLINE, &SIZES),
        g(LOCAL, &SIZES),
        g(OPT_OUT, &SIZES),
        sweep::fmt_pct(stats::geomean(&aa)),
        format!("{:.1}%", worst * 100.0),
    ]
}

// ---------------------------------------------------------------------------
// callgrind
// ---------------------------------------------------------------------------

fn callgrind(opts: &Opts, workers: &[Worker]) -> Result<(), String> {
    let n = opts.cg_n;
    let mut per_op: BTreeMap<CellId, f64> = BTreeMap::new();
    let mut configs = Vec::new();
    let mut failed = Vec::new();
    for w in workers.iter().filter(|w| w.ok()) {
        let dir = opts.out.join("callgrind").join(w.build.name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let file = dir.join("cg.out");
        eprintln!(
            "[sweep] callgrind: {} ({n} and {} operations per cell)",
            w.build.name,
            2 * n
        );
        let run = output(
            Command::new("valgrind")
                .arg("--tool=callgrind")
                .arg(format!("--dump-before={}", sweep::BOUNDARY_SYMBOL))
                .arg(format!("--callgrind-out-file={}", file.display()))
                .arg(&w.bin)
                .args(["callgrind", "--n"])
                .arg(n.to_string()),
        );
        let labels = match run {
            Ok(l) => l,
            Err(e) => {
                let first = e
                    .lines()
                    .find(|l| l.contains("error") || l.contains("failed"))
                    .unwrap_or("");
                eprintln!(
                    "[sweep] callgrind: {} fails under valgrind, left out: {first}",
                    w.build.name
                );
                failed.push(w.build.name);
                let _ = std::fs::remove_dir_all(&dir);
                continue;
            }
        };
        let mut counts: BTreeMap<CellId, BTreeMap<u64, u64>> = BTreeMap::new();
        for line in labels.lines() {
            // dump,<k>,iters,<config>,<path>,<shape>,<size>,<ops>,<n>
            let Some(rest) = line.strip_prefix("dump,") else {
                continue;
            };
            let Some((k, label)) = rest.split_once(',') else {
                continue;
            };
            if label == "-" {
                continue;
            }
            let Some((iters_part, _n)) = label.rsplit_once(',') else {
                continue;
            };
            let (cell, ops) = sweep::parse_iters(iters_part)
                .ok_or_else(|| format!("bad callgrind label {line:?}"))?;
            let dump = dir.join(format!("cg.out.{k}"));
            let text =
                std::fs::read_to_string(&dump).map_err(|e| format!("{}: {e}", dump.display()))?;
            let total = sweep::parse_callgrind_total(&text)
                .ok_or_else(|| format!("{}: no totals", dump.display()))?;
            counts.entry(cell).or_default().insert(ops, total);
        }
        for (cell, m) in counts {
            if let (Some(&a), Some(&b)) = (m.get(&(n as u64)), m.get(&(2 * n as u64))) {
                if !configs.contains(&cell.config) {
                    configs.push(cell.config.clone());
                }
                per_op.insert(cell, sweep::per_op(a, b, n as u64));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    let cols: Vec<String> = sweep::columns(&configs);
    let mut report = String::new();
    let _ = writeln!(
        report,
        "instructions per operation (valgrind --tool=callgrind, Ir): (count at {} ops − count at \
         {n} ops) / {n}; alloc = one allocation (frees outside the count), pair = alloc + free",
        2 * n
    );
    let _ = writeln!(report, "command: {}", command_line(opts));
    if !failed.is_empty() {
        let _ = writeln!(
            report,
            "left out (the program aborts under valgrind): {}",
            failed.join(", ")
        );
    }
    let mut csv = String::from("path,shape,size,config,instructions_per_op\n");
    for path in AllocPath::ALL {
        for shape in Shape::ALL {
            let _ = writeln!(report);
            let _ = writeln!(
                report,
                "{}/{}: instructions per {}",
                path.name(),
                shape.name(),
                if shape == Shape::Alloc {
                    "allocation"
                } else {
                    "alloc+free pair"
                }
            );
            let mut lines = vec![{
                let mut h = vec!["size (B)".to_string()];
                h.extend(cols.iter().cloned());
                h.push("spec/generic".into());
                h
            }];
            let mut geo: Vec<Vec<f64>> = vec![Vec::new(); cols.len()];
            for size in SIZES {
                let mut l = vec![size.to_string()];
                let mut vals = Vec::new();
                for (i, c) in cols.iter().enumerate() {
                    let v = per_op
                        .get(&CellId {
                            config: c.clone(),
                            path,
                            shape,
                            size,
                        })
                        .copied()
                        .unwrap_or(f64::NAN);
                    geo[i].push(v);
                    vals.push(v);
                    l.push(if v.is_nan() {
                        "-".into()
                    } else {
                        format!("{v:.1}")
                    });
                    let _ = writeln!(csv, "{},{},{size},{c},{v:.3}", path.name(), shape.name());
                }
                let ratio = |name: &str| cols.iter().position(|c| c == name).map(|i| vals[i]);
                l.push(match (ratio(SPECIALISED), ratio(GENERIC)) {
                    (Some(s), Some(g)) => sweep::fmt_ratio(s / g),
                    _ => "-".into(),
                });
                lines.push(l);
            }
            let mut l = vec!["geomean".to_string()];
            for g in &geo {
                l.push(format!("{:.1}", stats::geomean(g)));
            }
            let gi = |name: &str| cols.iter().position(|c| c == name);
            l.push(match (gi(SPECIALISED), gi(GENERIC)) {
                (Some(s), Some(g)) => {
                    sweep::fmt_ratio(stats::geomean(&geo[s]) / stats::geomean(&geo[g]))
                }
                _ => "-".into(),
            });
            lines.push(l);
            report.push_str(&align(&lines));
        }
    }
    print!("{report}");
    let txt = opts.out.join("callgrind.txt");
    let csv_path = opts.out.join("callgrind.csv");
    std::fs::write(&txt, &report).map_err(|e| format!("{}: {e}", txt.display()))?;
    std::fs::write(&csv_path, csv).map_err(|e| format!("{}: {e}", csv_path.display()))?;
    eprintln!(
        "[sweep] callgrind tables: {}; CSV: {}",
        txt.display(),
        csv_path.display()
    );
    Ok(())
}

/// Right-aligns columns (the first left-aligned).
fn align(lines: &[Vec<String>]) -> String {
    let cols = lines.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|i| {
            lines
                .iter()
                .filter_map(|l| l.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for l in lines {
        let mut s = String::new();
        for (i, c) in l.iter().enumerate() {
            let pad = " ".repeat(widths[i] - c.chars().count());
            if i == 0 {
                s.push_str(c);
                s.push_str(&pad);
            } else {
                s.push_str("  ");
                s.push_str(&pad);
                s.push_str(c);
            }
        }
        let _ = writeln!(out, "{}", s.trim_end());
    }
    out
}

// ---------------------------------------------------------------------------
// Binary size
// ---------------------------------------------------------------------------

fn binsize(opts: &Opts) -> Result<(), String> {
    let dir = opts.out.join("binsize");
    let mut rows = Vec::new();
    for (label, features) in [
        ("specialised", &[][..]),
        ("opt-out", &["no-size-specialized"][..]),
    ] {
        let target = dir.join(label);
        eprintln!(
            "[sweep] building examples/nm_probe.rs ({label}) into {}",
            target.display()
        );
        cargo_build("specalloc", &["--example", "nm_probe"], features, &target)?;
        let bin = target.join("release").join("examples").join("nm_probe");
        let stripped = dir.join(format!("nm_probe-{label}.stripped"));
        output(Command::new("strip").arg("-o").arg(&stripped).arg(&bin))?;
        let size = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.len())
                .map_err(|e| format!("{}: {e}", p.display()))
        };
        let nm = output(
            Command::new("nm")
                .args(["-S", "-C", "--defined-only"])
                .arg(&bin),
        )?;
        let (routines, bytes) = sweep::routine_bytes(&nm);
        rows.push((label, size(&bin)?, size(&stripped)?, routines, bytes));
    }
    let mut report = String::new();
    let _ = writeln!(
        report,
        "binary-size cost of specialisation: examples/nm_probe.rs (ten size classes through \
         spec::boxed), built with and without the no-size-specialized switch"
    );
    let _ = writeln!(report, "command: {}", command_line(opts));
    let mut lines = vec![vec![
        "build".to_string(),
        "as built (B)".into(),
        "stripped (B)".into(),
        "routines (nm)".into(),
        "routine code (B)".into(),
    ]];
    for (label, built, stripped, routines, bytes) in &rows {
        lines.push(vec![
            label.to_string(),
            built.to_string(),
            stripped.to_string(),
            routines.to_string(),
            bytes.to_string(),
        ]);
    }
    let (a, b) = (&rows[0], &rows[1]);
    lines.push(vec![
        "difference".into(),
        format!("{:+}", a.1 as i64 - b.1 as i64),
        format!("{:+}", a.2 as i64 - b.2 as i64),
        format!("{:+}", a.3 as i64 - b.3 as i64),
        format!("{:+}", a.4 as i64 - b.4 as i64),
    ]);
    report.push_str(&align(&lines));
    // The sweep worker's routines, if it has been built.
    let worker = opts
        .out
        .join("builds")
        .join(SPECIALISED)
        .join("release")
        .join("sweep_worker");
    if let Ok(nm) = output(
        Command::new("nm")
            .args(["-S", "-C", "--defined-only"])
            .arg(&worker),
    ) {
        let (routines, bytes) = sweep::routine_bytes(&nm);
        let _ = writeln!(
            report,
            "sweep_worker (specialised build, every swept size on both paths): {routines} \
             routines, {bytes} bytes of routine code"
        );
    }
    print!("{report}");
    let txt = opts.out.join("binsize.txt");
    std::fs::write(&txt, &report).map_err(|e| format!("{}: {e}", txt.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn cli() {
        let o = parse_args(args(&[])).unwrap();
        assert_eq!((o.mode, o.rounds, o.target_us), (Mode::Sweep, 30, 2000));
        let o = parse_args(args(&["--quick"])).unwrap();
        assert_eq!((o.rounds, o.target_us), (5, 500));
        let o = parse_args(args(&["--quick", "--rounds", "7", "--no-peers"])).unwrap();
        assert_eq!(o.rounds, 7);
        assert!(!o.peers);
        assert_eq!(
            parse_args(args(&["--callgrind"])).unwrap().mode,
            Mode::Callgrind
        );
        assert!(parse_args(args(&["--rounds", "0"])).is_err());
        assert!(parse_args(args(&["--bogus"])).is_err());
        assert!(parse_args(args(&["--help"]))
            .unwrap_err()
            .starts_with("usage"));
    }

    #[test]
    fn alignment() {
        let t = align(&[
            vec!["a".into(), "bb".into()],
            vec!["ccc".into(), "d".into()],
        ]);
        assert_eq!(t, "a    bb\nccc   d\n");
    }
}
