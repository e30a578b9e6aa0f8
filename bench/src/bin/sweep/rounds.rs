//! The timed sweep: calibrate each build once, then run the interleaved
//! rounds, each a freshly shuffled sequence of worker invocations. What it
//! returns (the pooled samples and a [`Run`]) is `report.rs`'s input; this
//! module knows nothing of the report.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::Command;
use std::time::Instant;

use specalloc_bench::harness::SplitMix64 as Rng;
use specalloc_bench::sweep::{Expect, Pool, SampleLine, AA_SUFFIX, SIZES};
use specalloc_bench::workers::{loadavg, output};

use crate::prepare::Worker;
use crate::Opts;

/// What the rounds were: how many worker processes and invocations a round
/// had, the load before and after, and how long they took.
pub(crate) struct Run {
    pub(crate) processes: usize,
    pub(crate) invocations: usize,
    pub(crate) load_start: String,
    pub(crate) load_end: String,
    pub(crate) seconds: f64,
}

/// One worker process of a round.
struct Proc<'a> {
    label: String,
    worker: &'a Worker,
    iters: PathBuf,
    suffix: &'static str,
    /// The configurations it reports (with the A/A suffix where it has it).
    configs: Vec<String>,
    /// Invocations per round: a process invocation runs about
    /// `--cells-per-run` cells, so that one moment of load on the machine
    /// hits a few cells of one configuration, not all cells of a process.
    slices: usize,
}

impl Proc<'_> {
    /// Samples it must report per round.
    fn cells(&self) -> usize {
        self.configs.len() * SIZES.len() * 4
    }
}

/// The timed sweep: calibration, then the rounds; the samples pooled.
pub(crate) fn run_sweep(opts: &Opts, workers: &[Worker]) -> Result<(Run, Pool), String> {
    let ok: Vec<&Worker> = workers.iter().filter(|w| w.ok()).collect();
    let load_start = loadavg();
    let procs = calibrate(opts, &ok)?;
    let mut pool = Pool::default();
    let mut rng = Rng(opts.seed);
    let start = Instant::now();
    let tty = std::io::stderr().is_terminal();
    for round in 0..opts.rounds {
        run_round(opts, &procs, round, &mut rng, &mut pool)?;
        let elapsed = start.elapsed().as_secs_f64();
        let left = elapsed / (round + 1) as f64 * (opts.rounds - round - 1) as f64;
        let msg = format!(
            "[sweep] round {}/{} done: {elapsed:.0} s elapsed, ~{left:.0} s left (load {})",
            round + 1,
            opts.rounds,
            loadavg()
        );
        if tty {
            eprint!("\r\x1b[K{msg}");
        } else {
            eprintln!("{msg}");
        }
    }
    if tty {
        eprintln!();
    }
    let run = Run {
        processes: procs.len(),
        invocations: procs.iter().map(|p| p.slices).sum(),
        load_start,
        load_end: loadavg(),
        seconds: start.elapsed().as_secs_f64(),
    };
    Ok((run, pool))
}

/// Calibrates each build once (the A/A process uses the same counts) and
/// returns the processes of a round: one per build, and the specialised
/// build's A/A control.
fn calibrate<'a>(opts: &Opts, ok: &[&'a Worker]) -> Result<Vec<Proc<'a>>, String> {
    let mut procs = Vec::new();
    for &w in ok {
        eprintln!("[sweep] calibrating {}", w.build.name);
        let text = output(
            Command::new(&w.bin)
                .args(["calibrate", "--target-us"])
                .arg(opts.target_us.to_string()),
        )?;
        let file = opts.out.join(format!("iters-{}.txt", w.build.name));
        std::fs::write(&file, text).map_err(|e| format!("{}: {e}", file.display()))?;
        procs.push(proc(opts, w.build.name.to_string(), w, file.clone(), ""));
        if w.build.expect == Expect::Specialised {
            let label = format!("{}{AA_SUFFIX}", w.build.name);
            procs.push(proc(opts, label, w, file, AA_SUFFIX));
        }
    }
    Ok(procs)
}

fn proc<'a>(
    opts: &Opts,
    label: String,
    worker: &'a Worker,
    iters: PathBuf,
    suffix: &'static str,
) -> Proc<'a> {
    let configs: Vec<String> = worker
        .desc
        .as_ref()
        .map(|d| d.configs.iter().map(|c| format!("{c}{suffix}")).collect())
        .unwrap_or_default();
    let cells = configs.len() * SIZES.len() * 4;
    let slices = if opts.cells_per_run == 0 {
        1
    } else {
        cells.div_ceil(opts.cells_per_run).max(1)
    };
    Proc {
        label,
        worker,
        iters,
        suffix,
        configs,
        slices,
    }
}

/// One round: every slice of every process, in a shuffled order; each
/// process must report each of its cells exactly once.
fn run_round(
    opts: &Opts,
    procs: &[Proc<'_>],
    round: usize,
    rng: &mut Rng,
    pool: &mut Pool,
) -> Result<(), String> {
    // One seed per process and round: its slices partition its cells.
    let seeds: Vec<u64> = procs.iter().map(|_| rng.next_u64()).collect();
    let mut runs: Vec<(usize, usize)> = (0..procs.len())
        .flat_map(|p| (0..procs[p].slices).map(move |s| (p, s)))
        .collect();
    rng.shuffle(&mut runs);
    let mut counts = vec![0; procs.len()];
    for &(i, slice) in &runs {
        let p = &procs[i];
        let text = output(
            Command::new(&p.worker.bin)
                .arg("run")
                .arg("--iters-file")
                .arg(&p.iters)
                .arg("--seed")
                .arg(format!("{:020}", seeds[i]))
                .args(["--aa", if p.suffix.is_empty() { "0" } else { "1" }])
                .arg("--sub")
                .arg(opts.sub.to_string())
                .arg("--slice")
                .arg(format!("{slice:04}"))
                .arg("--slices")
                .arg(format!("{:04}", p.slices)),
        )?;
        for line in text.lines() {
            let s = SampleLine::parse(line)
                .ok_or_else(|| format!("{}: bad sample line {line:?}", p.label))?;
            if !p.configs.contains(&s.cell.config) {
                return Err(format!(
                    "{} reported configuration {:?}, not one of its own {:?}",
                    p.label, s.cell.config, p.configs
                ));
            }
            pool.add(&s, round);
            counts[i] += 1;
        }
    }
    for (p, &count) in procs.iter().zip(&counts) {
        if count != p.cells() {
            return Err(format!(
                "{}: {count} samples in round {round}, expected {}",
                p.label,
                p.cells()
            ));
        }
    }
    Ok(())
}
