//! The scaling table: multi-threaded C programs at 1, 2, 4, 8 and 16 threads on glibc's malloc
//! and on specalloc, mimalloc, jemalloc, tcmalloc and snmalloc, each preloaded (`LD_PRELOAD`),
//! in interleaved rounds, with an A/A control (specalloc twice, under two names).
//!
//! ```sh
//! cargo run --release -p specalloc-bench --bin scaling -- [--rounds N] [--quick] [--threads LIST]
//!     [--programs LIST] [--scale F] [--out DIR]
//! ```
//!
//! The programs (`bench/c/`, each taking its scale and its thread count as arguments; the
//! total work is the same at every thread count, split between the threads, so an allocator
//! that scales finishes as soon at 16 threads as at 1 once the cores are busy):
//!
//! * `larson`: a Larson-style server, threads replacing blocks of a set of their own, the sets
//!   moving to other threads every generation (cross-thread frees, thread churn);
//! * `larsonspawn`: larson as the field's benchmark suite runs it: the main thread allocates
//!   every set, shuffles the blocks and sleeps while the workers free them; each worker starts
//!   its successor and exits without being joined;
//! * `larsonsized`: `larsonspawn` compiled as C++, its blocks from `new[]` and freed by sized
//!   `delete[]`, as the field's larson-sized;
//! * `larsonpool`: `larsonspawn` as a thread pool's server, each worker running to the end with
//!   the set the main thread allocated;
//! * `prodcons`: producer/consumer pairs, every message freed by the other thread of its pair;
//! * `medium`: medium sizes across threads (after rptest): blocks of 8 B to 16 KB replaced at
//!   random, and batches of them sent round a ring to be freed by the next thread;
//! * `xmalloc`: a cross-thread exchange in a ring (after xmalloc-test), every block freed by
//!   the next thread: the free-heavy remote path;
//! * `mallocthread`: glibc's bench-malloc-thread pattern, no block leaving its thread: the
//!   thread-local path under every thread at once;
//! * `falseshare`: false sharing (after cache-scratch): 8-byte objects written over and over
//!   by their threads, the first of them handed over by the main thread; an allocator that
//!   gives neighbouring blocks to different threads loses.
//!
//! The allocators, the rounds and the output check are the C-workload table's
//! ([`specalloc_bench::preload`]). Per program, thread count and allocator: the median wall
//! time and its spread, the throughput (the program's operations per second, in all and per
//! thread), user and system time and peak RSS. The summary gives specalloc's throughput over
//! the best peer's per program and thread count, and the A/A control. On a machine with N
//! cores (`available_parallelism`, printed) the counts above N are oversubscribed (marked `*`).
//! Outputs: the tables on stdout and in `<out>/results.md`, and the throughput per thread count
//! of every program in `<out>/scaling.svg` (`<out>` is `target/scaling` unless `--out`).
//!
//! How long: a round runs each program at each thread count on each allocator (8 × 5 × 7 = 280
//! runs; glibc's take 0.04–1.7 s, about 25 s a round in all, and most peers' less): about 2.5
//! minutes a round on a 2-core machine, so the default 5 rounds take about 12 minutes.
//! `--quick` (2 rounds at a tenth of the work) took 23 s of runs on a loaded 2-core machine,
//! plus building `libspecalloc.so` and snmalloc's shim the first time (minutes); its figures
//! are not a measurement.

use std::path::{Path, PathBuf};

use specalloc_bench::chart::{self, Panel, PanelAxes, Series};
use specalloc_bench::cli::{self, Common, Token, Usage};
use specalloc_bench::preload::{self, median_of, Allocator, Program, Run};
use specalloc_bench::stats::{geomean, spread};
use specalloc_bench::table::{fmt_ns, fmt_ratio, markdown};
use specalloc_bench::workers::{self, commit, machine};

/// A program of the table: its C workload and what it measures.
struct Workload {
    name: &'static str,
    what: &'static str,
    /// Its scale at `--scale 1` (so that glibc's runs take about 0.5–2 s).
    scale: f64,
}

impl Workload {
    /// Its scale argument at `--scale scale`, to six significant digits (`0.3`, not
    /// `0.30000000000000004`).
    fn scale_arg(&self, scale: f64) -> String {
        let x = self.scale * scale;
        let unit = 10f64.powf(5.0 - x.log10().floor());
        format!("{}", (x * unit).round() / unit)
    }
}

