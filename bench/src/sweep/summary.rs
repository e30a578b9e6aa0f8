//! Summaries of the sweep's tables: ratios and geomeans, the A/A
//! controls, the lines printed under each table, the compact ratio table,
//! the summary CSV, and callgrind totals.

use std::fmt::Write as _;

use super::*;
use crate::harness::{Results, ALPHA};
use crate::stats;
use crate::table::{align, fmt_delta2, fmt_ratio};

/// The column of `config` in `res`.
fn col(res: &Results, config: &str) -> Option<usize> {
    res.configs.iter().position(|c| c == config)
}

/// Ratio of medians `a / b` per row (`NaN` where a cell is empty).
pub fn ratios(res: &Results, a: &str, b: &str) -> Vec<f64> {
    let (Some(a), Some(b)) = (col(res, a), col(res, b)) else {
        return vec![f64::NAN; res.rows.len()];
    };
    (0..res.rows.len())
        .map(|r| res.median(r, a) / res.median(r, b))
        .collect()
}

/// Geomean of the ratios `a / b` over the rows whose size is in `sizes`.
pub fn geomean_ratio(res: &Results, a: &str, b: &str, sizes: &[usize]) -> f64 {
    let r = ratios(res, a, b);
    let picked: Vec<f64> = res
        .rows
        .iter()
        .zip(&r)
        .filter(|(row, _)| sizes.iter().any(|s| s.to_string() == **row))
        .map(|(_, &x)| x)
        .collect();
    stats::geomean(&picked)
}

/// An A/A comparison: `a` against `b` (the same code).
#[derive(Clone, Debug, PartialEq)]
pub struct AaResult {
    /// Geomean over rows of the ratio of medians.
    pub geomean: f64,
    /// Rows whose difference is significant at [`ALPHA`].
    pub significant: usize,
    /// Rows compared.
    pub rows: usize,
}

/// Compares `a` with `b` row by row (Mann-Whitney U) and overall (geomean).
pub fn aa(res: &Results, a: &str, b: &str) -> Option<AaResult> {
    let (ca, cb) = (col(res, a)?, col(res, b)?);
    let mut significant = 0;
    let mut rows = 0;
    for r in 0..res.rows.len() {
        if let Some(t) = stats::mann_whitney_u(&res.ns_per_op(r, ca), &res.ns_per_op(r, cb)) {
            rows += 1;
            if t.p < ALPHA {
                significant += 1;
            }
        }
    }
    (rows > 0).then(|| AaResult {
        geomean: stats::geomean(&ratios(res, a, b)),
        significant,
        rows,
    })
}

/// The lines printed under a table: specialised against generic (overall,
/// over the reference's sizes, over the tiny sizes, and the sizes above the
/// 0.6× target), the A/A controls, inline and opt-out against generic, and
/// for the pair shape specialised against the fastest other allocator of
/// each size.
pub fn summary(res: &Results, aa_res: &[(String, Option<AaResult>)]) -> String {
    let mut out = String::new();
    let has = |c: &str| col(res, c).is_some();
    let all = &SIZES[..];
    if has(SPECIALISED) && has(GENERIC) {
        let r = ratios(res, SPECIALISED, GENERIC);
        let above: Vec<String> = res
            .rows
            .iter()
            .zip(&r)
            .filter(|(_, &x)| x.is_nan() || x > 0.6)
            .map(|(row, &x)| format!("{row} B ({})", fmt_ratio(x)))
            .collect();
        let _ = writeln!(
            out,
            "specialised/generic: geomean {} (8…1024 B: {}; 1…15 B: {}); above 0.6×: {}",
            fmt_ratio(geomean_ratio(res, SPECIALISED, GENERIC, all)),
            fmt_ratio(geomean_ratio(res, SPECIALISED, GENERIC, &REFERENCE_SIZES)),
            fmt_ratio(geomean_ratio(res, SPECIALISED, GENERIC, &TINY_SIZES)),
            if above.is_empty() {
                "none".to_string()
            } else {
                above.join(", ")
            }
        );
    }
    for other in [INLINE, LOCAL, OPT_OUT] {
        if has(other) && has(GENERIC) {
            let _ = writeln!(
                out,
                "{other}/generic: geomean {}",
                fmt_ratio(geomean_ratio(res, other, GENERIC, all))
            );
        }
    }
    for (label, a) in aa_res {
        match a {
            Some(a) => {
                let _ = writeln!(
                    out,
                    "A/A control {label}: geomean {}, {} of {} sizes differ at p<{ALPHA} \
                     (chance alone: ~{:.1})",
                    fmt_delta2(a.geomean),
                    a.significant,
                    a.rows,
                    a.rows as f64 * ALPHA
                );
            }
            None => {
                let _ = writeln!(out, "A/A control {label}: no samples");
            }
        }
    }
    let peers: Vec<&str> = GLOBALS.iter().copied().filter(|g| has(g)).collect();
    if res.name.ends_with("/pair") && has(SPECIALISED) && !peers.is_empty() {
        let s = col(res, SPECIALISED).unwrap_or(0);
        let mut slower = Vec::new();
        let mut best_ratios = Vec::new();
        for r in 0..res.rows.len() {
            let (best, best_ns) = peers
                .iter()
                .map(|p| (*p, res.median(r, col(res, p).unwrap_or(0))))
                .fold(("", f64::INFINITY), |a, b| if b.1 < a.1 { b } else { a });
            let ratio = res.median(r, s) / best_ns;
            best_ratios.push(ratio);
            if ratio.is_nan() || ratio >= 1.0 {
                slower.push(format!("{} B ({} {})", res.rows[r], best, fmt_ratio(ratio)));
            }
        }
        let _ = writeln!(
            out,
            "specialised pair / fastest peer of each size ({}): geomean {}; not faster at: {}",
            peers.join(", "),
            fmt_ratio(stats::geomean(&best_ratios)),
            if slower.is_empty() {
                "none".to_string()
            } else {
                slower.join(", ")
            }
        );
    }
    out
}

