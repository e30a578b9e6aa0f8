//! The real-workload suite: programs that allocate the way real Rust does
//! (`specalloc_bench::realworld`: a serde_json document tree, syn parsing
//! Rust source, `BTreeMap`/`HashMap` churn with short strings, a
//! producer/consumer over a channel with 1, 2, 4 and 8 producers, a
//! larson-style server whose worker threads hand their objects on to new
//! threads and exit, text processing, a graph search with boxed trees, trees
//! and buffers that grow and shrink), each run under specalloc,
//! the system allocator, mimalloc, jemalloc, tcmalloc and snmalloc.
//!
//! # How
//!
//! 1. **Build** `src/bin/realworld_worker.rs` once per allocator, each with
//!    exactly its `global-*` feature (one `cargo build` each, in the driver's
//!    target directory, which keeps each feature set's artifacts apart; the
//!    binary copied to `<out>/workers/<allocator>/`), and check each binary: it must describe
//!    itself as that allocator, and `nm` must find that allocator's code
//!    and no other's (a build that fails is refused and left out). tcmalloc has no Rust
//!    crate here: it is preloaded (`LD_PRELOAD`, Debian's `libtcmalloc-minimal4`) into the
//!    system allocator's worker, whose `malloc` it then serves.
//! 2. **Rounds**: one untimed warm-up round, then `--rounds` rounds; each
//!    round runs every (program, configuration) once, as a fresh worker
//!    process, in a freshly shuffled order. The configurations are the
//!    allocators and `specalloc A/A`, specalloc's binary run again as a
//!    configuration of its own: the control, whose true difference is zero.
//! 3. **Checksums**: every run of a program, under every allocator, must
//!    print the same checksum; any difference stops the driver with an
//!    error.
//! 4. **Tables** (markdown): per program, wall time `median ± spread` (ms),
//!    specalloc's ratio of medians to the fastest peer (`~` when the
//!    Mann-Whitney p ≥ 0.05), the A/A difference; peak RSS (median of
//!    `getrusage` `ru_maxrss` of the worker) and specalloc's ratio to the
//!    lowest peer.
//!
//! `--callgrind` instead runs every program once per allocator under
//! `valgrind --tool=callgrind` at its quick scale and reports total
//! instructions and the allocator's: the inclusive cost of the
//! `__rust_alloc`, `__rust_dealloc`, `__rust_realloc` and
//! `__rust_alloc_zeroed` shims. snmalloc is left out there: it does not run
//! under valgrind.
//!
//! # Running
//!
//! ```text
//! cargo run --release -p specalloc-bench --features peers --bin realworld              # ~7 min
//! cargo run --release -p specalloc-bench --features peers --bin realworld -- --quick   # ~1 min
//! cargo run --release -p specalloc-bench --features peers --bin realworld -- --callgrind
//! ```
//!
//! `REALWORLD_BEFORE=<path>` adds an earlier build of specalloc's worker (another checkout's
//! `target/release/realworld_worker`, built with `cargo build --release -p specalloc-bench
//! --bin realworld_worker`) to the rounds as `specalloc before`, on the programs it has; the
//! wall-time table then gives specalloc's ratio to it.
//!
//! The peers need `--features peers` (snmalloc needs a C++ compiler, no
//! `cmake`). Output: the tables on stdout and in `<out>/realworld.md`
//! (`<out>/callgrind.md` for `--callgrind`), raw samples in
//! `<out>/realworld.csv`, the chart of wall time per program relative to
//! glibc's (the `system` worker) in `<out>/realworld.svg`; `<out>` is
//! `target/realworld` unless `--out`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use specalloc_bench::chart;
use specalloc_bench::cli::{self, Common, Token, Usage};
use specalloc_bench::harness::SplitMix64;
use specalloc_bench::realworld::report::{
    self, Instructions, RunLine, Samples, AA, BEFORE, SPECALLOC,
};
use specalloc_bench::realworld::{Program, PROGRAMS};
use specalloc_bench::table;
use specalloc_bench::workers;

