//! Interleaved-rounds benchmark machinery.
//!
//! A [`Benchmark`] is a table to fill: its *rows* are the cases measured
//! (allocation sizes, say), its *configurations* are the things compared
//! (allocators). Each (row, configuration) cell has a timing function,
//! `FnMut(iterations) -> Duration`, that runs its operation the given number
//! of times and returns how long that took.
//!
//! [`Benchmark::run`] first calibrates each cell's iteration count so one
//! call takes about [`Options::target_sample`], then runs one untimed
//! warm-up round, then [`Options::rounds`] timed rounds. Every round calls
//! every cell once, in a freshly shuffled order, so slow drift of the machine
//! (frequency scaling, a noisy neighbour) spreads evenly over all cells
//! instead of biasing whichever ran first or last. Each call gives one sample
//! in nanoseconds per operation; the samples of a cell are pooled across
//! rounds, and [`Results`] summarises them.
//!
//! An A/A control is the same timing function registered under two
//! configuration names; its delta against the original should be ~0 and not
//! significant, which shows how much of any other delta is noise.

use std::fmt::Write as _;
use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::cli::{self, Common, Stop, Usage};
use crate::stats;
use crate::table::{self, fmt_delta, fmt_ns, fmt_spread};
use crate::workers::target_dir;

/// Significance level below which a difference is reported; above it the
/// table prints `~` (as benchstat does).
pub const ALPHA: f64 = 0.05;

/// How a [`Benchmark`] is run.
#[derive(Clone, Debug, PartialEq)]
pub struct Options {
    /// Number of timed rounds, i.e. samples per cell.
    pub rounds: usize,
    /// Calibration aims for each timed call to take about this long.
    pub target_sample: Duration,
    /// Seed for the per-round shuffle of the cells, for reproducible orders.
    pub seed: u64,
    /// Whether to print progress to stderr.
    pub progress: bool,
}

impl Default for Options {
    /// The full run: 30 rounds of ~20 ms samples.
    fn default() -> Self {
        Options {
            rounds: 30,
            target_sample: Duration::from_millis(20),
            seed: 0x5eed_a110c,
            progress: true,
        }
    }
}

impl Options {
    /// A short run for smoke tests: 6 rounds of ~5 ms samples.
    pub fn quick() -> Self {
        Options {
            rounds: 6,
            target_sample: Duration::from_millis(5),
            ..Options::default()
        }
    }
}

/// Parsed command line of a benchmark binary built on [`Benchmark`]: the
/// shared flags of [`crate::cli`] (`--quick`, `--rounds N`, `--seed N`,
/// `--out PATH`, `--help`).
#[derive(Clone, Debug, PartialEq)]
pub struct Cli {
    /// Run options; `--quick` selects [`Options::quick`], and `--rounds` and
    /// `--seed` override the respective fields.
    pub options: Options,
    /// Where to write the raw samples (`--out PATH`); by default
    /// `bench-<name>.csv` in the cargo target directory.
    pub out: PathBuf,
    /// Whether `--quick` was given.
    pub quick: bool,
}

/// The usage of [`Cli`], for a binary called `name`.
pub fn usage(name: &'static str) -> Usage {
    Usage {
        name,
        synopsis: "[--quick] [--rounds N] [--seed N] [--out PATH]",
        flags: Common::help(
            "6 rounds of ~5 ms samples (under 10 s)",
            30,
            "write the raw samples (CSV) here (default: <target>/bench-NAME.csv)",
        ),
    }
}