/// A compact form of a table: the baseline's median in ns, then every
/// other configuration's ratio of medians to it (`0.50×`), marked `~` when
/// the difference is not significant (Mann-Whitney p ≥ [`ALPHA`]).
pub fn ratio_table(res: &Results) -> String {
    let base = &res.configs[res.baseline];
    let mut lines = vec![{
        let mut h = vec!["size (B)".to_string(), format!("{base} (ns)")];
        h.extend(
            res.configs
                .iter()
                .enumerate()
                .filter(|&(c, _)| c != res.baseline)
                .map(|(_, n)| n.clone()),
        );
        h
    }];
    for (r, row) in res.rows.iter().enumerate() {
        let mut l = vec![row.clone(), format!("{:.2}", res.median(r, res.baseline))];
        for c in (0..res.configs.len()).filter(|&c| c != res.baseline) {
            l.push(match res.compare(r, c) {
                None => "-".to_string(),
                Some(cmp) if cmp.significant() => fmt_ratio(cmp.ratio),
                Some(cmp) => format!("~{}", fmt_ratio(cmp.ratio)),
            });
        }
        lines.push(l);
    }
    let mut l = vec![
        "geomean".to_string(),
        format!("{:.2}", res.geomean(res.baseline)),
    ];
    for c in (0..res.configs.len()).filter(|&c| c != res.baseline) {
        l.push(fmt_ratio(res.geomean_ratio(c)));
    }
    lines.push(l);
    let mut out = format!(
        "{}: ratio of medians to {base} (~: not significant at p>={ALPHA})\n",
        res.name
    );
    out.push_str(&align(&lines));
    out
}

/// One line per (size, configuration) for the summary CSV: table, size,
/// configuration, n, median ns, spread, ratio to generic, p-value.
pub fn summary_csv_rows(res: &Results, out: &mut String) {
    for (r, row) in res.rows.iter().enumerate() {
        for (c, config) in res.configs.iter().enumerate() {
            let v = res.ns_per_op(r, c);
            let (ratio, p) = match res.compare(r, c) {
                Some(cmp) if c != res.baseline => (cmp.ratio, cmp.p),
                _ => (1.0, 1.0),
            };
            let _ = writeln!(
                out,
                "{},{row},{config},{},{:.4},{:.4},{:.4},{:.4}",
                res.name,
                v.len(),
                stats::median(&v),
                stats::spread(&v),
                ratio,
                p
            );
        }
    }
}

/// The header of [`summary_csv_rows`]' lines.
pub const SUMMARY_CSV_HEADER: &str = "table,size,config,n,median_ns,spread,ratio_vs_generic,p";

// ---------------------------------------------------------------------------
// callgrind
// ---------------------------------------------------------------------------

/// The instruction count (first event) of a callgrind output file: its
/// `totals:` line, or else its `summary:` line.
pub fn parse_callgrind_total(text: &str) -> Option<u64> {
    let find = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
    };
    find("totals:").or_else(|| find("summary:"))
}

/// Instructions per operation from two measurements of `n` and `2n`
/// operations: their difference over `n`, which cancels the fixed cost of a
/// segment (the call, the loop set-up, the timer reads).
pub fn per_op(ir_n: u64, ir_2n: u64, n: u64) -> f64 {
    (ir_2n as f64 - ir_n as f64) / n.max(1) as f64
}
