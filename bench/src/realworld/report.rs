//! The real-workload suite's driver logic that is not process handling:
//! the worker's result line, the pooled samples, the tables, and the
//! allocator-only instruction count read from a callgrind output file.

use std::collections::{BTreeMap, HashMap};

use crate::stats;
use crate::table::{fmt_delta2, fmt_ratio, fmt_spread};

/// specalloc, the allocator under test.
pub const SPECALLOC: &str = "specalloc";
/// The A/A control: specalloc's build again, in separate processes.
pub const AA: &str = "specalloc A/A";
/// An earlier build of specalloc's worker (`REALWORLD_BEFORE`), run in the same rounds.
pub const BEFORE: &str = "specalloc before";
/// The peers, each the global allocator of its own build.
pub const PEERS: [&str; 5] = ["system", "mimalloc", "jemalloc", "tcmalloc", "snmalloc"];
/// The shims every allocation of a Rust program goes through; their
/// inclusive cost is the allocator's cost.
pub const SHIMS: [&str; 4] = [
    "__rust_alloc",
    "__rust_dealloc",
    "__rust_realloc",
    "__rust_alloc_zeroed",
];

/// One run of one program, as the worker prints it:
/// `result,<program>,<allocator>,<checksum hex>,<wall ns>,<peak RSS KiB>,<user µs>,<sys µs>,<minor faults>`
/// (the last three may be missing: an older worker's line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunLine {
    /// The program.
    pub program: String,
    /// The global allocator the worker was built with.
    pub global: String,
    /// The program's checksum.
    pub checksum: u64,
    /// Wall time of the program, in ns.
    pub wall_ns: u64,
    /// Peak resident set size of the worker process, in KiB.
    pub rss_kb: u64,
    /// User CPU time of the worker process, µs.
    pub user_us: u64,
    /// System CPU time of the worker process, µs.
    pub sys_us: u64,
    /// Minor page faults of the worker process.
    pub minor_faults: u64,
}

impl RunLine {
    /// Parses the worker's output (the first `result,` line).
    pub fn parse(text: &str) -> Option<RunLine> {
        let line = text.lines().find(|l| l.starts_with("result,"))?;
        let f: Vec<&str> = line.split(',').collect();
        let (&[_, program, global, checksum, wall, rss], rest) = f.split_at_checked(6)? else {
            return None;
        };
        let (user, sys, faults) = match rest {
            [] => (0, 0, 0),
            [u, s, m] => (u.parse().ok()?, s.parse().ok()?, m.parse().ok()?),
            _ => return None,
        };
        Some(RunLine {
            program: program.to_string(),
            global: global.to_string(),
            checksum: u64::from_str_radix(checksum, 16).ok()?,
            wall_ns: wall.parse().ok()?,
            rss_kb: rss.parse().ok()?,
            user_us: user,
            sys_us: sys,
            minor_faults: faults,
        })
    }
}

/// What one run measured, in the tables' units.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Sample {
    wall_ms: f64,
    rss_kb: f64,
    user_ms: f64,
    sys_ms: f64,
    faults: f64,
}

/// Samples of every (program, configuration): wall, user and sys ms, peak RSS KiB, minor
/// faults.
#[derive(Clone, Debug, Default)]
pub struct Samples {
    cells: BTreeMap<(String, String), Vec<Sample>>,
}

impl Samples {
    /// Adds one run of `program` under `config`.
    pub fn add(&mut self, program: &str, config: &str, run: &RunLine) {
        self.cells
            .entry((program.to_string(), config.to_string()))
            .or_default()
            .push(Sample {
                wall_ms: run.wall_ns as f64 / 1e6,
                rss_kb: run.rss_kb as f64,
                user_ms: run.user_us as f64 / 1e3,
                sys_ms: run.sys_us as f64 / 1e3,
                faults: run.minor_faults as f64,
            });
    }

    /// Wall times of a cell, in ms.
    pub fn wall(&self, program: &str, config: &str) -> Vec<f64> {
        self.get(program, config)
            .iter()
            .map(|s| s.wall_ms)
            .collect()
    }

    /// Peak RSS of a cell's runs, in KiB.
    pub fn rss(&self, program: &str, config: &str) -> Vec<f64> {
        self.get(program, config).iter().map(|s| s.rss_kb).collect()
    }

    /// User CPU times of a cell's runs, in ms.
    pub fn user(&self, program: &str, config: &str) -> Vec<f64> {
        self.get(program, config)
            .iter()
            .map(|s| s.user_ms)
            .collect()
    }