impl Cli {
    /// Parses `args` (without the program name) for the binary `name`.
    ///
    /// Returns the [`Stop`] of `--help` (the help text) or of an unknown
    /// flag or a missing or malformed value (the error and the usage line).
    pub fn from_args<I: IntoIterator<Item = String>>(
        name: &'static str,
        args: I,
    ) -> Result<Cli, Stop> {
        let mut common = Common::default();
        cli::parse(&usage(name), args, |arg, p| common.take(arg, p))?;
        let mut options = if common.quick {
            Options::quick()
        } else {
            Options::default()
        };
        if let Some(n) = common.rounds {
            options.rounds = n as usize;
        }
        if let Some(s) = common.seed {
            options.seed = s;
        }
        let out = common
            .out
            .unwrap_or_else(|| target_dir().join(format!("bench-{name}.csv")));
        Ok(Cli {
            options,
            out,
            quick: common.quick,
        })
    }

    /// Parses the process's arguments; on `--help` prints the help on stdout
    /// and exits 0, on an error prints it and the usage line on stderr and
    /// exits 2.
    pub fn from_env(name: &'static str) -> Cli {
        Cli::from_args(name, std::env::args().skip(1)).unwrap_or_else(|stop| stop.exit())
    }
}

/// A timing function: runs its operation `iterations` times, returns the
/// elapsed time.
type TimingFn<'a> = Box<dyn FnMut(u64) -> Duration + 'a>;

/// One (row, configuration) cell of a [`Benchmark`].
struct Cell<'a> {
    row: usize,
    config: usize,
    ops_per_iter: u64,
    iters: u64,
    time: TimingFn<'a>,
}

/// A set of timing functions laid out as rows × configurations; see the
/// [module documentation](self).
pub struct Benchmark<'a> {
    name: String,
    description: String,
    configs: Vec<String>,
    baseline: usize,
    rows: Vec<String>,
    cells: Vec<Cell<'a>>,
}

impl<'a> Benchmark<'a> {
    /// A benchmark called `name` (used in the CSV and in progress output),
    /// with a one-line `description` printed above its table.
    ///
    /// Configurations are added on first use by [`add`](Self::add), in that
    /// order; the first one is the baseline unless
    /// [`baseline`](Self::baseline) says otherwise.
    pub fn new(name: &str, description: &str) -> Self {
        Benchmark {
            name: name.to_string(),
            description: description.to_string(),
            configs: Vec::new(),
            baseline: 0,
            rows: Vec::new(),
            cells: Vec::new(),
        }
    }

    /// Makes `config` the column every other configuration is compared with.
    ///
    /// # Panics
    ///
    /// If no cell of `config` has been added yet.
    pub fn baseline(&mut self, config: &str) -> &mut Self {
        self.baseline = self
            .configs
            .iter()
            .position(|c| c == config)
            .unwrap_or_else(|| panic!("baseline {config:?} is not a configuration"));
        self
    }

    /// Adds the cell (`row`, `config`), timed by `time`. One iteration of
    /// `time` performs `ops_per_iter` operations, so a sample is
    /// `elapsed / (iterations * ops_per_iter)` nanoseconds per operation.
    ///
    /// Rows and configurations appear in the table in order of first use.
    ///
    /// # Panics
    ///
    /// If the cell was already added or `ops_per_iter` is zero.
    pub fn add<F>(&mut self, row: &str, config: &str, ops_per_iter: u64, time: F) -> &mut Self
    where
        F: FnMut(u64) -> Duration + 'a,
    {
        assert!(ops_per_iter > 0, "ops_per_iter must be positive");
        let row = index_of(&mut self.rows, row);
        let config = index_of(&mut self.configs, config);
        assert!(
            !self
                .cells
                .iter()
                .any(|c| c.row == row && c.config == config),
            "cell ({}, {}) added twice",
            self.rows[row],
            self.configs[config]
        );
        self.cells.push(Cell {
            row,
            config,
            ops_per_iter,
            iters: 1,
            time: Box::new(time),
        });
        self
    }

