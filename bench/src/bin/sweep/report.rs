//! The report of a timed sweep. The answer comes first, on stdout: one
//! short table of what a specialised allocation costs per size range against
//! the generic path, the system allocator and the best peer, the A/A control,
//! and where the details went. The details go to files: `sweep.txt` (the
//! header with rounds, machine, load and command, one benchstat table per
//! path and shape with its summary lines, the compact ratio tables, the
//! overview), `sweep.svg` (the chart of cost per size), `sweep.csv` and
//! `sweep-summary.csv`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use specalloc_bench::chart;
use specalloc_bench::harness::{self, Results};
use specalloc_bench::stats;
use specalloc_bench::sweep::{
    self, AllocPath, Pool, Shape, AA_SUFFIX, GENERIC, INLINE, LOCAL, OPT_OUT, SIZES, SPECIALISED,
};
use specalloc_bench::table::{align, fmt_delta2, fmt_ratio};
use specalloc_bench::workers::{commit, machine};

use crate::prepare::Worker;
use crate::rounds::Run;
use crate::{command_line, Opts};

/// Everything the tables of one sweep accumulate.
#[derive(Default)]
struct Tables {
    report: String,
    compact: String,
    summary_csv: String,
    overview: Vec<Vec<String>>,
    aa_all: BTreeMap<String, Vec<f64>>,
    raw: Vec<Results>,
    /// The printed tables by name (`plain/pair`, …), for the answer and the chart.
    by_name: BTreeMap<String, Results>,
}

/// The note `--quick` puts beside its figures.
const QUICK_NOTE: &str =
    "--quick: a few short rounds, a smoke test: NOT A MEASUREMENT (run without --quick for figures)";

/// Prints the answer, writes the details and the chart.
pub(crate) fn report(
    opts: &Opts,
    workers: &[Worker],
    run: &Run,
    pool: &Pool,
) -> Result<(), String> {
    let ok: Vec<&Worker> = workers.iter().filter(|w| w.ok()).collect();
    let mut t = Tables {
        report: header(opts, workers, run),
        summary_csv: format!("{}\n", sweep::SUMMARY_CSV_HEADER),
        ..Tables::default()
    };
    let (cols, all_cols) = columns(&ok);
    for path in AllocPath::ALL {
        for shape in Shape::ALL {
            add_table(&mut t, pool, path, shape, &cols, &all_cols);
        }
    }
    let mut details = t.report;
    let _ = writeln!(details);
    details.push_str(&t.compact);
    details.push_str(&overview(t.overview, &t.aa_all));

    let txt = opts.out.join("sweep.txt");
    let svg = opts.out.join("sweep.svg");
    let csv = opts.out.join("sweep.csv");
    let summary = opts.out.join("sweep-summary.csv");
    let aa = t
        .aa_all
        .get(&format!("{SPECIALISED}{AA_SUFFIX} vs {SPECIALISED}"))
        .map_or(f64::NAN, |r| stats::geomean(r));
    let mut answer = answer(opts, run, &t.by_name, aa);
    let chart_result = match t.by_name.get("plain/alloc") {
        Some(res) => chart::size_chart(
            &svg,
            "specalloc: ns per allocation by size (plain path, 1000 allocations timed)",
            &chart_note(opts, run),
            "ns per allocation (median)",
            &sweep::chart_series(res),
        ),
        None => Err("no plain/alloc table".into()),
    };
    let _ = writeln!(answer, "details:");
    let _ = writeln!(
        answer,
        "  every size, both paths, every configuration, p-values: {}",
        txt.display()
    );
    match &chart_result {
        Ok(()) => {
            let _ = writeln!(answer, "  chart of cost per size: {}", svg.display());
        }
        Err(e) => {
            let _ = writeln!(answer, "  chart: not written ({e})");
        }
    }
    let _ = writeln!(answer, "  raw samples: {}", csv.display());
    let _ = writeln!(answer, "  one line per cell: {}", summary.display());
    let _ = writeln!(
        answer,
        "  build checks: {}",
        opts.out.join("checks.txt").display()
    );
    print!("{answer}");
    let file = format!("{answer}\n{details}");
    std::fs::write(&txt, file).map_err(|e| format!("{}: {e}", txt.display()))?;
    std::fs::write(&summary, &t.summary_csv).map_err(|e| format!("{}: {e}", summary.display()))?;
    harness::write_csv(&csv, &t.raw).map_err(|e| format!("{}: {e}", csv.display()))?;
    Ok(())
}