    /// System CPU times of a cell's runs, in ms.
    pub fn sys(&self, program: &str, config: &str) -> Vec<f64> {
        self.get(program, config).iter().map(|s| s.sys_ms).collect()
    }

    /// Minor page faults of a cell's runs.
    pub fn faults(&self, program: &str, config: &str) -> Vec<f64> {
        self.get(program, config).iter().map(|s| s.faults).collect()
    }

    fn get(&self, program: &str, config: &str) -> &[Sample] {
        self.cells
            .get(&(program.to_string(), config.to_string()))
            .map_or(&[], Vec::as_slice)
    }
}

/// The peer with the lowest median of `values` among `configs`, and that
/// median.
fn best_peer(configs: &[String], values: impl Fn(&str) -> Vec<f64>) -> Option<(String, f64)> {
    configs
        .iter()
        .filter(|c| PEERS.contains(&c.as_str()))
        .map(|c| (c.clone(), stats::median(&values(c))))
        .filter(|(_, m)| m.is_finite())
        .min_by(|a, b| a.1.total_cmp(&b.1))
}

/// `ratio` with a `~` in front when the two samples do not differ at
/// p < 0.05 (Mann-Whitney).
fn ratio_cell(a: &[f64], b: &[f64]) -> String {
    let r = stats::median(a) / stats::median(b);
    match stats::mann_whitney_u(a, b) {
        Some(t) if t.p >= crate::harness::ALPHA => format!("~{}", fmt_ratio(r)),
        _ => fmt_ratio(r),
    }
}

/// The chart's data: per configuration but `baseline` and the A/A control,
/// each program's median wall time over `baseline`'s (the program's index
/// in `programs` is x); programs without samples of both are left out.
pub fn relative_wall(
    samples: &Samples,
    programs: &[&str],
    configs: &[String],
    baseline: &str,
) -> Vec<crate::chart::Series> {
    configs
        .iter()
        .filter(|c| c.as_str() != baseline && c.as_str() != AA)
        .map(|c| crate::chart::Series {
            name: c.clone(),
            points: programs
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let r = stats::median(&samples.wall(p, c))
                        / stats::median(&samples.wall(p, baseline));
                    (i as f64, r)
                })
                .filter(|(_, r)| r.is_finite())
                .collect(),
        })
        .collect()
}

/// The wall-time table: per program, `median ± spread` ms of every
/// configuration, specalloc's ratio to the fastest peer (`~`: not
/// significant), and the A/A control's difference.
pub fn wall_table(samples: &Samples, programs: &[&str], configs: &[String]) -> Vec<Vec<String>> {
    let mut head = vec!["program".to_string()];
    head.extend(configs.iter().map(|c| format!("{c} (ms)")));
    head.extend(["specalloc / fastest peer".into(), "A/A Δ".into()]);
    let before = configs.iter().any(|c| c == BEFORE);
    if before {
        head.push("specalloc / before".into());
    }
    let mut lines = vec![head];
    for &p in programs {
        let mut l = vec![p.to_string()];
        for c in configs {
            let v = samples.wall(p, c);
            l.push(if v.is_empty() {
                "-".into()
            } else {
                format!(
                    "{:.1} ± {}",
                    stats::median(&v),
                    fmt_spread(stats::spread(&v))
                )
            });
        }
        let spec = samples.wall(p, SPECALLOC);
        l.push(match best_peer(configs, |c| samples.wall(p, c)) {
            Some((peer, _)) if !spec.is_empty() => {
                format!("{} ({peer})", ratio_cell(&spec, &samples.wall(p, &peer)))
            }
            _ => "-".into(),
        });
        let aa = samples.wall(p, AA);
        l.push(if aa.is_empty() || spec.is_empty() {
            "-".into()
        } else {
            let t = stats::mann_whitney_u(&aa, &spec).map_or(f64::NAN, |t| t.p);
            format!(
                "{} (p={t:.2})",
                fmt_delta2(stats::median(&aa) / stats::median(&spec))
            )
        });
        if before {
            let b = samples.wall(p, BEFORE);
            l.push(if b.is_empty() || spec.is_empty() {
                "-".into()
            } else {
                ratio_cell(&spec, &b)
            });
        }
        lines.push(l);
    }
    lines
}

