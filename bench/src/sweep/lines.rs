//! The lines the worker and the driver exchange (samples, iteration
//! counts) and the pool of samples they fill.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{AllocPath, Shape, GENERIC, SIZES};
use crate::harness::{Results, Sample};

/// Identifies one cell: configuration, path, shape and size.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CellId {
    /// Configuration name.
    pub config: String,
    /// Allocation path.
    pub path: AllocPath,
    /// Shape.
    pub shape: Shape,
    /// Size in bytes.
    pub size: usize,
}

impl CellId {
    fn fields(&self) -> String {
        format!(
            "{},{},{},{}",
            self.config,
            self.path.name(),
            self.shape.name(),
            self.size
        )
    }

    fn parse_fields(f: &[&str]) -> Option<CellId> {
        match f {
            [config, path, shape, size] => Some(CellId {
                config: config.to_string(),
                path: AllocPath::parse(path)?,
                shape: Shape::parse(shape)?,
                size: size.parse().ok()?,
            }),
            _ => None,
        }
    }
}

/// One timed call of a cell, as the worker reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SampleLine {
    /// The cell.
    pub cell: CellId,
    /// Position of the call in the worker's shuffled order.
    pub position: usize,
    /// Iterations run (repetitions of the batch, or pairs).
    pub iters: u64,
    /// Operations timed (allocations, or pairs).
    pub ops: u64,
    /// Time they took, in nanoseconds.
    pub elapsed_ns: u64,
}

impl SampleLine {
    /// The line the worker prints.
    pub fn format(&self) -> String {
        format!(
            "sample,{},{},{},{},{}",
            self.cell.fields(),
            self.position,
            self.iters,
            self.ops,
            self.elapsed_ns
        )
    }

    /// Parses [`format`](Self::format)'s output; `None` for any other line.
    pub fn parse(line: &str) -> Option<SampleLine> {
        let f: Vec<&str> = line.trim_end().split(',').collect();
        if f.len() != 9 || f[0] != "sample" {
            return None;
        }
        Some(SampleLine {
            cell: CellId::parse_fields(&f[1..5])?,
            position: f[5].parse().ok()?,
            iters: f[6].parse().ok()?,
            ops: f[7].parse().ok()?,
            elapsed_ns: f[8].parse().ok()?,
        })
    }

    /// As a harness sample of round `round`.
    pub fn to_sample(&self, round: usize) -> Sample {
        Sample {
            round,
            position: self.position,
            iters: self.iters,
            ops: self.ops,
            elapsed: Duration::from_nanos(self.elapsed_ns),
            ns_per_op: self.elapsed_ns as f64 / self.ops.max(1) as f64,
        }
    }
}

/// Formats an iteration-count line (`calibrate`'s output, `run`'s input).
pub fn format_iters(cell: &CellId, iters: u64) -> String {
    format!("iters,{},{iters}", cell.fields())
}

/// Parses a line of [`format_iters`].
pub fn parse_iters(line: &str) -> Option<(CellId, u64)> {
    let f: Vec<&str> = line.trim_end().split(',').collect();
    if f.len() != 6 || f[0] != "iters" {
        return None;
    }
    Some((CellId::parse_fields(&f[1..5])?, f[5].parse().ok()?))
}

/// Samples pooled over rounds and processes.
#[derive(Clone, Debug, Default)]
pub struct Pool {
    cells: BTreeMap<CellId, Vec<Sample>>,
}

impl Pool {
    /// Adds the worker's line `s`, taken in round `round`.
    pub fn add(&mut self, s: &SampleLine, round: usize) {
        self.cells
            .entry(s.cell.clone())
            .or_default()
            .push(s.to_sample(round));
    }

    /// The samples of one cell.
    pub fn samples(&self, cell: &CellId) -> &[Sample] {
        self.cells.get(cell).map_or(&[], Vec::as_slice)
    }

    /// The table of one path and shape: rows [`SIZES`], columns `columns`,
    /// baseline [`GENERIC`] (or the first column if it is absent).
    pub fn results(&self, path: AllocPath, shape: Shape, columns: &[String]) -> Results {
        let samples = SIZES
            .iter()
            .map(|&size| {
                columns
                    .iter()
                    .map(|config| {
                        self.samples(&CellId {
                            config: config.clone(),
                            path,
                            shape,
                            size,
                        })
                        .to_vec()
                    })
                    .collect()
            })
            .collect();
        Results {
            name: format!("{}/{}", path.name(), shape.name()),
            description: shape.unit().to_string(),
            configs: columns.to_vec(),
            baseline: columns.iter().position(|c| c == GENERIC).unwrap_or(0),
            rows: SIZES.iter().map(|s| s.to_string()).collect(),
            samples,
        }
    }
}
