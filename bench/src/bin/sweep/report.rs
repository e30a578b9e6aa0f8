//! The report of a timed sweep: the header (rounds, machine, load,
//! command), one benchstat table per path and shape with its summary
//! lines, the compact ratio tables, the overview, and the files
//! (`sweep.txt`, `sweep.csv`, `sweep-summary.csv`).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use specalloc_bench::harness::{self, Results};
use specalloc_bench::stats;
use specalloc_bench::sweep::{
    self, AllocPath, Pool, Shape, AA_SUFFIX, GENERIC, INLINE, LOCAL, OPT_OUT, SIZES, SPECIALISED,
};
use specalloc_bench::table::{align, fmt_delta2, fmt_ratio};
use specalloc_bench::workers::machine;

use crate::prepare::Worker;
use crate::rounds::Proc;
use crate::{command_line, Opts};

/// What the rounds were: their processes, the load before and after, and
/// how long they took.
pub(crate) struct Run<'a> {
    pub(crate) procs: &'a [Proc<'a>],
    pub(crate) load_start: String,
    pub(crate) load_end: String,
    pub(crate) seconds: f64,
}

/// Everything the tables of one sweep accumulate.
#[derive(Default)]
struct Tables {
    report: String,
    compact: String,
    summary_csv: String,
    overview: Vec<Vec<String>>,
    aa_all: BTreeMap<String, Vec<f64>>,
    raw: Vec<Results>,
}

/// Prints the report and writes its files.
pub(crate) fn report(
    opts: &Opts,
    workers: &[Worker],
    ok: &[&Worker],
    run: &Run<'_>,
    pool: &Pool,
) -> Result<(), String> {
    let mut t = Tables {
        report: header(opts, workers, run),
        summary_csv: format!("{}\n", sweep::SUMMARY_CSV_HEADER),
        ..Tables::default()
    };
    let (cols, all_cols) = columns(ok);
    for path in AllocPath::ALL {
        for shape in Shape::ALL {
            add_table(&mut t, pool, path, shape, &cols, &all_cols);
        }
    }
    let mut report = t.report;
    let _ = writeln!(report);
    report.push_str(&t.compact);
    report.push_str(&overview(t.overview, &t.aa_all));

    print!("{report}");
    let txt = opts.out.join("sweep.txt");
    let csv = opts.out.join("sweep.csv");
    let summary = opts.out.join("sweep-summary.csv");
    std::fs::write(&txt, &report).map_err(|e| format!("{}: {e}", txt.display()))?;
    std::fs::write(&summary, &t.summary_csv).map_err(|e| format!("{}: {e}", summary.display()))?;
    harness::write_csv(&csv, &t.raw).map_err(|e| format!("{}: {e}", csv.display()))?;
    eprintln!(
        "[sweep] tables: {}; raw samples: {}; per-cell summary: {}",
        txt.display(),
        csv.display(),
        summary.display()
    );
    Ok(())
}

/// The lines above the tables.
fn header(opts: &Opts, workers: &[Worker], run: &Run<'_>) -> String {
    let mut report = String::new();
    let _ = writeln!(
        report,
        "size sweep: {} rounds; each round samples every cell of the {} worker processes once, \
         in {} invocations of ~{} cells each, started in a fresh shuffled order; samples pooled \
         over rounds",
        opts.rounds,
        run.procs.len(),
        run.procs.iter().map(|p| p.slices).sum::<usize>(),
        opts.cells_per_run
    );
    let _ = writeln!(report, "machine: {}", machine());
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