const WORKLOADS: [Workload; 9] = [
    Workload {
        name: "larson",
        what: "Larson-style server: threads replace blocks of their own set; the sets move to \
               new threads every generation",
        scale: 3.0,
    },
    Workload {
        name: "larsonspawn",
        what: "larson as the field's suite runs it: the main thread allocates the sets and \
               sleeps; each worker starts its successor and exits unjoined",
        scale: 2.0,
    },
    Workload {
        name: "larsonsized",
        what: "larsonspawn in C++, as the field's larson-sized: blocks from new[], freed by sized \
               delete[]",
        scale: 2.0,
    },
    Workload {
        name: "larsonpool",
        what:
            "larsonspawn as a thread pool's server: each worker runs to the end, keeping its set \
               (the main thread allocated it)",
        scale: 2.0,
    },
    Workload {
        name: "prodcons",
        what: "producer/consumer pairs: every message freed by the other thread of its pair",
        scale: 2.0,
    },
    Workload {
        name: "medium",
        what: "medium sizes across threads (rptest-like): 8 B to 16 KB blocks, batches sent round \
               a ring and freed by the next thread",
        scale: 0.5,
    },
    Workload {
        name: "xmalloc",
        what: "cross-thread exchange in a ring: every block freed by the next thread",
        scale: 1.0,
    },
    Workload {
        name: "mallocthread",
        what: "thread-local churn (glibc's bench-malloc-thread): no block leaves its thread",
        scale: 1.0,
    },
    Workload {
        name: "falseshare",
        what: "false sharing (cache-scratch): 8-byte objects written over and over by their \
               threads",
        scale: 1.0,
    },
];

/// The default thread counts.
const THREADS: [u64; 5] = [1, 2, 4, 8, 16];

/// The note `--quick` prints at the start and beside its figures.
const QUICK_NOTE: &str = "--quick: few rounds, little work, to check that everything runs: NOT \
                          A MEASUREMENT";

/// The command line.
#[derive(Clone, Debug, PartialEq)]
struct Options {
    rounds: usize,
    quick: bool,
    threads: Vec<u64>,
    programs: Vec<&'static str>,
    scale: f64,
    out: Option<PathBuf>,
}

fn usage() -> Usage {
    Usage {
        name: "scaling",
        synopsis: "[--rounds N] [--quick] [--threads LIST] [--programs LIST] [--scale F] \
                   [--out DIR]",
        flags: "  --rounds N       interleaved rounds (default 5: about 12 minutes on a 2-core \
                machine)\n\
                \x20 --quick          2 rounds at a tenth of the work: about a minute once \
                built; a smoke test,\n\
                \x20                  not a measurement\n\
                \x20 --threads LIST   thread counts, comma-separated (default 1,2,4,8,16)\n\
                \x20 --programs LIST  programs, comma-separated (default all: larson, larsonspawn, \
                larsonsized,\n\
                \x20                  larsonpool, prodcons, medium, xmalloc, mallocthread, \
                falseshare)\n\
                \x20 --scale F        multiplies every program's work (default 1; 0.1 with \
                --quick)\n\
                \x20 --out DIR        where results.md and scaling.svg go (default \
                target/scaling)\n\
                \n\
                Runs multi-threaded C workloads (bench/c/) at each thread count on glibc and on \
                specalloc,\n\
                mimalloc, jemalloc, tcmalloc and snmalloc (each LD_PRELOADed, missing ones left \
                out); every\n\
                run's output is checked against glibc's. The first run also builds \
                libspecalloc.so.\n"
            .to_string(),
    }
}

/// A comma-separated list of the current flag's value, each item checked by `item`.
fn list<T>(
    p: &mut cli::Parser,
    item: impl Fn(&str) -> Result<T, String>,
) -> Result<Vec<T>, lexopt::Error> {
    use cli::ValueExt;
    p.value()?
        .parse_with(|s| s.split(',').map(|i| item(i.trim())).collect())
}

