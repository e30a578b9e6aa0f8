//! SVG charts of the benchmarks' results, drawn with `plotters` (its SVG
//! backend only: no system libraries, no fonts read; the text is SVG text).
//!
//! * [`size_chart`]: cost per allocation size, one line per configuration
//!   (the size sweep);
//! * [`ratio_chart`]: per program, each allocator's time relative to a
//!   baseline (the C-workload table and the real-workload suite, against
//!   glibc);
//! * [`panel_chart`]: small line charts against the thread count, one per
//!   program (the scaling table).

use std::path::Path;

use plotters::prelude::*;

/// One line (or set of markers) of a chart: its legend name and its points.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// `(x, y)` points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// Width and height of every chart, in pixels.
const SIZE: (u32, u32) = (960, 540);

fn err<E: std::fmt::Display>(path: &Path) -> impl Fn(E) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// The colour of the `i`-th series.
fn colour(i: usize) -> RGBColor {
    const C: [RGBColor; 8] = [
        RGBColor(214, 39, 40),   // red: specalloc's own line first
        RGBColor(31, 119, 180),  // blue
        RGBColor(127, 127, 127), // grey
        RGBColor(44, 160, 44),   // green
        RGBColor(255, 127, 14),  // orange
        RGBColor(148, 103, 189), // purple
        RGBColor(140, 86, 75),   // brown
        RGBColor(23, 190, 207),  // cyan
    ];
    C[i % C.len()]
}

/// Draws the title and the note's lines (split at `\n`) at the top of `root`;
/// returns the area under them.
fn header<'a>(
    root: &DrawingArea<SVGBackend<'a>, plotters::coord::Shift>,
    title: &str,
    note: &str,
) -> Result<DrawingArea<SVGBackend<'a>, plotters::coord::Shift>, DrawingAreaErrorKind<std::io::Error>>
{
    let lines: Vec<&str> = note.lines().collect();
    let (top, body) = root.split_vertically(36 + 18 * lines.len() as u32);
    top.draw_text(title, &("sans-serif", 20).into_text_style(&top), (10, 6))?;
    for (i, line) in lines.iter().enumerate() {
        let y = 32 + 18 * i as i32;
        top.draw_text(line, &("sans-serif", 13).into_text_style(&top), (10, y))?;
    }
    Ok(body)
}

/// The smallest positive y of `series`, for the bottom of a log y axis.
fn y_min(series: &[Series]) -> f64 {
    series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite() && *y > 0.0)
        .fold(f64::INFINITY, f64::min)
}

/// The largest y of `series`, for the top of the y axis.
fn y_max(series: &[Series]) -> f64 {
    series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max)
}

/// A chart of `x`/`y` coordinates (a linear or log scale each) on the SVG backend.
type Chart<'a, X, Y> = ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>;

/// Draws `points` as a line of `colour`, `width` pixels wide, with a marker at each point;
/// named `legend` in the chart's legend when given.
fn draw_line<X, Y>(
    chart: &mut Chart<'_, X, Y>,
    path: &Path,
    points: &[(f64, f64)],
    colour: RGBColor,
    width: u32,
    legend: Option<&str>,
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let line = chart
        .draw_series(LineSeries::new(points.to_vec(), colour.stroke_width(width)))
        .map_err(err(path))?;
    if let Some(name) = legend {
        line.label(name).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(3))
        });
    }
    chart
        .draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled())))
        .map_err(err(path))?;
    Ok(())
}

/// The label of category axis position `x`: `labels[i]` at the whole number `i`, nothing between.
fn category_label(labels: &[String], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() < 0.01 && i >= 0.0 {
        labels.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

/// Draws a thin black dashed line from `from` to `to`.
fn draw_dashed<X, Y>(
    chart: &mut Chart<'_, X, Y>,
    path: &Path,
    from: (f64, f64),
    to: (f64, f64),
) -> Result<(), String>
where
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    chart
        .draw_series(DashedLineSeries::new(
            vec![from, to],
            6,
            4,
            BLACK.stroke_width(1),
        ))
        .map_err(err(path))?;
    Ok(())
}

/// Draws the legend of the series labelled so far at `position`, on a white box.
fn draw_legend<X: Ranged, Y: Ranged>(
    chart: &mut Chart<'_, X, Y>,
    path: &Path,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(err(path))
}

/// A line chart of cost against allocation size: x on a log scale from 1 to
/// 1024 bytes, y on a log scale too (costs differ tenfold between sizes and
/// allocators); `note` (for example "--quick: not a measurement", one line
/// per `\n`) goes under the title.
pub fn size_chart(
    path: &Path,
    title: &str,
    note: &str,
    y_label: &str,
    series: &[Series],
) -> Result<(), String> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let body = header(&root, title, note).map_err(err(path))?;
    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(
            (1f64..1100f64).log_scale(),
            (y_min(series).min(1e9) * 0.8..y_max(series).max(1e-9) * 1.25).log_scale(),
        )
        .map_err(err(path))?;
    chart
        .configure_mesh()
        .x_desc("allocation size (bytes, log scale)")
        .y_desc(format!("{y_label} (log scale)"))
        .y_label_formatter(&|y| {
            if *y < 10.0 {
                format!("{y:.1}")
            } else {
                format!("{y:.0}")
            }
        })
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()
        .map_err(err(path))?;
    for (i, s) in series.iter().enumerate() {
        let width = if i == 0 { 3 } else { 2 };
        draw_line(&mut chart, path, &s.points, colour(i), width, Some(&s.name))?;
    }
    draw_legend(&mut chart, path, SeriesLabelPosition::UpperLeft)?;
    root.present().map_err(err(path))?;
    Ok(())
}