/// The peak-RSS table: per program, the median peak RSS in MiB of every
/// allocator (the A/A control left out), and specalloc's ratio to the
/// lowest peer.
pub fn rss_table(samples: &Samples, programs: &[&str], configs: &[String]) -> Vec<Vec<String>> {
    let configs: Vec<String> = configs.iter().filter(|c| *c != AA).cloned().collect();
    let mut head = vec!["program".to_string()];
    head.extend(configs.iter().map(|c| format!("{c} (MiB)")));
    head.push("specalloc / lowest peer".into());
    let mut lines = vec![head];
    for &p in programs {
        let mut l = vec![p.to_string()];
        for c in &configs {
            let m = stats::median(&samples.rss(p, c)) / 1024.0;
            l.push(if m.is_nan() {
                "-".into()
            } else {
                format!("{m:.1}")
            });
        }
        let spec = stats::median(&samples.rss(p, SPECALLOC));
        l.push(match best_peer(&configs, |c| samples.rss(p, c)) {
            Some((peer, best)) => format!("{} ({peer})", fmt_ratio(spec / best)),
            None => "-".into(),
        });
        lines.push(l);
    }
    lines
}

/// The user/sys table: per program, `user / sys` ms medians of every
/// configuration (the A/A control left out), and specalloc's sys time
/// against that of the fastest peer (lowest wall median).
pub fn cpu_table(samples: &Samples, programs: &[&str], configs: &[String]) -> Vec<Vec<String>> {
    resource_table(
        samples,
        programs,
        configs,
        "user / sys (ms)",
        |p, c| {
            let (u, s) = (
                stats::median(&samples.user(p, c)),
                stats::median(&samples.sys(p, c)),
            );
            (!u.is_nan()).then(|| format!("{u:.0} / {s:.0}"))
        },
        |p, c| stats::median(&samples.sys(p, c)),
        "sys",
    )
}

/// The page-fault table: per program, the median minor faults of every
/// configuration (the A/A control left out), and specalloc's against the
/// fastest peer's (lowest wall median).
pub fn faults_table(samples: &Samples, programs: &[&str], configs: &[String]) -> Vec<Vec<String>> {
    resource_table(
        samples,
        programs,
        configs,
        "faults",
        |p, c| {
            let m = stats::median(&samples.faults(p, c));
            (!m.is_nan()).then(|| format!("{m:.0}"))
        },
        |p, c| stats::median(&samples.faults(p, c)),
        "faults",
    )
}

/// A per-program table of `cell(program, config)` for every configuration
/// but the A/A control, then specalloc's `value` against the value of the
/// peer with the lowest wall median.
#[allow(clippy::too_many_arguments)]
fn resource_table(
    samples: &Samples,
    programs: &[&str],
    configs: &[String],
    unit: &str,
    cell: impl Fn(&str, &str) -> Option<String>,
    value: impl Fn(&str, &str) -> f64,
    what: &str,
) -> Vec<Vec<String>> {
    let configs: Vec<String> = configs.iter().filter(|c| *c != AA).cloned().collect();
    let mut head = vec!["program".to_string()];
    head.extend(configs.iter().map(|c| format!("{c} {unit}")));
    head.push(format!("specalloc / fastest peer ({what})"));
    let mut lines = vec![head];
    for &p in programs {
        let mut l = vec![p.to_string()];
        for c in &configs {
            l.push(cell(p, c).unwrap_or_else(|| "-".into()));
        }
        l.push(match best_peer(&configs, |c| samples.wall(p, c)) {
            Some((peer, _)) => {
                let (a, b) = (value(p, SPECALLOC), value(p, &peer));
                if b > 0.0 {
                    format!("{} ({peer})", fmt_ratio(a / b))
                } else {
                    format!("{a:.0} vs 0 ({peer})")
                }
            }
            None => "-".into(),
        });
        lines.push(l);
    }
    lines
}

/// Instruction counts of one callgrind run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Instructions {
    /// The whole program's instructions (Ir).
    pub total: u64,
    /// Inclusive instructions of the four allocator shims ([`SHIMS`]),
    /// calls from one shim into another counted once.
    pub alloc: u64,
}