/// The answer printed first: the headline table (plain path, alloc+free and
/// alloc alone), the A/A control, what the columns are, and `--quick`'s note
/// beside the figures.
fn answer(opts: &Opts, run: &Run, tables: &BTreeMap<String, Results>, aa: f64) -> String {
    let mut out = String::new();
    let what = if opts.quick {
        "--quick, NOT A MEASUREMENT".to_string()
    } else {
        format!("median of {} interleaved rounds", opts.rounds)
    };
    let _ = writeln!(
        out,
        "size sweep, {what}: what a specialised allocation costs\n(ns: geomean over the sizes of \
         each range; ratios below 1.00×: the specialised routine is faster)"
    );
    let _ = writeln!(out);
    let picked: Vec<(&str, &Results)> = [("alloc+free", "plain/pair"), ("alloc", "plain/alloc")]
        .iter()
        .filter_map(|(label, name)| tables.get(*name).map(|r| (*label, r)))
        .collect();
    out.push_str(&sweep::headline(&picked));
    if opts.quick {
        let _ = writeln!(out, "^ {QUICK_NOTE}");
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "generic: specalloc's generic path called out of line, as from any crate but the one \
         that\n  declares the global allocator; system: glibc's malloc; best peer: the fastest \
         of mimalloc,\n  jemalloc and snmalloc over the range (with --features peers)."
    );
    let _ = writeln!(
        out,
        "A/A control (the specialised build run again as a separate process; its true \
         difference is 0):\n  {} geomean; {:.0} s of rounds, load {} at start, {} at end",
        fmt_delta2(aa),
        run.seconds,
        run.load_start,
        run.load_end
    );
    out
}

/// The chart's second line: what run drew it.
fn chart_note(opts: &Opts, run: &Run) -> String {
    let what = if opts.quick {
        QUICK_NOTE.to_string()
    } else {
        format!(
            "median of {} interleaved rounds; load {} to {}",
            opts.rounds, run.load_start, run.load_end
        )
    };
    format!("{what}\n{}; commit {}", machine(), commit())
}