/// What the driver does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Timed rounds.
    Time,
    /// Instruction counts under callgrind.
    Callgrind,
    /// Build and check the workers, run nothing.
    Verify,
}

/// The command line.
#[derive(Clone, Debug)]
struct Opts {
    mode: Mode,
    quick: bool,
    rounds: usize,
    seed: u64,
    out: PathBuf,
    peers: bool,
    only: Vec<String>,
    args: Vec<String>,
}

/// The `programs:` lines of the usage: every program of the suite, wrapped.
fn program_list() -> String {
    let mut out = String::from("programs:");
    let mut line = out.len();
    for (i, p) in PROGRAMS.iter().enumerate() {
        let sep = if i + 1 < PROGRAMS.len() { "," } else { "\n" };
        if line + 1 + p.name.len() + sep.len() > 90 {
            out.push_str("\n         ");
            line = 9;
        }
        out.push(' ');
        out.push_str(p.name);
        out.push_str(sep);
        line += 1 + p.name.len() + sep.len();
    }
    out
}

fn usage() -> Usage {
    Usage {
        name: "realworld",
        synopsis: "[--quick] [--rounds N] [--seed N] [--out DIR] [--only NAMES] [--no-peers]\n\
                   --callgrind [--only NAMES] | --verify",
        flags: Common::help(
            "3 rounds at each program's quick scale (about a minute)",
            10,
            "output directory (default target/realworld)",
        ) + "  --only NAMES   only these programs (comma-separated; `pipeline` = all four)\n\
             \x20 --no-peers     leave the peers out (mimalloc, jemalloc and snmalloc need --features peers)\n\
             \x20 --callgrind    instructions (total and allocator-only) under valgrind, at the quick scale\n\
             \x20 --verify       build and check every worker, run nothing\n"
            + &program_list()
            + "environment: REALWORLD_BEFORE=PATH runs an earlier build of specalloc's worker\n\
             \x20 (its target/release/realworld_worker) in the same rounds, as `specalloc before`\n",
    }
}