    /// Calibrates, warms up and runs all cells for `opts.rounds` interleaved
    /// rounds, and returns the samples.
    pub fn run(&mut self, opts: &Options) -> Results {
        let start = Instant::now();
        let mut progress = Progress::new(opts.progress, &self.name);
        let total = self.cells.len();
        for (i, cell) in self.cells.iter_mut().enumerate() {
            progress.show(&format!("calibrating {}/{total}", i + 1));
            cell.iters = calibrate(&mut cell.time, opts.target_sample);
        }
        let mut rng = SplitMix64(opts.seed);
        let mut order: Vec<usize> = (0..self.cells.len()).collect();
        // Warm-up: one untimed round, then the timed ones.
        rng.shuffle(&mut order);
        progress.show("warm-up round");
        for &i in &order {
            let cell = &mut self.cells[i];
            (cell.time)(cell.iters);
        }
        let mut samples =
            vec![vec![Vec::with_capacity(opts.rounds); self.configs.len()]; self.rows.len()];
        for round in 0..opts.rounds {
            progress.show(&format!(
                "round {}/{} ({:.1} s)",
                round + 1,
                opts.rounds,
                start.elapsed().as_secs_f64()
            ));
            rng.shuffle(&mut order);
            for (position, &i) in order.iter().enumerate() {
                let cell = &mut self.cells[i];
                let elapsed = (cell.time)(cell.iters);
                let ops = cell.iters * cell.ops_per_iter;
                samples[cell.row][cell.config].push(Sample {
                    round,
                    position,
                    iters: cell.iters,
                    ops,
                    elapsed,
                    ns_per_op: elapsed.as_nanos() as f64 / ops as f64,
                });
            }
        }
        progress.done(start.elapsed());
        Results {
            name: self.name.clone(),
            description: self.description.clone(),
            configs: self.configs.clone(),
            baseline: self.baseline,
            rows: self.rows.clone(),
            samples,
        }
    }
}

/// The index of `name` in `names`, appending it if absent.
fn index_of(names: &mut Vec<String>, name: &str) -> usize {
    names.iter().position(|n| n == name).unwrap_or_else(|| {
        names.push(name.to_string());
        names.len() - 1
    })
}

/// Picks an iteration count for which `time` takes about `target`.
///
/// The first call (one iteration) is discarded: it may pay one-off costs such
/// as an allocator's initialisation, which would otherwise make a fast
/// operation look slow and leave it with a tiny count. Then the count is
/// rescaled from each measurement, growing at most 100× (and shrinking at
/// most 100×) per step, as Go's testing package does, until a call lands
/// within `[target / 2, 2 target]`, two successive steps leave the count
/// unchanged (an operation slower than `target / 2`), or ten steps have been
/// made. The calls made here double as warm-up.
fn calibrate(time: &mut dyn FnMut(u64) -> Duration, target: Duration) -> u64 {
    const MAX_ITERS: u64 = 1 << 40;
    let target_ns = target.as_nanos().max(1) as f64;
    time(1);
    let mut iters: u64 = 1;
    let mut unchanged = false;
    for _ in 0..10 {
        let ns = time(iters).as_nanos() as f64;
        let lo = (iters / 100).max(1);
        let hi = iters.saturating_mul(100).min(MAX_ITERS);
        let next = if ns <= 0.0 {
            hi
        } else {
            ((iters as f64 * target_ns / ns).round() as u64).clamp(lo, hi)
        };
        if (target_ns / 2.0..=target_ns * 2.0).contains(&ns) || (unchanged && next == iters) {
            return next;
        }
        unchanged = next == iters;
        iters = next;
    }
    iters
}

/// Prints progress lines to stderr: overwritten in place on a terminal,
/// otherwise only the first line and a final summary.
struct Progress<'n> {
    enabled: bool,
    tty: bool,
    name: &'n str,
    shown: bool,
}

impl<'n> Progress<'n> {
    fn new(enabled: bool, name: &'n str) -> Self {
        Progress {
            enabled,
            tty: io::stderr().is_terminal(),
            name,
            shown: false,
        }
    }

