//! The one table printer of the bench crate, and the number formats its
//! tables use.
//!
//! A table is a list of lines, each a list of cells, the first line the
//! header. [`align`] prints it as plain text (the first column left-aligned,
//! every other right-aligned, two spaces apart); [`markdown`] as a markdown
//! table (for `RESULTS.md`).

use std::fmt::Write as _;

/// Plain-text columns: the first left-aligned, the others right-aligned,
/// separated by two spaces; trailing blanks trimmed. Lines may be shorter
/// than others (their missing cells are empty).
pub fn align(lines: &[Vec<String>]) -> String {
    let widths = widths(lines);
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

/// A markdown table: the first line is the header; the first column is
/// left-aligned, the others right-aligned. `|` in a cell is escaped.
pub fn markdown(lines: &[Vec<String>]) -> String {
    let widths = widths(lines);
    let mut out = String::new();
    for (n, l) in lines.iter().enumerate() {
        let mut s = String::from("|");
        for (i, w) in widths.iter().enumerate() {
            let c = l.get(i).map(|c| c.replace('|', "\\|")).unwrap_or_default();
            let pad = " ".repeat(w.saturating_sub(c.chars().count()));
            if i == 0 {
                let _ = write!(s, " {c}{pad} |");
            } else {
                let _ = write!(s, " {pad}{c} |");
            }
        }
        let _ = writeln!(out, "{s}");
        if n == 0 {
            let mut sep = String::from("|");
            for (i, w) in widths.iter().enumerate() {
                let dashes = "-".repeat((*w).max(3));
                if i == 0 {
                    let _ = write!(sep, " {dashes} |");
                } else {
                    let _ = write!(sep, " {}: |", &dashes[1..]);
                }
            }
            let _ = writeln!(out, "{sep}");
        }
    }
    out
}

/// The widest cell of each column, in characters.
fn widths(lines: &[Vec<String>]) -> Vec<usize> {
    let cols = lines.iter().map(Vec::len).max().unwrap_or(0);
    (0..cols)
        .map(|i| {
            lines
                .iter()
                .filter_map(|l| l.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect()
}

/// Nanoseconds with about three significant digits: `5.12`, `51.2`, `512`.
pub fn fmt_ns(ns: f64) -> String {
    if ns.is_nan() {
        "-".to_string()
    } else if ns >= 100.0 {
        format!("{ns:.0}")
    } else if ns >= 10.0 {
        format!("{ns:.1}")
    } else {
        format!("{ns:.2}")
    }
}

/// A spread (a fraction of the median) as a whole percentage: `0.031` → `3%`.
pub fn fmt_spread(f: f64) -> String {
    if f.is_nan() {
        "?".to_string()
    } else {
        format!("{:.0}%", f * 100.0)
    }
}

/// A ratio as a signed percentage change, one decimal: `1.105` → `+10.5%`.
pub fn fmt_delta(ratio: f64) -> String {
    if ratio.is_nan() {
        "-".to_string()
    } else {
        format!("{:+.1}%", (ratio - 1.0) * 100.0)
    }
}

/// A ratio as a signed percentage change, two decimals (for A/A controls,
/// whose differences are small): `1.0021` → `+0.21%`.
pub fn fmt_delta2(ratio: f64) -> String {
    if ratio.is_nan() {
        "-".to_string()
    } else {
        format!("{:+.2}%", (ratio - 1.0) * 100.0)
    }
}

/// A ratio as `0.55×`.
pub fn fmt_ratio(r: f64) -> String {
    if r.is_nan() {
        "-".to_string()
    } else {
        format!("{r:.2}×")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[&[&str]]) -> Vec<Vec<String>> {
        v.iter()
            .map(|l| l.iter().map(|c| c.to_string()).collect())
            .collect()
    }

    #[test]
    fn text_alignment() {
        assert_eq!(
            align(&t(&[&["a", "bb"], &["ccc", "d"]])),
            "a    bb\nccc   d\n"
        );
        // Short lines, and characters wider than a byte.
        assert_eq!(
            align(&t(&[&["x", "0.50×", "y"], &["long"]])),
            "x     0.50×  y\nlong\n"
        );
    }

    #[test]
    fn markdown_table() {
        let m = markdown(&t(&[&["program", "ms"], &["json", "312"], &["a|b", "1"]]));
        assert_eq!(
            m,
            "| program |  ms |\n| ------- | --: |\n| json    | 312 |\n| a\\|b    |   1 |\n"
        );
    }

    #[test]
    fn number_formats() {
        assert_eq!(fmt_ns(5.123), "5.12");
        assert_eq!(fmt_ns(51.23), "51.2");
        assert_eq!(fmt_ns(512.3), "512");
        assert_eq!(fmt_spread(0.031), "3%");
        assert_eq!(fmt_delta(1.105), "+10.5%");
        assert_eq!(fmt_delta(0.9), "-10.0%");
        assert_eq!(fmt_delta2(1.0021), "+0.21%");
        assert_eq!(fmt_ratio(0.554), "0.55×");
        for f in [fmt_ns, fmt_delta, fmt_delta2, fmt_ratio] {
            assert_eq!(f(f64::NAN), "-");
        }
        assert_eq!(fmt_spread(f64::NAN), "?");
    }
}
