//! The sweep's answer, printed first: per size range, what a specialised
//! allocation costs and how that compares with the generic path, the system
//! allocator and the best of the peers; and the chart's data.

use super::*;
use crate::chart::Series;
use crate::harness::Results;
use crate::stats;
use crate::table::{align, fmt_ns, fmt_ratio};

/// The size ranges of the headline table: the tiny sizes, Go's specialised
/// range above them (Go 1.27 specialises up to 80 B), the small classes
/// above it, and the sizes where span refills dominate.
pub const RANGES: [(&str, &[usize]); 4] = [
    ("1–15 B", &TINY_SIZES),
    ("16–80 B", &[16, 24, 32, 48, 64, 80]),
    ("96–256 B", &[96, 112, 128, 160, 256]),
    ("512–1024 B", &[512, 1024]),
];

/// The peers the best-peer column picks from (the system allocator has its
/// own column).
pub const PEERS: [&str; 3] = ["mimalloc", "jemalloc", "snmalloc"];

/// The geomean over the rows whose size is in `sizes` of `config`'s medians.
fn geomean_ns(res: &Results, config: &str, sizes: &[usize]) -> f64 {
    let Some(c) = res.configs.iter().position(|x| x == config) else {
        return f64::NAN;
    };
    let medians: Vec<f64> = res
        .rows
        .iter()
        .enumerate()
        .filter(|(_, row)| sizes.iter().any(|s| s.to_string() == **row))
        .map(|(r, _)| res.median(r, c))
        .collect();
    stats::geomean(&medians)
}

/// The headline table, one block of rows per table in `tables` (labelled
/// by the paired label), one row per size range: specialised's cost (the
/// geomean of its medians over the range, ns), then its geomean ratio to
/// `generic`, to `system` and to the peer with the lowest geomean cost over
/// the range (named). A missing configuration gives `-`.
pub fn headline(tables: &[(&str, &Results)]) -> String {
    let mut lines = vec![[
        "",
        "size",
        "specialised",
        "vs generic",
        "vs system",
        "vs best peer",
    ]
    .map(String::from)
    .to_vec()];
    for (label, res) in tables {
        for (i, (range, sizes)) in RANGES.iter().enumerate() {
            let ns = geomean_ns(res, SPECIALISED, sizes);
            let best = PEERS
                .iter()
                .map(|p| (*p, geomean_ns(res, p, sizes)))
                .filter(|(_, ns)| ns.is_finite())
                .min_by(|a, b| a.1.total_cmp(&b.1));
            lines.push(vec![
                if i == 0 {
                    label.to_string()
                } else {
                    String::new()
                },
                range.to_string(),
                format!("{} ns", fmt_ns(ns)),
                fmt_ratio(geomean_ratio(res, SPECIALISED, GENERIC, sizes)),
                fmt_ratio(geomean_ratio(res, SPECIALISED, "system", sizes)),
                match best {
                    Some((p, _)) => format!(
                        "{} {p}",
                        fmt_ratio(geomean_ratio(res, SPECIALISED, p, sizes))
                    ),
                    None => "-".to_string(),
                },
            ]);
        }
    }
    align(&lines)
}

/// The configurations the chart draws, in legend order.
pub const CHART_CONFIGS: [&str; 7] = [
    SPECIALISED,
    GENERIC,
    OPT_OUT,
    "system",
    "mimalloc",
    "jemalloc",
    "snmalloc",
];

/// The chart's lines: for each of [`CHART_CONFIGS`] present in `res`, its
/// median cost at each size (x: bytes, y: ns).
pub fn chart_series(res: &Results) -> Vec<Series> {
    CHART_CONFIGS
        .iter()
        .filter_map(|&config| {
            let c = res.configs.iter().position(|x| x == config)?;
            let points: Vec<(f64, f64)> = res
                .rows
                .iter()
                .enumerate()
                .filter_map(|(r, row)| {
                    let y = res.median(r, c);
                    Some((row.parse::<f64>().ok()?, y)).filter(|_| y.is_finite())
                })
                .collect();
            (!points.is_empty()).then(|| Series {
                name: config.to_string(),
                points,
            })
        })
        .collect()
}