    fn show(&mut self, msg: &str) {
        if !self.enabled {
            return;
        }
        let mut err = io::stderr().lock();
        if self.tty {
            let _ = write!(err, "\r\x1b[K[{}] {msg}", self.name);
        } else if !self.shown {
            let _ = writeln!(err, "[{}] {msg} ...", self.name);
        }
        let _ = err.flush();
        self.shown = true;
    }

    fn done(&mut self, elapsed: Duration) {
        if !self.enabled {
            return;
        }
        let prefix = if self.tty { "\r\x1b[K" } else { "" };
        eprintln!(
            "{prefix}[{}] done in {:.1} s",
            self.name,
            elapsed.as_secs_f64()
        );
    }
}

/// A small deterministic PRNG (SplitMix64), used only to shuffle the order
/// of benchmark cells and processes.
///
/// ```
/// let mut r = specalloc_bench::harness::SplitMix64(7);
/// let mut v = [1, 2, 3, 4];
/// r.shuffle(&mut v);
/// v.sort();
/// assert_eq!(v, [1, 2, 3, 4]);
/// ```
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next pseudo-random number.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Fisher-Yates shuffle.
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// One timed call of a cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// The round it was taken in, from 0.
    pub round: usize,
    /// Its position in that round's shuffled order, from 0.
    pub position: usize,
    /// Iterations run.
    pub iters: u64,
    /// Operations run: `iters * ops_per_iter`.
    pub ops: u64,
    /// Time the call took.
    pub elapsed: Duration,
    /// `elapsed` in nanoseconds divided by `ops`.
    pub ns_per_op: f64,
}

/// The comparison of one cell with the baseline cell of its row.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Comparison {
    /// Ratio of the medians, `this / baseline`; `1.10` means 10 % slower.
    pub ratio: f64,
    /// Two-sided Mann-Whitney p-value of the two cells' samples.
    pub p: f64,
}

impl Comparison {
    /// Whether the difference is significant at [`ALPHA`].
    pub fn significant(&self) -> bool {
        self.p < ALPHA
    }
}

/// The samples of a [`Benchmark::run`], with summaries and output.
#[derive(Clone, Debug)]
pub struct Results {
    /// The benchmark's name.
    pub name: String,
    /// The benchmark's one-line description.
    pub description: String,
    /// Configuration names, in column order.
    pub configs: Vec<String>,
    /// Index into `configs` of the baseline.
    pub baseline: usize,
    /// Row labels, in order.
    pub rows: Vec<String>,
    /// `samples[row][config]`: the cell's samples in round order (empty for
    /// a cell that was never added).
    pub samples: Vec<Vec<Vec<Sample>>>,
}

impl Results {
    /// The ns/op values of cell (`row`, `config`).
    pub fn ns_per_op(&self, row: usize, config: usize) -> Vec<f64> {
        self.samples[row][config]
            .iter()
            .map(|s| s.ns_per_op)
            .collect()
    }

    /// The median ns/op of cell (`row`, `config`); `NaN` if it is empty.
    pub fn median(&self, row: usize, config: usize) -> f64 {
        stats::median(&self.ns_per_op(row, config))
    }

    /// Compares cell (`row`, `config`) with the baseline of that row;
    /// `None` if either cell is empty.
    pub fn compare(&self, row: usize, config: usize) -> Option<Comparison> {
        let this = self.ns_per_op(row, config);
        let base = self.ns_per_op(row, self.baseline);
        let test = stats::mann_whitney_u(&this, &base)?;
        Some(Comparison {
            ratio: stats::median(&this) / stats::median(&base),
            p: test.p,
        })
    }

    /// The geometric mean over rows of `config`'s medians; `NaN` if any
    /// cell of the column is empty.
    pub fn geomean(&self, config: usize) -> f64 {
        let medians: Vec<f64> = (0..self.rows.len())
            .map(|r| self.median(r, config))
            .collect();
        stats::geomean(&medians)
    }