fn parse_args(args: Vec<String>) -> Result<Options, cli::Stop> {
    let mut common = Common::default();
    let mut threads = THREADS.to_vec();
    let mut programs: Vec<&'static str> = WORKLOADS.iter().map(|w| w.name).collect();
    let mut scale = None;
    cli::parse(&usage(), args, |arg, p| {
        if matches!(arg, Token::Flag(f) if f == "--seed") {
            return Ok(false);
        }
        if common.take(arg, p)? {
            return Ok(true);
        }
        let Token::Flag(flag) = arg else {
            return Ok(false);
        };
        match flag.as_str() {
            "--threads" => {
                threads = list(p, |s| match s.parse::<u64>() {
                    Ok(n) if (1..=1024).contains(&n) => Ok(n),
                    _ => Err(format!("not a thread count from 1 to 1024: {s}")),
                })?;
                threads.sort_unstable();
                threads.dedup();
            }
            "--programs" => {
                programs = list(p, |s| {
                    WORKLOADS
                        .iter()
                        .find(|w| w.name == s)
                        .map(|w| w.name)
                        .ok_or_else(|| format!("no program {s}"))
                })?;
            }
            "--scale" => {
                use cli::ValueExt;
                scale = Some(p.value()?.parse_with(|s| match s.parse::<f64>() {
                    Ok(f) if f > 0.0 && f.is_finite() => Ok(f),
                    _ => Err(format!("not a positive number: {s}")),
                })?);
            }
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    Ok(Options {
        rounds: common
            .rounds
            .map_or(if common.quick { 2 } else { 5 }, |n| n as usize),
        quick: common.quick,
        threads,
        programs,
        scale: scale.unwrap_or(if common.quick { 0.1 } else { 1.0 }),
        out: common.out,
    })
}

/// One program at one thread count.
struct Case {
    workload: &'static Workload,
    threads: u64,
}

fn main() {
    let opts = match parse_args(std::env::args().skip(1).collect()) {
        Ok(o) => o,
        Err(stop) => stop.exit(),
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = root.canonicalize().unwrap();
    let work = root.join("target/scaling");
    let out = opts.out.clone().unwrap_or_else(|| work.clone());
    for dir in [&work, &out] {
        if let Err(e) = workers::make_dir(dir) {
            eprintln!("scaling: error: {e}");
            std::process::exit(1);
        }
    }
    if opts.quick {
        eprintln!("[scaling] {QUICK_NOTE}");
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    let allocs = preload::allocators("scaling", &root, &preload::work_dir(&root));
    let mut cases = Vec::new();
    let mut programs = Vec::new();
    for w in WORKLOADS.iter().filter(|w| opts.programs.contains(&w.name)) {
        let exe = preload::compiled(&root, w.name, &work.join("bin"));
        for &t in &opts.threads {
            let args = [w.scale_arg(opts.scale), t.to_string()];
            programs.push(Program::c(
                format!("{} at {t} thread{}", w.name, if t == 1 { "" } else { "s" }),
                &exe,
                &args,
                &work,
            ));
            cases.push(Case {
                workload: w,
                threads: t,
            });
        }
    }
    let samples = preload::interleaved("scaling", &programs, &allocs, opts.rounds);
    let ops: Vec<(f64, String)> = samples
        .outputs
        .iter()
        .zip(&programs)
        .map(|(o, p)| {
            operations(&String::from_utf8_lossy(o))
                .unwrap_or_else(|| panic!("{}: no report line in its output", p.name))
        })
        .collect();

    let mut report = preload::report_header("scaling", opts.quick.then_some(QUICK_NOTE));
    let plural = |n: usize, word: &str| format!("{n} {word}{}", if n == 1 { "" } else { "s" });
    report += &format!(
        "\nThis machine has {} (available_parallelism): the runs at more than {} (marked *) are \
         oversubscribed. Every program does the same work at every thread count, split between \
         its threads.\n\n",
        plural(cores, "core"),
        plural(cores, "thread")
    );
    let results = Results {
        cases: &cases,
        allocs: &allocs,
        runs: &samples.runs,
        ops: &ops,
        threads: &opts.threads,
        scale: opts.scale,
        cores,
    };
    report += &results.summary();
    report += &results.details(opts.rounds);

    let svg = out.join("scaling.svg");
    let note = format!(
        "{}; median of {} rounds; {}: oversubscribed right of the dashed line\n\
         commit {}; {}",
        if opts.quick {
            QUICK_NOTE
        } else {
            "interleaved rounds"
        },
        opts.rounds,
        plural(cores, "core"),
        commit(),
        machine()
    );
    let chart = chart::panel_chart(
        &svg,
        "Throughput by thread count (LD_PRELOAD; higher is better)",
        &note,
        &results.axes(),
        &results.panels(),
    );
    println!("{report}");
    let md = out.join("results.md");
    std::fs::write(&md, &report).unwrap();
    println!("table: {}", md.display());
    match chart {
        Ok(()) => println!("chart of throughput by thread count: {}", svg.display()),
        Err(e) => println!("chart not written: {e}"),
    }
    if opts.quick {
        println!("{QUICK_NOTE}");
    }
}

/// The operations a program reports and their unit, from its report line (`xmalloc: 4
/// threads, 4000000 allocations, checksum 12`: 4000000 and `allocations`).
fn operations(out: &str) -> Option<(f64, String)> {
    out.lines().find_map(|l| {
        let fields: Vec<&str> = l.split(", ").collect();
        let [_, ops, checksum] = fields[..] else {
            return None;
        };
        checksum.strip_prefix("checksum ")?;
        let (n, unit) = ops.split_once(' ')?;
        Some((n.parse().ok()?, unit.to_string()))
    })
}

/// The figures of a run, to tabulate.
struct Results<'a> {
    cases: &'a [Case],
    allocs: &'a [Allocator],
    /// `runs[c][k]`: case `c` on allocator `k`.
    runs: &'a [Vec<Vec<Run>>],
    /// Per case, the operations it does and their unit.
    ops: &'a [(f64, String)],
    threads: &'a [u64],
    /// `--scale`: each workload's own scale is multiplied by it.
    scale: f64,
    cores: usize,
}

impl Results<'_> {
    /// Case `c`'s median throughput on allocator `k`, millions of operations per second.
    fn throughput(&self, c: usize, k: usize) -> f64 {
        self.ops[c].0 / median_of(&self.runs[c][k], |r| r.wall) / 1e6
    }

    /// The best peer's throughput (glibc counts as a peer) for case `c`.
    fn best_peer(&self, c: usize) -> f64 {
        (0..self.allocs.len())
            .filter(|&k| self.allocs[k].is_peer())
            .map(|k| self.throughput(c, k))
            .fold(0.0, f64::max)
    }

    fn index(&self, name: &str) -> usize {
        self.allocs.iter().position(|a| a.name == name).unwrap()
    }

    /// The column heading of thread count `t` (`16*` when oversubscribed).
    fn heading(&self, t: u64) -> String {
        let star = if t as usize > self.cores { "*" } else { "" };
        format!("{t}{star}")
    }

    /// The programs, in order, with their cases' indices.
    fn programs(&self) -> Vec<(&'static Workload, Vec<usize>)> {
        let mut v: Vec<(&'static Workload, Vec<usize>)> = Vec::new();
        for (c, case) in self.cases.iter().enumerate() {
            match v.last_mut() {
                Some((w, cs)) if w.name == case.workload.name => cs.push(c),
                _ => v.push((case.workload, vec![c])),
            }
        }
        v
    }

    /// specalloc's throughput over the best peer's, per program and thread count, with the
    /// geometric mean per thread count and the A/A control.
    fn summary(&self) -> String {
        let spec = self.index("specalloc");
        let aa = self.index("specalloc A/A");
        let mut head = vec!["program".to_string()];
        head.extend(self.threads.iter().map(|&t| self.heading(t)));
        let mut lines = vec![head];
        let mut per_count = vec![Vec::new(); self.threads.len()];
        let mut control = vec![Vec::new(); self.threads.len()];
        for (w, cs) in self.programs() {
            let mut line = vec![w.name.to_string()];
            for (i, &c) in cs.iter().enumerate() {
                let r = self.throughput(c, spec) / self.best_peer(c);
                per_count[i].push(r);
                control[i].push(self.throughput(c, aa) / self.throughput(c, spec));
                line.push(fmt_ratio(r));
            }
            lines.push(line);
        }
        let mut g = vec!["geometric mean".to_string()];
        g.extend(per_count.iter().map(|v| fmt_ratio(geomean(v))));
        lines.push(g);
        let mut a = vec!["A/A control".to_string()];
        a.extend(control.iter().map(|v| fmt_ratio(geomean(v))));
        lines.push(a);
        format!(
            "specalloc's throughput over the best peer's (glibc included) per program and \
             thread count: below 1.00× specalloc is behind. The A/A control is specalloc A/A's \
             throughput over specalloc's (geometric mean over the programs; its true value is \
             1, so smaller differences are noise). Every run's output was the same as glibc's \
             run of the same program at the same thread count (compared byte for byte).\n\n{}",
            markdown(&lines)
        )
    }

    /// Per program: the throughput of every allocator at every thread count, then the whole
    /// figures of every run.
    fn details(&self, rounds: usize) -> String {
        let mut out = String::new();
        for (w, cs) in self.programs() {
            let unit = &self.ops[cs[0]].1;
            out += &format!(
                "\n### {}\n\n{} (`bench/c/{}`, run as `{} {} THREADS`). Throughput, million \
                 {unit} per second (median of {rounds} rounds; higher is better):\n\n",
                w.name,
                w.what,
                preload::source(w.name),
                w.name,
                w.scale_arg(self.scale)
            );
            let mut head = vec!["allocator".to_string()];
            head.extend(cs.iter().map(|&c| self.heading(self.cases[c].threads)));
            let mut lines = vec![head];
            for (k, a) in self.allocs.iter().enumerate() {
                let mut line = vec![a.name.clone()];
                line.extend(cs.iter().map(|&c| fmt_ns(self.throughput(c, k))));
                lines.push(line);
            }
            out += &markdown(&lines);
            out += &format!(
                "\nEvery run (spread = largest deviation from the median after Tukey's fences; \
                 M/s = million {unit} per second, in all and per thread; RSS = peak; \"vs best \
                 peer\" = throughput over the best peer's at that thread count):\n\n"
            );
            let mut lines = vec![[
                "threads",
                "allocator",
                "wall s",
                "spread",
                "M/s",
                "M/s per thread",
                "user s",
                "sys s",
                "RSS MiB",
                "vs best peer",
            ]
            .map(String::from)
            .to_vec()];
            for &c in &cs {
                let t = self.cases[c].threads;
                for (k, a) in self.allocs.iter().enumerate() {
                    let runs = &self.runs[c][k];
                    let walls: Vec<f64> = runs.iter().map(|r| r.wall).collect();
                    let tp = self.throughput(c, k);
                    lines.push(vec![
                        self.heading(t),
                        a.name.clone(),
                        format!("{:.3}", median_of(runs, |r| r.wall)),
                        format!("±{:.1}%", spread(&walls) * 100.0),
                        fmt_ns(tp),
                        fmt_ns(tp / t as f64),
                        format!("{:.3}", median_of(runs, |r| r.user)),
                        format!("{:.3}", median_of(runs, |r| r.sys)),
                        format!("{:.1}", median_of(runs, |r| r.rss_kb) / 1024.0),
                        fmt_ratio(tp / self.best_peer(c)),
                    ]);
                }
            }
            out += &markdown(&lines);
        }
        out
    }

    /// The chart's axes: the thread counts, a dashed line before the oversubscribed ones.
    fn axes(&self) -> PanelAxes {
        let over = self.threads.iter().position(|&t| t as usize > self.cores);
        PanelAxes {
            x_desc: "threads".into(),
            x_labels: self.threads.iter().map(u64::to_string).collect(),
            y_desc: "million per second".into(),
            divider: over.filter(|&i| i > 0).map(|i| i as f64 - 0.5),
        }
    }

    /// The chart's panels: per program, every allocator's throughput by thread count,
    /// specalloc's line first (the charts' red), the A/A copy left out.
    fn panels(&self) -> Vec<Panel> {
        let spec = self.index("specalloc");
        let mut order: Vec<usize> = (0..self.allocs.len())
            .filter(|&k| !self.allocs[k].name.ends_with("A/A"))
            .collect();
        order.sort_by_key(|&k| k != spec);
        self.programs()
            .into_iter()
            .map(|(w, cs)| Panel {
                title: format!("{} (million {}/s)", w.name, self.ops[cs[0]].1),
                series: order
                    .iter()
                    .map(|&k| (k, &self.allocs[k]))
                    .map(|(k, a)| Series {
                        name: a.name.clone(),
                        points: cs
                            .iter()
                            .enumerate()
                            .map(|(i, &c)| (i as f64, self.throughput(c, k)))
                            .collect(),
                    })
                    .collect(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Options, cli::Stop> {
        parse_args(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn flags_and_help() {
        let o = parse(&[]).unwrap();
        assert_eq!((o.rounds, o.quick, o.scale), (5, false, 1.0));
        assert_eq!(o.threads, THREADS);
        assert_eq!(o.programs.len(), WORKLOADS.len());
        let o = parse(&["--quick"]).unwrap();
        assert_eq!((o.rounds, o.quick, o.scale), (2, true, 0.1));
        let o = parse(&[
            "--quick",
            "--rounds",
            "3",
            "--threads",
            "4,1,4",
            "--programs",
            "xmalloc,larson",
            "--scale",
            "0.01",
            "--out",
            "x",
        ])
        .unwrap();
        assert_eq!(
            o,
            Options {
                rounds: 3,
                quick: true,
                threads: vec![1, 4],
                programs: vec!["xmalloc", "larson"],
                scale: 0.01,
                out: Some(PathBuf::from("x")),
            }
        );
        for bad in [
            &["--seed", "1"][..],
            &["--rounds", "0"],
            &["--threads", "0"],
            &["--threads", "2,x"],
            &["--programs", "nope"],
            &["--scale", "-1"],
            &["--scale", "inf"],
        ] {
            assert!(matches!(parse(bad), Err(cli::Stop::Error(_))), "{bad:?}");
        }
        let Err(cli::Stop::Help(h)) = parse(&["--help"]) else {
            panic!("no help");
        };
        let texts = [
            "about 12 minutes",
            "about a minute",
            "not a measurement",
            "glibc's",
            "1,2,4,8,16",
        ];
        assert_eq!(cli::help_problem(&h, "scaling", &texts), None);
    }

    /// The workload named `name`.
    fn workload(name: &str) -> &'static Workload {
        WORKLOADS.iter().find(|w| w.name == name).unwrap()
    }

    #[test]
    fn scale_arguments_are_short() {
        assert_eq!(workload("larson").scale_arg(0.1), "0.3");
        assert_eq!(workload("medium").scale_arg(1.0), "0.5");
        assert_eq!(workload("xmalloc").scale_arg(1.0), "1");
        assert_eq!(workload("xmalloc").scale_arg(1.0 / 3.0), "0.333333");
        assert_eq!(workload("xmalloc").scale_arg(1e-7), "0.0000001");
    }

    #[test]
    fn report_lines_give_the_operations() {
        assert_eq!(
            operations("xmalloc: 4 threads, 4000000 allocations, checksum 12\n"),
            Some((4e6, "allocations".to_string()))
        );
        assert_eq!(
            operations("falseshare: 1 thread, 1920 writes, checksum 0"),
            Some((1920.0, "writes".to_string()))
        );
        assert_eq!(operations("churn 3000000 ops checksum 1"), None);
    }

    /// Two allocators' samples for two thread counts of one program: the summary, the tables
    /// and the chart's panels come out of them.
    #[test]
    fn tables_from_samples() {
        let w = workload("xmalloc");
        let cases = [
            Case {
                workload: w,
                threads: 1,
            },
            Case {
                workload: w,
                threads: 4,
            },
        ];
        let allocs: Vec<Allocator> = ["glibc", "specalloc", "specalloc A/A"]
            .map(|n| Allocator {
                name: n.into(),
                preload: None,
            })
            .to_vec();
        let run = |wall: f64| Run {
            wall,
            rss_kb: 2048.0,
            ..Run::default()
        };
        // glibc takes 2 s, specalloc 1 s (A/A too): specalloc 2.00× glibc's throughput.
        let case = vec![vec![run(2.0)], vec![run(1.0)], vec![run(1.0)]];
        let runs = vec![case.clone(), case];
        let ops = vec![(4e6, "allocations".to_string()); 2];
        let r = Results {
            cases: &cases,
            allocs: &allocs,
            runs: &runs,
            ops: &ops,
            threads: &[1, 4],
            scale: 0.5,
            cores: 2,
        };
        let s = r.summary();
        assert!(s.contains("| xmalloc        | 2.00× | 2.00× |"), "{s}");
        assert!(s.contains("| A/A control    | 1.00× | 1.00× |"), "{s}");
        assert!(s.contains("|    4* |"), "oversubscribed count marked: {s}");
        let d = r.details(1);
        assert!(d.contains("### xmalloc"), "{d}");
        assert!(d.contains("run as `xmalloc 0.5 THREADS`"), "{d}");
        assert!(d.contains("million allocations per second"), "{d}");
        // 4e6 allocations in 1 s at 4 threads: 4.00 M/s in all, 1.00 per thread.
        assert!(
            d.contains("| 4*      |     specalloc |  1.000 |  ±0.0% | 4.00 |           1.00 |"),
            "{d}"
        );
        let p = r.panels();
        assert_eq!(p.len(), 1);
        let names: Vec<&str> = p[0].series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            ["specalloc", "glibc"],
            "specalloc first, no A/A copy"
        );
        assert_eq!(p[0].series[0].points, vec![(0.0, 4.0), (1.0, 4.0)]);
        let a = r.axes();
        assert_eq!(a.x_labels, ["1", "4"]);
        assert_eq!(a.divider, Some(0.5), "between 1 and 4 threads on 2 cores");
    }
}