/// The lines above the tables of `sweep.txt`.
fn header(opts: &Opts, workers: &[Worker], run: &Run) -> String {
    let mut report = String::new();
    let _ = writeln!(
        report,
        "size sweep: {} rounds; each round samples every cell of the {} worker processes once, \
         in {} invocations of ~{} cells each, started in a fresh shuffled order; samples pooled \
         over rounds",
        opts.rounds, run.processes, run.invocations, opts.cells_per_run
    );
    let _ = writeln!(report, "machine: {}", machine());
    let _ = writeln!(report, "commit: {}", commit());
    let _ = writeln!(
        report,
        "load average (1/5/15 min): {} at start, {} at end; {:.0} s of rounds",
        run.load_start, run.load_end, run.seconds
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
        let _ = writeln!(report, "note: {QUICK_NOTE}");
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
    report
}

/// The columns of the printed tables, and of the full ones (with the
/// generic and inline A/A controls, kept for the raw CSV and the A/A lines).
fn columns(ok: &[&Worker]) -> (Vec<String>, Vec<String>) {
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
    (cols, all_cols)
}

/// The A/A pairs: each control against its configuration.
fn aa_pairs() -> Vec<(String, String)> {
    [SPECIALISED, GENERIC, INLINE]
        .iter()
        .map(|c| (format!("{c}{AA_SUFFIX}"), c.to_string()))
        .collect()
}

/// One path and shape: its table, summary lines, compact table, summary
/// CSV rows, overview line and raw samples.
fn add_table(
    t: &mut Tables,
    pool: &Pool,
    path: AllocPath,
    shape: Shape,
    cols: &[String],
    all_cols: &[String],
) {
    let res = pool.results(path, shape, cols);
    let full = pool.results(path, shape, all_cols);
    let pairs = aa_pairs();
    let aa: Vec<(String, Option<sweep::AaResult>)> = pairs
        .iter()
        .map(|(a, b)| (format!("{a} vs {b}"), sweep::aa(&full, a, b)))
        .collect();
    for (a, b) in &pairs {
        t.aa_all.entry(format!("{a} vs {b}")).or_default().extend(
            sweep::ratios(&full, a, b)
                .into_iter()
                .filter(|x| x.is_finite()),
        );
    }
    let _ = writeln!(t.report);
    t.report.push_str(&res.table("size (B)"));
    t.report.push_str(&sweep::summary(&res, &aa));
    t.compact.push_str(&sweep::ratio_table(&res));
    t.compact.push('\n');
    sweep::summary_csv_rows(&res, &mut t.summary_csv);
    t.overview.push(overview_line(&res, &full));
    t.raw.push(full);
    t.by_name.insert(res.name.clone(), res);
}

/// The overview table and the A/A lines over all four tables.
fn overview(lines_of_tables: Vec<Vec<String>>, aa_all: &BTreeMap<String, Vec<f64>>) -> String {
    let mut report = String::new();
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
    lines.extend(lines_of_tables);
    report.push_str(&align(&lines));
    for (label, r) in aa_all {
        let _ = writeln!(
            report,
            "A/A control, all four tables: {label}: geomean {} over {} cells",
            fmt_delta2(stats::geomean(r)),
            r.len()
        );
    }
    report
}

/// One line of the overview: geomean ratios of one table.
fn overview_line(res: &Results, full: &Results) -> Vec<String> {
    let g = |a: &str, sizes: &[usize]| fmt_ratio(sweep::geomean_ratio(res, a, GENERIC, sizes));
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
        fmt_delta2(stats::geomean(&aa)),
        format!("{:.1}%", worst * 100.0),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use specalloc_bench::sweep::{CellId, SampleLine};

    fn pool() -> Pool {
        let mut pool = Pool::default();
        for round in 0..3 {
            for (config, ns) in [(GENERIC, 10.0), (SPECIALISED, 6.0), ("system", 20.0)] {
                for shape in Shape::ALL {
                    for size in SIZES {
                        let s = SampleLine {
                            cell: CellId {
                                config: config.to_string(),
                                path: AllocPath::Plain,
                                shape,
                                size,
                            },
                            position: 0,
                            iters: 10,
                            ops: 10,
                            elapsed_ns: (ns * 10.0) as u64,
                        };
                        pool.add(&s, round);
                    }
                }
            }
        }
        pool
    }

    #[test]
    fn the_answer_is_short_and_quick_says_what_it_is() {
        let pool = pool();
        let cols: Vec<String> = [GENERIC, SPECIALISED, "system"].map(String::from).to_vec();
        let tables: BTreeMap<String, Results> = Shape::ALL
            .iter()
            .map(|&shape| {
                let r = pool.results(AllocPath::Plain, shape, &cols);
                (r.name.clone(), r)
            })
            .collect();
        let run = Run {
            processes: 3,
            invocations: 9,
            load_start: "0.1".into(),
            load_end: "0.2".into(),
            seconds: 1.0,
        };
        let args = |v: &[&str]| crate::parse_args(v.iter().map(|s| s.to_string()).collect());
        let quick = answer(&args(&["--quick"]).unwrap(), &run, &tables, 1.0);
        let lines: Vec<&str> = quick.lines().collect();
        assert!(lines.iter().all(|l| l.chars().count() <= 100), "{quick}");
        assert!(lines[0].contains("NOT A MEASUREMENT"), "{quick}");
        // The note stands right under the table's last row.
        let last_row = lines
            .iter()
            .rposition(|l| l.contains("512–1024 B"))
            .unwrap();
        assert!(lines[last_row + 1].contains("NOT A MEASUREMENT"), "{quick}");
        // Both shapes, four ranges each, specialised 0.60× generic and 0.30× system.
        assert_eq!(
            lines.iter().filter(|l| l.contains(" B ")).count(),
            8,
            "{quick}"
        );
        assert!(
            lines[4].contains("0.60×") && lines[4].contains("0.30×"),
            "{quick}"
        );
        let full = answer(&args(&[]).unwrap(), &run, &tables, 1.0);
        assert!(!full.contains("NOT A MEASUREMENT"), "{full}");
        assert!(
            full.starts_with("size sweep, median of 30 interleaved rounds"),
            "{full}"
        );
    }
}