/// Reads a callgrind output file (`--tool=callgrind`, default options):
/// the total from its `totals:`/`summary:` line, and the inclusive cost of
/// the [`SHIMS`] — the self cost of their lines plus the inclusive cost of
/// every call they make (the line after each `calls=`). A shim is matched by
/// the last path segment of its (demangled) name, so `__rustc::__rust_alloc`
/// counts. (Cross-checked: on the json program this gives exactly the total
/// of a run with `--toggle-collect` on the four shims; summing
/// `callgrind_annotate --inclusive=yes` lines instead double-counts, as it
/// splits a function by the source file of its inlined code.)
pub fn callgrind_instructions(text: &str) -> Option<Instructions> {
    let total = crate::sweep::parse_callgrind_total(text)?;
    let mut names: HashMap<String, String> = HashMap::new();
    // Resolves `(id) name` / `(id)` name compression.
    let mut resolve = |spec: &str| -> String {
        let spec = spec.trim();
        if let Some(rest) = spec.strip_prefix('(') {
            if let Some((id, name)) = rest.split_once(')') {
                let name = name.trim();
                if name.is_empty() {
                    return names.get(id).cloned().unwrap_or_default();
                }
                names.insert(id.to_string(), name.to_string());
                return name.to_string();
            }
        }
        spec.to_string()
    };
    let is_shim = |name: &str| {
        let last = name.rsplit("::").next().unwrap_or(name);
        SHIMS.contains(&last)
    };
    let first_cost = |line: &str| -> u64 {
        line.split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0)
    };
    let (mut in_shim, mut callee_shim, mut after_calls) = (false, false, false);
    let mut alloc = 0u64;
    for line in text.lines() {
        if let Some(f) = line.strip_prefix("fn=") {
            in_shim = is_shim(&resolve(f));
            after_calls = false;
        } else if let Some(f) = line.strip_prefix("cfn=") {
            callee_shim = is_shim(&resolve(f));
        } else if line.starts_with("calls=") {
            after_calls = true;
        } else if line.starts_with(|c: char| c.is_ascii_digit() || "+-*".contains(c)) {
            if in_shim && !(after_calls && callee_shim) {
                alloc += first_cost(line);
            }
            after_calls = false;
        } else if !line.starts_with("cfi=")
            && !line.starts_with("cfl=")
            && !line.starts_with("cob=")
        {
            after_calls = false;
        }
    }
    Some(Instructions { total, alloc })
}