    /// The geometric mean over rows of `config`'s ratio to the baseline.
    pub fn geomean_ratio(&self, config: usize) -> f64 {
        let ratios: Vec<f64> = (0..self.rows.len())
            .map(|r| self.median(r, config) / self.median(r, self.baseline))
            .collect();
        stats::geomean(&ratios)
    }

    /// A benchstat-like table: one line per row with `median ± spread` ns/op
    /// for each configuration and, for each non-baseline configuration, its
    /// change against the baseline as a percentage with the p-value (`~`
    /// instead of the percentage when `p >= 0.05`), then a geomean line.
    /// `row_header` labels the first column.
    pub fn table(&self, row_header: &str) -> String {
        let n = self
            .samples
            .iter()
            .flatten()
            .map(Vec::len)
            .max()
            .unwrap_or(0);
        let base = &self.configs[self.baseline];
        let mut header = vec![row_header.to_string()];
        for (c, name) in self.configs.iter().enumerate() {
            header.push(name.clone());
            if c != self.baseline {
                header.push(format!("vs {base}"));
            }
        }
        let mut lines = vec![header];
        for r in 0..self.rows.len() {
            let mut line = vec![self.rows[r].clone()];
            for c in 0..self.configs.len() {
                let v = self.ns_per_op(r, c);
                line.push(if v.is_empty() {
                    "-".to_string()
                } else {
                    format!(
                        "{} ± {}",
                        fmt_ns(stats::median(&v)),
                        fmt_spread(stats::spread(&v))
                    )
                });
                if c != self.baseline {
                    line.push(match self.compare(r, c) {
                        None => "-".to_string(),
                        Some(cmp) if cmp.significant() => {
                            format!("{} (p={:.3})", fmt_delta(cmp.ratio), cmp.p)
                        }
                        Some(cmp) => format!("~ (p={:.3})", cmp.p),
                    });
                }
            }
            lines.push(line);
        }
        let mut line = vec!["geomean".to_string()];
        for c in 0..self.configs.len() {
            line.push(fmt_ns(self.geomean(c)));
            if c != self.baseline {
                line.push(fmt_delta(self.geomean_ratio(c)));
            }
        }
        lines.push(line);

        let mut out = String::new();
        let _ = writeln!(out, "{}: {}", self.name, self.description);
        let _ = writeln!(
            out,
            "ns/op, median ± spread over n={n} rounds; vs {base}: change of the median \
             (Mann-Whitney p; ~ = not significant at p>={ALPHA})"
        );
        out.push_str(&table::align(&lines));
        out
    }

    /// Writes the CSV header line matching
    /// [`write_csv_rows`](Self::write_csv_rows).
    pub fn write_csv_header(w: &mut dyn Write) -> io::Result<()> {
        writeln!(
            w,
            "benchmark,row,config,round,position,iterations,ops,elapsed_ns,ns_per_op"
        )
    }

    /// Writes one CSV line per sample (no header).
    pub fn write_csv_rows(&self, w: &mut dyn Write) -> io::Result<()> {
        for (r, row) in self.samples.iter().enumerate() {
            for (c, cell) in row.iter().enumerate() {
                for s in cell {
                    writeln!(
                        w,
                        "{},{},{},{},{},{},{},{},{}",
                        csv_field(&self.name),
                        csv_field(&self.rows[r]),
                        csv_field(&self.configs[c]),
                        s.round,
                        s.position,
                        s.iters,
                        s.ops,
                        s.elapsed.as_nanos(),
                        s.ns_per_op
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// Writes the raw samples of all `results` to a CSV file at `path`, creating
/// its parent directories.
pub fn write_csv(path: &Path, results: &[Results]) -> io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut w = io::BufWriter::new(std::fs::File::create(path)?);
    Results::write_csv_header(&mut w)?;
    for r in results {
        r.write_csv_rows(&mut w)?;
    }
    w.flush()
}

/// Quotes a CSV field if it needs it.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests;