/// A dot chart of ratios per category: one column per entry of
/// `categories` (a program), one marker per series (an allocator) at its
/// ratio to the baseline, whose level 1.0 is a dashed line; `series[k]`'s
/// point `(i, y)` belongs to category `i`.
pub fn ratio_chart(
    path: &Path,
    title: &str,
    note: &str,
    y_label: &str,
    categories: &[String],
    series: &[Series],
) -> Result<(), String> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let body = header(&root, title, note).map_err(err(path))?;
    let n = categories.len().max(1);
    // Headroom above the highest point for the legend, so that it hides no marker.
    let y_top = y_max(series).max(1.0) * (1.2 + 0.05 * series.len() as f64);
    let mut chart = ChartBuilder::on(&body)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(-0.5f64..n as f64 - 0.5, 0f64..y_top)
        .map_err(err(path))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&|x| category_label(categories, *x))
        .y_desc(y_label)
        .draw()
        .map_err(err(path))?;
    draw_dashed(&mut chart, path, (-0.5, 1.0), (n as f64 - 0.5, 1.0))?;
    let k = series.len().max(1) as f64;
    for (j, s) in series.iter().enumerate() {
        let c = colour(j);
        // Side by side within a category, so that equal ratios stay visible.
        let dx = (j as f64 - (k - 1.0) / 2.0) * (0.6 / k);
        chart
            .draw_series(
                s.points
                    .iter()
                    .map(|&(x, y)| Circle::new((x + dx, y), 5, c.filled())),
            )
            .map_err(err(path))?
            .label(s.name.as_str())
            .legend(move |(x, y)| Circle::new((x + 10, y), 5, c.filled()));
    }
    draw_legend(&mut chart, path, SeriesLabelPosition::UpperRight)?;
    root.present().map_err(err(path))?;
    Ok(())
}

/// One panel of a [`panel_chart`]: its title and its lines.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    /// The panel's title (a program).
    pub title: String,
    /// Its lines, `(i, y)` with `i` the index of an x label ([`PanelAxes::x_labels`]).
    pub series: Vec<Series>,
}

/// The axes every panel of a [`panel_chart`] shares.
#[derive(Clone, Debug, PartialEq)]
pub struct PanelAxes {
    /// The x axis's description (`threads`).
    pub x_desc: String,
    /// The x values, equally spaced, in order (`1`, `2`, `4`, …).
    pub x_labels: Vec<String>,
    /// The y axis's description.
    pub y_desc: String,
    /// Where to draw a vertical dashed line, in x label indices (`1.5`: between the second
    /// and the third), if anywhere.
    pub divider: Option<f64>,
}