/// The instruction tables: total and allocator-only instructions of every
/// configuration that has counts, in millions, with specalloc's ratio to
/// mimalloc and to the lowest peer.
pub fn instruction_table(
    counts: &BTreeMap<(String, String), Instructions>,
    programs: &[&str],
    configs: &[String],
    pick: fn(&Instructions) -> u64,
) -> Vec<Vec<String>> {
    let configs: Vec<String> = configs
        .iter()
        .filter(|c| counts.keys().any(|k| &k.1 == *c))
        .cloned()
        .collect();
    let mut head = vec!["program".to_string()];
    head.extend(configs.iter().map(|c| format!("{c} (M)")));
    head.extend([
        "specalloc / mimalloc".into(),
        "specalloc / lowest peer".into(),
    ]);
    let mut lines = vec![head];
    let get = |p: &str, c: &str| {
        counts
            .get(&(p.to_string(), c.to_string()))
            .map_or(f64::NAN, |i| pick(i) as f64)
    };
    for &p in programs {
        let mut l = vec![p.to_string()];
        for c in &configs {
            let v = get(p, c);
            l.push(if v.is_nan() {
                "-".into()
            } else {
                format!("{:.2}", v / 1e6)
            });
        }
        let spec = get(p, SPECALLOC);
        l.push(fmt_ratio(spec / get(p, "mimalloc")));
        let best = configs
            .iter()
            .filter(|c| PEERS.contains(&c.as_str()))
            .map(|c| (c, get(p, c)))
            .filter(|(_, v)| v.is_finite())
            .min_by(|a, b| a.1.total_cmp(&b.1));
        l.push(match best {
            Some((peer, v)) => format!("{} ({peer})", fmt_ratio(spec / v)),
            None => "-".into(),
        });
        lines.push(l);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines() {
        let r = RunLine::parse("noise\nresult,json,mimalloc,00ff,2500000,4096\n").unwrap();
        assert_eq!(
            r,
            RunLine {
                program: "json".into(),
                global: "mimalloc".into(),
                checksum: 255,
                wall_ns: 2_500_000,
                rss_kb: 4096,
                user_us: 0,
                sys_us: 0,
                minor_faults: 0,
            }
        );
        let r = RunLine::parse("result,json,mimalloc,00ff,2500000,4096,1500,700,321\n").unwrap();
        assert_eq!((r.user_us, r.sys_us, r.minor_faults), (1500, 700, 321));
        assert!(RunLine::parse("result,json,x,1,2,3,4,5").is_none());
        assert!(RunLine::parse("result,json,x,zz,1,2").is_none());
        assert!(RunLine::parse("result,json,x,1,2").is_none());
    }

    fn samples() -> (Samples, Vec<String>) {
        let mut s = Samples::default();
        let configs: Vec<String> = [SPECALLOC, AA, "system", "mimalloc"]
            .map(String::from)
            .to_vec();
        for i in 0..8u64 {
            for (c, ms, kb) in [
                (SPECALLOC, 10, 2048),
                (AA, 10, 2048),
                ("system", 20, 1024),
                ("mimalloc", 12, 4096),
            ] {
                let run = RunLine {
                    program: "p".into(),
                    global: c.into(),
                    checksum: 1,
                    wall_ns: ms * 1_000_000 + i * 10_000,
                    rss_kb: kb,
                    user_us: ms * 900,
                    sys_us: kb,
                    minor_faults: kb * 4,
                };
                s.add("p", c, &run);
            }
        }
        (s, configs)
    }

    #[test]
    fn tables() {
        let (s, configs) = samples();
        let w = wall_table(&s, &["p"], &configs);
        assert_eq!(w[0][1], "specalloc (ms)");
        assert_eq!(w[1][1], "10.0 ± 0%");
        assert_eq!(w[1][5], "0.83× (mimalloc)");
        assert!(w[1][6].starts_with("+0.00% (p=1.00)"), "{}", w[1][6]);
        let r = rss_table(&s, &["p"], &configs);
        assert_eq!(r[0].len(), 1 + 3 + 1);
        assert_eq!(r[1][1..], ["2.0", "1.0", "4.0", "2.00× (system)"]);
        // Resources are compared with the fastest peer (mimalloc), not the lowest value.
        let c = cpu_table(&s, &["p"], &configs);
        assert_eq!(c[0][1], "specalloc user / sys (ms)");
        assert_eq!(c[1][1..], ["9 / 2", "18 / 1", "11 / 4", "0.50× (mimalloc)"]);
        let f = faults_table(&s, &["p"], &configs);
        assert_eq!(f[1][1..], ["8192", "4096", "16384", "0.50× (mimalloc)"]);
        // The chart: specalloc and mimalloc against system, no A/A, a missing program left out.
        let series = relative_wall(&s, &["p", "absent"], &configs, "system");
        let names: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, [SPECALLOC, "mimalloc"]);
        assert_eq!(series[0].points.len(), 1);
        assert!(
            (series[0].points[0].1 - 0.5).abs() < 0.01,
            "{:?}",
            series[0]
        );
        assert!(
            (series[1].points[0].1 - 0.6).abs() < 0.01,
            "{:?}",
            series[1]
        );
    }

    #[test]
    fn an_earlier_build_is_compared_and_is_no_peer() {
        let (mut s, mut configs) = samples();
        configs.push(BEFORE.to_string());
        for i in 0..8u64 {
            let run = RunLine {
                program: "p".into(),
                global: SPECALLOC.into(),
                checksum: 1,
                wall_ns: 8_000_000 + i * 10_000,
                rss_kb: 512,
                user_us: 7_000,
                sys_us: 512,
                minor_faults: 100,
            };
            s.add("p", BEFORE, &run);
        }
        let w = wall_table(&s, &["p", "absent"], &configs);
        assert_eq!(w[0][5], "specalloc before (ms)");
        assert_eq!(w[0][8], "specalloc / before");
        // Faster and smaller than every peer, it is still not the fastest or lowest peer.
        assert_eq!(w[1][6], "0.83× (mimalloc)");
        assert_eq!(w[1][8], "1.25×");
        assert_eq!(w[2][8], "-");
        let r = rss_table(&s, &["p"], &configs);
        assert_eq!(r[1][5], "2.00× (system)");
        // tcmalloc (preloaded into the system build) is a peer.
        configs.push("tcmalloc".to_string());
        for i in 0..8u64 {
            let run = RunLine {
                program: "p".into(),
                global: "system".into(),
                checksum: 1,
                wall_ns: 9_000_000 + i * 10_000,
                rss_kb: 1024,
                user_us: 8_000,
                sys_us: 0,
                minor_faults: 100,
            };
            s.add("p", "tcmalloc", &run);
        }
        let w = wall_table(&s, &["p"], &configs);
        assert_eq!(w[1][7], "1.11× (tcmalloc)");
    }

    #[test]
    fn shim_costs_from_a_callgrind_file() {
        let text = "\
events: Ir
fl=(1) a.rs
fn=(1) main
1 100
cfn=(2) __rustc::__rust_alloc
calls=3 10
2 70
fn=(2)
10 20
fi=(2) b.rs
11 5
cfn=(3) specalloc::slow
calls=1 20
12 40
cfn=(4) __rustc::__rust_dealloc
calls=1 30
13 9
fn=(3)
20 40
fn=(4)
30 9
totals: 209
";
        let i = callgrind_instructions(text).unwrap();
        assert_eq!(i.total, 209);
        // alloc: self 20 + 5, its call to slow 40; the call into dealloc
        // (9) is counted in dealloc's own self cost, once.
        assert_eq!(i.alloc, 20 + 5 + 40 + 9);
        assert!(callgrind_instructions("nothing").is_none());
    }
}