fn parse_args(args: Vec<String>) -> Result<Opts, cli::Stop> {
    let mut common = Common::default();
    let mut o = Opts {
        mode: Mode::Time,
        quick: false,
        rounds: 10,
        seed: 0x5eed_a110c,
        out: workers::target_dir().join("realworld"),
        peers: cfg!(feature = "peers"),
        only: Vec::new(),
        args: args.clone(),
    };
    cli::parse(&usage(), args, |arg, p| {
        if common.take(arg, p)? {
            return Ok(true);
        }
        let Token::Flag(flag) = arg else {
            return Ok(false);
        };
        match flag.as_str() {
            "--callgrind" => o.mode = Mode::Callgrind,
            "--verify" => o.mode = Mode::Verify,
            "--no-peers" => o.peers = false,
            "--only" => {
                let v: String = cli::value(p)?;
                for name in v.split(',').filter(|n| !n.is_empty()) {
                    let known = PROGRAMS.iter().any(|q| q.name.starts_with(name));
                    if !known {
                        return Err(format!("--only: no program {name:?}").into());
                    }
                    o.only.push(name.to_string());
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    o.quick = common.quick;
    if o.quick {
        o.rounds = 3;
    }
    if let Some(n) = common.rounds {
        o.rounds = n as usize;
    }
    o.seed = common.seed.unwrap_or(o.seed);
    o.out = common.out.unwrap_or(o.out);
    Ok(o)
}

fn main() {
    let opts = match parse_args(std::env::args().skip(1).collect()) {
        Ok(o) => o,
        Err(stop) => stop.exit(),
    };
    if !cfg!(feature = "peers") {
        eprintln!("note: built without `--features peers`: only specalloc and system");
    }
    let result = prepare(&opts).and_then(|workers| match opts.mode {
        Mode::Time => time(&opts, &workers),
        Mode::Callgrind => callgrind(&opts, &workers),
        Mode::Verify => Ok(()),
    });
    if let Err(e) = result {
        eprintln!("realworld: error: {e}");
        std::process::exit(1);
    }
}

/// The programs selected by `--only` (all without it).
fn programs(opts: &Opts) -> Vec<&'static Program> {
    PROGRAMS
        .iter()
        .filter(|p| {
            opts.only.is_empty() || opts.only.iter().any(|n| p.name.starts_with(n.as_str()))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Build and check
// ---------------------------------------------------------------------------

/// A worker built for one allocator, and checked.
struct Worker {
    /// The name of its configuration: the allocator, or [`BEFORE`].
    name: &'static str,
    /// The allocator its result lines name.
    global: &'static str,
    bin: PathBuf,
    /// The programs it has (an earlier build may lack the newer ones); `None`: all.
    has: Option<Vec<String>>,
    /// A C allocator preloaded into it (`LD_PRELOAD`): tcmalloc into the system build.
    preload: Option<PathBuf>,
}

impl Worker {
    /// `bin` with `args`, under the worker's preload.
    fn command(&self, bin: &Path) -> Command {
        let mut c = Command::new(bin);
        if let Some(lib) = &self.preload {
            c.env("LD_PRELOAD", lib);
        }
        c
    }

    fn runs(&self, program: &Program) -> bool {
        self.has
            .as_ref()
            .is_none_or(|h| h.iter().any(|n| n == program.name))
    }
}

/// The symbol `install!` defines: present (by this exact name) only where specalloc is the
/// global allocator.
const INSTALLED_MARK: &str = "specalloc_install_mark";

/// A symbol (demangled, as `nm -C` prints it) only a build with this
/// allocator as the global allocator contains.
fn marker(allocator: &str) -> &'static str {
    match allocator {
        SPECALLOC => INSTALLED_MARK,
        "mimalloc" => "mi_malloc_aligned",
        "jemalloc" => "_rjem_mallocx",
        "snmalloc" => "sn_rust_alloc",
        _ => "",
    }
}

/// Builds every allocator's worker and checks it; fails if specalloc's is
/// refused (the others are left out with a message).
fn prepare(opts: &Opts) -> Result<Vec<Worker>, String> {
    let mut builds = vec![(SPECALLOC, ""), ("system", "global-system")];
    if opts.peers {
        builds.extend([
            ("mimalloc", "global-mimalloc"),
            ("jemalloc", "global-jemalloc"),
            ("snmalloc", "global-snmalloc"),
        ]);
    }
    let mut out = Vec::new();
    let mut report = String::from(
        "build checks: each worker built with exactly its allocator's feature, then checked\n",
    );
    let target = workers::target_dir();
    let n = builds.len();
    for (k, (name, feature)) in builds.into_iter().enumerate() {
        let features: Vec<&str> = [feature].into_iter().filter(|f| !f.is_empty()).collect();
        let bin = workers::build_worker(
            &workers::progress("realworld", k + 1, n, name, &features),
            "specalloc-bench",
            "realworld_worker",
            &features,
            &target,
            &opts.out.join("workers").join(name).join("realworld_worker"),
        )?;
        let problems = check(name, &bin)?;
        let verdict = if problems.is_empty() {
            "ok".to_string()
        } else {
            format!("REFUSED: {}", problems.join("; "))
        };
        let _ = writeln!(report, "  {name:<10} {verdict}");
        if problems.is_empty() {
            out.push(Worker {
                name,
                global: name,
                bin,
                has: None,
                preload: None,
            });
        } else if name == SPECALLOC {
            print!("{report}");
            return Err("specalloc's worker was refused; nothing to compare".into());
        }
    }
    if opts.peers {
        if let Some(w) = tcmalloc(&out, &mut report)? {
            out.push(w);
        }
    }
    if let Some(bin) = std::env::var_os(BEFORE_VAR) {
        let bin = PathBuf::from(bin);
        let desc = workers::output(Command::new(&bin).arg("describe"))?;
        if desc.trim() != format!("global,{SPECALLOC}") {
            return Err(format!(
                "{BEFORE_VAR}={}: describes itself as {:?}, not as specalloc's worker",
                bin.display(),
                desc.trim()
            ));
        }
        let list = workers::output(Command::new(&bin).arg("list"))?;
        let has: Vec<String> = list
            .lines()
            .filter_map(|l| l.split(',').next())
            .filter(|n| PROGRAMS.iter().any(|p| p.name == *n))
            .map(str::to_string)
            .collect();
        let _ = writeln!(
            report,
            "  {BEFORE:<10} {} ({} of the programs)",
            bin.display(),
            has.len()
        );
        out.push(Worker {
            name: BEFORE,
            global: SPECALLOC,
            bin,
            has: Some(has),
            preload: None,
        });
    }
    print!("{report}");
    Ok(out)
}

/// tcmalloc (Debian's `libtcmalloc-minimal4`, or the library `CTABLE_TCMALLOC` names, as for
/// `ctable`) preloaded into the system allocator's worker, whose `malloc` it then serves:
/// `None`, with a line in `report`, when the library or the system worker is missing.
fn tcmalloc(built: &[Worker], report: &mut String) -> Result<Option<Worker>, String> {
    let lib = std::env::var_os("CTABLE_TCMALLOC").map_or_else(
        || PathBuf::from("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"),
        PathBuf::from,
    );
    let Some(system) = built.iter().find(|w| w.name == "system") else {
        let _ = writeln!(
            report,
            "  tcmalloc   left out (no system worker to preload it into)"
        );
        return Ok(None);
    };
    if !lib.exists() {
        let _ = writeln!(
            report,
            "  tcmalloc   left out ({} not found)",
            lib.display()
        );
        return Ok(None);
    }
    let w = Worker {
        name: "tcmalloc",
        global: "system",
        bin: system.bin.clone(),
        has: None,
        preload: Some(lib.clone()),
    };
    // The loader says on stderr when it cannot preload a library, and goes on without it.
    let out = w
        .command(&w.bin)
        .arg("describe")
        .output()
        .map_err(|e| format!("{}: {e}", w.bin.display()))?;
    if !out.status.success() || !out.stderr.is_empty() {
        let _ = writeln!(
            report,
            "  tcmalloc   REFUSED: preloading {} said {:?}",
            lib.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return Ok(None);
    }
    let _ = writeln!(
        report,
        "  tcmalloc   ok ({} preloaded into system's worker)",
        lib.display()
    );
    Ok(Some(w))
}

/// The environment variable naming an earlier build of specalloc's worker, run as
/// [`BEFORE`] in the same rounds.
const BEFORE_VAR: &str = "REALWORLD_BEFORE";

/// Why `bin` is not a worker with `allocator` as its global allocator
/// (empty if it is).
fn check(allocator: &str, bin: &Path) -> Result<Vec<String>, String> {
    let mut problems = Vec::new();
    let desc = workers::output(Command::new(bin).arg("describe"))?;
    if desc.trim() != format!("global,{allocator}") {
        problems.push(format!("describes itself as {:?}", desc.trim()));
    }
    let nm = workers::output(Command::new("nm").args(["-C", "--defined-only"]).arg(bin))?;
    for other in [SPECALLOC, "mimalloc", "jemalloc", "snmalloc"] {
        let present = if other == SPECALLOC {
            // Installed: `install!`'s strong install mark. The runtime's code alone is no sign:
            // a program that depends on specalloc without installing it links some of it (the
            // mark's default, the size-specialised routines its annotated code calls).
            nm.lines()
                .any(|l| l.split_whitespace().nth(2) == Some(INSTALLED_MARK))
        } else {
            nm.contains(marker(other))
        };
        if other == allocator && !present {
            problems.push(format!("nm: no {}", marker(other)));
        } else if other != allocator && present {
            problems.push(format!("nm: {other}'s code is linked in"));
        }
    }
    Ok(problems)
}

// ---------------------------------------------------------------------------
// Runs
// ---------------------------------------------------------------------------

/// Runs `program` once under `worker` at `scale`; checks its checksum
/// against the program's first one (`seen`, under [`checksum_key`]).
fn run_once(
    worker: &Worker,
    program: &Program,
    scale: u32,
    seen: &mut BTreeMap<String, (u64, String)>,
    label: &str,
) -> Result<RunLine, String> {
    let text = workers::output(
        worker
            .command(&worker.bin)
            .args(["run", program.name, "--scale"])
            .arg(scale.to_string()),
    )?;
    let run = RunLine::parse(&text)
        .ok_or_else(|| format!("{}: no result line in {text:?}", worker.name))?;
    if run.global != worker.global {
        return Err(format!("{}'s worker ran under {}", worker.name, run.global));
    }
    checksum(seen, &checksum_key(worker, program), run.checksum, label)?;
    Ok(run)
}

/// Under which name `worker`'s checksums of `program` are checked: the program's, for every
/// allocator's build of the suite; its own for an earlier build ([`BEFORE`]), whose program
/// may read other input (`syn` parses this crate's own sources) and is then left out of the
/// comparison (see [`differs_before`]).
fn checksum_key(worker: &Worker, program: &Program) -> String {
    if worker.name == BEFORE {
        before_key(program)
    } else {
        program.name.to_string()
    }
}

/// The name the earlier build's checksums of `program` are checked under.
fn before_key(program: &Program) -> String {
    format!("{} ({BEFORE})", program.name)
}

/// Whether the earlier build's `program` printed another checksum than this build's: then it
/// is another computation, and its times are not compared.
fn differs_before(seen: &BTreeMap<String, (u64, String)>, program: &Program) -> bool {
    let now = seen.get(program.name).map(|s| s.0);
    let before = seen.get(&before_key(program)).map(|s| s.0);
    now.is_some() && before.is_some() && now != before
}

/// The line that says which programs the earlier build was left out of, and why.
fn differs_note(left_out: &[&str]) -> Option<String> {
    (!left_out.is_empty()).then(|| {
        format!(
            "{BEFORE}: left out of {}: that build's program computes another checksum (it reads \
             other input), so it is not the same program",
            left_out.join(", ")
        )
    })
}

/// Records the first checksum under `key` (a program); any later one must equal it.
fn checksum(
    seen: &mut BTreeMap<String, (u64, String)>,
    program: &str,
    sum: u64,
    label: &str,
) -> Result<(), String> {
    let (first, by) = seen
        .entry(program.to_string())
        .or_insert((sum, label.to_string()));
    if *first != sum {
        return Err(format!(
            "CHECKSUM MISMATCH in {program}: {by} printed {first:016x}, {label} printed {sum:016x}"
        ));
    }
    Ok(())
}

/// The (configuration, worker) pairs of a round: every allocator, and
/// specalloc's worker again as the A/A control.
fn configurations(workers: &[Worker]) -> Vec<(String, &Worker)> {
    let mut v: Vec<(String, &Worker)> = workers.iter().map(|w| (w.name.to_string(), w)).collect();
    v.insert(1, (AA.to_string(), &workers[0]));
    v
}

/// The timed rounds and their tables.
fn time(opts: &Opts, workers: &[Worker]) -> Result<(), String> {
    let programs = programs(opts);
    let configs = configurations(workers);
    let mut cells: Vec<(&Program, usize)> = Vec::new();
    for p in &programs {
        cells.extend(
            (0..configs.len())
                .filter(|&c| configs[c].1.runs(p))
                .map(|c| (*p, c)),
        );
    }
    let scale = |p: &Program| {
        if opts.quick {
            p.quick_scale
        } else {
            p.default_scale
        }
    };
    let mut rng = SplitMix64(opts.seed);
    let mut seen = BTreeMap::new();
    let mut samples = Samples::default();
    let mut csv =
        String::from("program,config,round,position,scale,checksum,wall_ns,peak_rss_kb,user_us,sys_us,minor_faults\n");
    let load_start = workers::loadavg();
    let start = Instant::now();
    // Round 0 is the warm-up: checked, not counted.
    let mut left_out: Vec<&str> = Vec::new();
    for round in 0..=opts.rounds {
        if round == 1 {
            left_out = programs
                .iter()
                .filter(|p| differs_before(&seen, p))
                .map(|p| p.name)
                .collect();
        }
        rng.shuffle(&mut cells);
        eprintln!(
            "[realworld] round {round}/{}{} ({:.0} s)",
            opts.rounds,
            if round == 0 { " (warm-up)" } else { "" },
            start.elapsed().as_secs_f64()
        );
        for (position, &(p, c)) in cells.iter().enumerate() {
            let (config, worker) = &configs[c];
            let label = format!("{config} (round {round})");
            if round > 0 && worker.name == BEFORE && left_out.contains(&p.name) {
                continue;
            }
            let run = run_once(worker, p, scale(p), &mut seen, &label)?;
            if round > 0 {
                samples.add(p.name, config, &run);
                let _ = writeln!(
                    csv,
                    "{},{config},{round},{position},{},{:016x},{},{},{},{},{}",
                    p.name,
                    scale(p),
                    run.checksum,
                    run.wall_ns,
                    run.rss_kb,
                    run.user_us,
                    run.sys_us,
                    run.minor_faults
                );
            }
        }
    }
    let config_names: Vec<String> = configs.iter().map(|c| c.0.clone()).collect();
    let mut md = time_report(opts, &programs, &config_names, &samples, &load_start);
    if let Some(note) = differs_note(&left_out) {
        let _ = writeln!(md, "\n{note}");
    }
    print!("{md}");
    write(&opts.out.join("realworld.md"), &md)?;
    write(&opts.out.join("realworld.csv"), &csv)?;
    let svg = opts.out.join("realworld.svg");
    let names: Vec<&str> = programs.iter().map(|p| p.name).collect();
    let note = format!(
        "{}\ncommit {}; {}",
        if opts.quick {
            QUICK_NOTE.to_string()
        } else {
            format!("median of {} interleaved rounds", opts.rounds)
        },
        workers::commit(),
        workers::machine()
    );
    let chart = chart::ratio_chart(
        &svg,
        "Real Rust programs: wall time relative to glibc's malloc (System; below 1: faster)",
        &note,
        "wall time / glibc's (median)",
        &names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        &report::relative_wall(&samples, &names, &config_names, "system"),
    );
    eprintln!(
        "[realworld] tables: {}; raw samples: {}",
        opts.out.join("realworld.md").display(),
        opts.out.join("realworld.csv").display()
    );
    match chart {
        Ok(()) => eprintln!(
            "[realworld] chart of time per program relative to glibc: {}",
            svg.display()
        ),
        Err(e) => eprintln!("[realworld] chart not written: {e}"),
    }
    Ok(())
}

/// What `--quick` prints above and under its tables, and on its chart.
const QUICK_NOTE: &str =
    "--quick: a few short rounds at small scales, a smoke test: NOT A MEASUREMENT";

/// The markdown report of the timed rounds: wall-time and peak-RSS tables.
fn time_report(
    opts: &Opts,
    programs: &[&Program],
    configs: &[String],
    samples: &Samples,
    load_start: &str,
) -> String {
    let names: Vec<&str> = programs.iter().map(|p| p.name).collect();
    let mut md = String::new();
    if opts.quick {
        let _ = writeln!(md, "**{QUICK_NOTE}**\n");
    }
    let _ = writeln!(md, "command: `{}`", command_line(opts));
    let _ = writeln!(
        md,
        "machine: {}; load average (1/5/15 min): {load_start} before the rounds, {} after",
        workers::machine(),
        workers::loadavg()
    );
    let _ = writeln!(
        md,
        "{} rounds (+1 warm-up), each program × configuration once per round in shuffled order; \
         every run's checksum agreed\n",
        opts.rounds
    );
    let _ = writeln!(
        md,
        "wall time, ms (median ± spread); specalloc / fastest peer: ratio of medians \
         (~: Mann-Whitney p ≥ 0.05); A/A Δ: specalloc's second configuration against the first\n"
    );
    md.push_str(&table::markdown(&report::wall_table(
        samples, &names, configs,
    )));
    let _ = writeln!(
        md,
        "\nuser and sys CPU time (getrusage of the worker: the whole process), ms, median; \
         specalloc / fastest peer: its sys time against that of the peer with the lowest wall \
         median\n"
    );
    md.push_str(&table::markdown(&report::cpu_table(
        samples, &names, configs,
    )));
    let _ = writeln!(
        md,
        "\nminor page faults (getrusage ru_minflt of the worker), median; specalloc / fastest \
         peer: against the peer with the lowest wall median\n"
    );
    md.push_str(&table::markdown(&report::faults_table(
        samples, &names, configs,
    )));
    let _ = writeln!(
        md,
        "\npeak RSS (getrusage ru_maxrss of the worker), MiB, median\n"
    );
    md.push_str(&table::markdown(&report::rss_table(
        samples, &names, configs,
    )));
    let _ = writeln!(md, "\nscales: {}", scales(programs, opts.quick));
    if opts.quick {
        let _ = writeln!(md, "\n**{QUICK_NOTE}**");
    }
    md
}

/// `name=scale` of every program run.
fn scales(programs: &[&Program], quick: bool) -> String {
    programs
        .iter()
        .map(|p| {
            format!(
                "{}={}",
                p.name,
                if quick {
                    p.quick_scale
                } else {
                    p.default_scale
                }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Instruction counts under callgrind, at each program's quick scale.
fn callgrind(opts: &Opts, workers: &[Worker]) -> Result<(), String> {
    let programs = programs(opts);
    let dir = opts.out.join("callgrind");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut counts: BTreeMap<(String, String), Instructions> = BTreeMap::new();
    let mut seen = BTreeMap::new();
    let mut configs = Vec::new();
    let mut left_out: Vec<&str> = Vec::new();
    for w in workers.iter().filter(|w| w.name != "snmalloc") {
        configs.push(w.name.to_string());
        for p in programs.iter().filter(|p| w.runs(p)) {
            eprintln!("[realworld] callgrind: {} under {}", p.name, w.name);
            let file = dir.join(format!("{}.{}.out", p.name, w.name));
            let text = workers::output(
                w.command(Path::new("valgrind"))
                    .arg("--tool=callgrind")
                    // `threads` keeps hundreds of threads alive at once; valgrind stops at 500.
                    .arg("--max-threads=2048")
                    .arg(format!("--callgrind-out-file={}", file.display()))
                    .arg(&w.bin)
                    .args(["run", p.name, "--scale"])
                    .arg(p.quick_scale.to_string()),
            )?;
            let run = RunLine::parse(&text).ok_or_else(|| format!("no result line in {text:?}"))?;
            checksum(
                &mut seen,
                &checksum_key(w, p),
                run.checksum,
                &format!("{} under callgrind", w.name),
            )?;
            if differs_before(&seen, p) {
                left_out.push(p.name);
                let _ = std::fs::remove_file(&file);
                continue;
            }
            let cg =
                std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let i = report::callgrind_instructions(&cg)
                .ok_or_else(|| format!("{}: no totals", file.display()))?;
            counts.insert((p.name.to_string(), w.name.to_string()), i);
            let _ = std::fs::remove_file(&file);
        }
    }
    let names: Vec<&str> = programs.iter().map(|p| p.name).collect();
    let mut md = String::new();
    if opts.quick {
        let _ = writeln!(md, "**{QUICK_NOTE}**\n");
    }
    let _ = writeln!(md, "command: `{}`", command_line(opts));
    let _ = writeln!(md, "machine: {}", workers::machine());
    let _ = writeln!(
        md,
        "instructions (valgrind --tool=callgrind, Ir), one run per program and allocator at the \
         quick scale ({}); every checksum agreed. snmalloc is left out: it does not run under \
         valgrind.\n",
        scales(&programs, true)
    );
    let _ = writeln!(md, "total instructions, millions\n");
    md.push_str(&table::markdown(&report::instruction_table(
        &counts,
        &names,
        &configs,
        |i| i.total,
    )));
    let _ = writeln!(
        md,
        "\nallocator-only instructions, millions: inclusive cost of __rust_alloc, __rust_dealloc, \
         __rust_realloc, __rust_alloc_zeroed\n"
    );
    md.push_str(&table::markdown(&report::instruction_table(
        &counts,
        &names,
        &configs,
        |i| i.alloc,
    )));
    if let Some(note) = differs_note(&left_out) {
        let _ = writeln!(md, "\n{note}");
    }
    print!("{md}");
    write(&opts.out.join("callgrind.md"), &md)
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The command line that reproduces this run.
fn command_line(opts: &Opts) -> String {
    cli::command_line("realworld", &opts.args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Opts, cli::Stop> {
        parse_args(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn flags() {
        let o = parse(&[]).unwrap();
        assert_eq!((o.mode, o.rounds, o.quick), (Mode::Time, 10, false));
        let o = parse(&["--quick", "--only", "json,pipeline"]).unwrap();
        assert_eq!(o.rounds, 3);
        let names: Vec<&str> = programs(&o).iter().map(|p| p.name).collect();
        assert_eq!(
            names,
            ["json", "pipeline1", "pipeline2", "pipeline4", "pipeline8"]
        );
        assert_eq!(parse(&["--quick", "--rounds", "5"]).unwrap().rounds, 5);
        assert_eq!(parse(&["--callgrind"]).unwrap().mode, Mode::Callgrind);
        assert!(matches!(
            parse(&["--only", "nope"]),
            Err(cli::Stop::Error(_))
        ));
        assert!(matches!(parse(&["--csv", "x"]), Err(cli::Stop::Error(_))));
        assert!(matches!(parse(&["--help"]), Err(cli::Stop::Help(_))));
    }

    #[test]
    fn an_earlier_build_is_checked_apart_and_left_out_where_it_differs() {
        let worker = |name| Worker {
            name,
            global: SPECALLOC,
            bin: PathBuf::new(),
            has: None,
            preload: None,
        };
        let (now, before) = (worker(SPECALLOC), worker(BEFORE));
        let json = specalloc_bench::realworld::program("json").unwrap();
        let syn = specalloc_bench::realworld::program("syn").unwrap();
        let mut seen = BTreeMap::new();
        for (w, p, sum) in [
            (&now, json, 1),
            (&before, json, 1),
            (&now, syn, 2),
            (&before, syn, 3),
        ] {
            checksum(&mut seen, &checksum_key(w, p), sum, w.name).unwrap();
        }
        assert!(!differs_before(&seen, json));
        assert!(differs_before(&seen, syn));
        // Its own runs must still agree with each other.
        assert!(checksum(&mut seen, &checksum_key(&before, syn), 4, "again").is_err());
        let note = differs_note(&["syn"]).unwrap();
        assert!(
            note.starts_with("specalloc before: left out of syn"),
            "{note}"
        );
        assert_eq!(differs_note(&[]), None);
    }

    #[test]
    fn checksums_must_agree() {
        let mut seen = BTreeMap::new();
        assert!(checksum(&mut seen, "json", 7, "a").is_ok());
        assert!(checksum(&mut seen, "json", 7, "b").is_ok());
        let e = checksum(&mut seen, "json", 8, "c").unwrap_err();
        assert!(e.contains("CHECKSUM MISMATCH in json: a printed"), "{e}");
    }
}