/// Small line charts in two columns, one per panel, with the same x values on each x axis
/// (equally spaced) and each panel's own y axis from 0; a series has the same colour in every
/// panel, and the first panel's legend names them.
pub fn panel_chart(
    path: &Path,
    title: &str,
    note: &str,
    axes: &PanelAxes,
    panels: &[Panel],
) -> Result<(), String> {
    let rows = panels.len().div_ceil(2).max(1);
    let height = 60 + 18 * note.lines().count() as u32 + 320 * rows as u32;
    let root = SVGBackend::new(path, (SIZE.0, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err(path))?;
    let body = header(&root, title, note).map_err(err(path))?;
    let n = axes.x_labels.len().max(1);
    for (panel, area) in panels.iter().zip(body.split_evenly((rows, 2))) {
        let first = std::ptr::eq(panel, &panels[0]);
        // Headroom in the first panel for the legend, so that it hides no line.
        let room = if first {
            1.2 + 0.07 * panel.series.len() as f64
        } else {
            1.15
        };
        let y_top = y_max(&panel.series).max(1e-9) * room;
        let mut chart = ChartBuilder::on(&area)
            .caption(&panel.title, ("sans-serif", 15))
            .margin(10)
            .x_label_area_size(32)
            .y_label_area_size(56)
            .build_cartesian_2d(-0.3f64..n as f64 - 0.7, 0f64..y_top)
            .map_err(err(path))?;
        chart
            .configure_mesh()
            .x_labels(n)
            .x_label_formatter(&|x| category_label(&axes.x_labels, *x))
            .x_desc(axes.x_desc.as_str())
            .y_desc(axes.y_desc.as_str())
            .draw()
            .map_err(err(path))?;
        if let Some(x) = axes.divider {
            draw_dashed(&mut chart, path, (x, 0.0), (x, y_top))?;
        }
        for (i, s) in panel.series.iter().enumerate() {
            let legend = first.then_some(s.name.as_str());
            draw_line(&mut chart, path, &s.points, colour(i), 2, legend)?;
        }
        if first {
            draw_legend(&mut chart, path, SeriesLabelPosition::UpperRight)?;
        }
    }
    root.present().map_err(err(path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("specalloc-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    #[test]
    fn size_chart_draws_every_series_and_the_note() {
        let p = tmp("sizes.svg");
        let s = |name: &str, k: f64| Series {
            name: name.into(),
            points: [1.0f64, 8.0, 80.0, 1024.0]
                .iter()
                .map(|&x| (x, k * x.ln_1p()))
                .collect(),
        };
        size_chart(
            &p,
            "cost per allocation",
            "--quick: not a measurement",
            "ns",
            &[s("specialised", 1.0), s("generic", 2.0)],
        )
        .unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        for text in [
            "cost per allocation",
            "not a measurement",
            "specialised",
            "generic",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        // The x axis is labelled in bytes (plotters writes each text on a line of its own).
        assert!(svg.lines().any(|l| l.trim() == "100"), "no x label 100");
        // Each series is drawn in its own colour: its line and its legend mark.
        for colour in ["#D62728", "#1F77B4"] {
            let lines = svg
                .lines()
                .filter(|l| l.starts_with("<polyline") && l.contains(colour))
                .count();
            assert_eq!(lines, 2, "{colour}: a line and a legend mark");
        }
    }

    #[test]
    fn ratio_chart_names_every_category_and_series() {
        let p = tmp("ratios.svg");
        let cats: Vec<String> = ["json", "syn", "graph"].map(String::from).to_vec();
        let series = vec![
            Series {
                name: "specalloc".into(),
                points: vec![(0.0, 0.9), (1.0, 1.2), (2.0, 0.7)],
            },
            Series {
                name: "mimalloc".into(),
                points: vec![(0.0, 1.0), (2.0, 0.8)],
            },
        ];
        ratio_chart(&p, "time relative to glibc", "", "ratio", &cats, &series).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        for text in [
            "json",
            "syn",
            "graph",
            "specalloc",
            "mimalloc",
            "relative to glibc",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        // Five points and two legend markers.
        assert_eq!(svg.matches("<circle").count(), 7);
    }

    #[test]
    fn panel_chart_draws_a_panel_per_program_and_one_legend() {
        let p = tmp("panels.svg");
        let counts = ["1", "2", "3", "16"];
        let line = |name: &str, k: f64| Series {
            name: name.into(),
            points: (0..counts.len())
                .map(|i| (i as f64, k * i as f64))
                .collect(),
        };
        let panels: Vec<Panel> = ["larson", "xmalloc", "falseshare"]
            .iter()
            .map(|t| Panel {
                title: t.to_string(),
                series: vec![line("specalloc", 1.0), line("mimalloc", 2.0)],
            })
            .collect();
        let axes = PanelAxes {
            x_desc: "threads".into(),
            x_labels: counts.map(String::from).to_vec(),
            y_desc: "M/s".into(),
            divider: Some(1.5),
        };
        panel_chart(&p, "throughput by threads", "2 cores", &axes, &panels).unwrap();
        let svg = std::fs::read_to_string(&p).unwrap();
        for text in [
            "larson",
            "xmalloc",
            "falseshare",
            "throughput by threads",
            "threads",
        ] {
            assert!(svg.contains(text), "{text} missing");
        }
        // Every x value labels the x axes (plotters writes each text on a line of its own).
        for label in counts {
            assert!(svg.lines().any(|l| l.trim() == label), "no x label {label}");
        }
        // The legend names each series once, in the first panel.
        assert_eq!(svg.lines().filter(|l| l.trim() == "mimalloc").count(), 1);
        // Four markers per line, two lines per panel.
        assert_eq!(svg.matches("<circle").count(), 3 * 2 * 4);
    }
}
