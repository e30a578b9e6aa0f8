//! `--callgrind`: instructions per operation of every cell, under
//! `valgrind --tool=callgrind`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::Command;

use specalloc_bench::chart::{self, Series};
use specalloc_bench::stats;
use specalloc_bench::sweep::{self, AllocPath, CellId, Shape, GENERIC, SIZES, SPECIALISED};
use specalloc_bench::table::{align, fmt_ratio};
use specalloc_bench::workers::{commit, machine, output};

use crate::prepare::Worker;
use crate::{command_line, Opts};

/// Instructions per operation of every cell of every build that runs under
/// valgrind; the tables on stdout and in `<out>/callgrind.txt`, one line
/// per cell in `<out>/callgrind.csv`, the chart of the plain path's
/// allocations in `<out>/callgrind.svg`.
pub(crate) fn callgrind(opts: &Opts, workers: &[Worker]) -> Result<(), String> {
    let n = opts.cg_n;
    let mut per_op: BTreeMap<CellId, f64> = BTreeMap::new();
    let mut configs = Vec::new();
    let mut failed = Vec::new();
    for w in workers.iter().filter(|w| w.ok()) {
        match measure(opts, w)? {
            Some(cells) => {
                for (cell, v) in cells {
                    if !configs.contains(&cell.config) {
                        configs.push(cell.config.clone());
                    }
                    per_op.insert(cell, v);
                }
            }
            None => failed.push(w.build.name),
        }
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
            report.push_str(&table(path, shape, &cols, &per_op, &mut csv));
        }
    }
    let svg = opts.out.join("callgrind.svg");
    let series: Vec<Series> = sweep::CHART_CONFIGS
        .iter()
        .filter_map(|&config| {
            let points: Vec<(f64, f64)> = SIZES
                .iter()
                .filter_map(|&size| {
                    let cell = CellId {
                        config: config.to_string(),
                        path: AllocPath::Plain,
                        shape: Shape::Alloc,
                        size,
                    };
                    per_op.get(&cell).map(|&v| (size as f64, v))
                })
                .collect();
            (!points.is_empty()).then(|| Series {
                name: config.to_string(),
                points,
            })
        })
        .collect();
    match chart::size_chart(
        &svg,
        "specalloc: instructions per allocation by size (plain path; callgrind)",
        &format!(
            "instruction counts do not depend on the machine's load\ncommit {}; {}",
            commit(),
            machine()
        ),
        "instructions per allocation",
        &series,
    ) {
        Ok(()) => {
            let _ = writeln!(report, "chart (plain/alloc): {}", svg.display());
        }
        Err(e) => {
            let _ = writeln!(report, "chart not written: {e}");
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

/// Runs one build's worker under callgrind: instructions per operation of
/// each of its cells, or `None` if it fails under valgrind (snmalloc).
fn measure(opts: &Opts, w: &Worker) -> Result<Option<BTreeMap<CellId, f64>>, String> {
    let n = opts.cg_n;
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
            let _ = std::fs::remove_dir_all(&dir);
            return Ok(None);
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
    let mut per_op = BTreeMap::new();
    for (cell, m) in counts {
        if let (Some(&a), Some(&b)) = (m.get(&(n as u64)), m.get(&(2 * n as u64))) {
            per_op.insert(cell, sweep::per_op(a, b, n as u64));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Some(per_op))
}

/// The table of one path and shape (one line per size, a column per
/// configuration, specialised/generic, a geomean line); its cells are also
/// appended to `csv`.
fn table(
    path: AllocPath,
    shape: Shape,
    cols: &[String],
    per_op: &BTreeMap<CellId, f64>,
    csv: &mut String,
) -> String {
    let mut report = String::new();
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
            (Some(s), Some(g)) => fmt_ratio(s / g),
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
        (Some(s), Some(g)) => fmt_ratio(stats::geomean(&geo[s]) / stats::geomean(&geo[g])),
        _ => "-".into(),
    });
    lines.push(l);
    report.push_str(&align(&lines));
    report
}
