//! The size sweep's worker: the timed loops of one build configuration.
//! The driver (`src/bin/sweep/`) builds it once per configuration, each
//! into its own target directory, checks each binary, and runs them in
//! interleaved rounds; it is not meant to be run by hand.
//!
//! # Builds and the configurations they run
//!
//! * no selector feature (specalloc global, specialisation on): `specialised`
//!   (`spec::uninit::<T>()` / `spec::zeroed::<T>()`, which call the routine
//!   of `T`'s size), `generic` (`std::alloc::alloc(Layout::new::<T>())`
//!   through the global allocator, in loops compiled in the library crate,
//!   so the allocator shim is called out of line: what `Box::new` costs
//!   from any crate but the one declaring the global allocator), `inline` (`specalloc_runtime::alloc_inline`, the fully
//!   inlined generic path) and `generic-local` (`std::alloc::alloc` called
//!   directly in this crate, which declares the global allocator, so the
//!   optimiser may inline the allocator shim: what `Box::new` costs here);
//! * `no-size-specialized`: `opt-out`, the same `spec::` calls, which the
//!   switch sends to the global allocator;
//! * `global-system`, `global-mimalloc`, `global-jemalloc`,
//!   `global-snmalloc`: that allocator as the global allocator, running the
//!   `generic` code under its name. The specialised code is compiled out of
//!   these builds (it needs specalloc as the global allocator).
//!
//! The loops are the library's (`specalloc_bench::sweep_loops`), the same
//! for every configuration: each cell allocates one compile-time-constant
//! type `T` of the swept size, every returned pointer passes through
//! `std::hint::black_box`, and every configuration frees through the same
//! out-of-line `std::alloc::dealloc` call, so only the allocation differs.
//!
//! # Commands
//!
//! * `describe`: the build's global allocator, opt-out state, the run-time
//!   address of the marker symbol, its configurations, and the function each
//!   specialised cell calls (checked against `nm` by the driver).
//! * `calibrate --target-us T`: an iteration count per cell for samples of
//!   about `T` µs.
//! * `run --iters-file F --seed S --aa 0|1 --sub K --slice I --slices N`:
//!   slice `I` of `N` of the cells (shuffled by `S`): one warm-up pass, then
//!   one sample of every cell of the slice in shuffled order (the fastest of
//!   `K` runs of `1/K` of its iterations); one `sample` line per cell, with
//!   ` A/A` appended to the configuration names if `--aa 1` (the control).
//! * `callgrind --n N`: every cell measured at `N` and `2N` operations
//!   between calls of the boundary function, on which callgrind dumps its
//!   counters (`--dump-before=sweep_cg_boundary`); prints the label of each
//!   dump.

use std::collections::BTreeMap;
use std::hint::black_box;
use std::io::Write as _;
use std::time::Instant;

use specalloc_bench::cli::{self, Stop, Token, Usage, ValueExt};
use specalloc_bench::sweep::{self, AllocPath, CellId, SampleLine, Shape, Target, BATCH};
use specalloc_bench::sweep_loops::{self, Loops, TimeFn};

specalloc_bench::select_global_allocator!();

/// The driver relates run-time addresses to `nm`'s through this symbol.
#[no_mangle]
#[inline(never)]
pub extern "C" fn sweep_worker_marker() -> usize {
    black_box(0)
}

/// Callgrind dumps its counters on every entry to this function.
#[no_mangle]
#[inline(never)]
pub extern "C" fn sweep_cg_boundary(index: usize) {
    black_box(index);
}

/// Whether specalloc is this build's global allocator (the specialised
/// entry points, the inlined path and `generic-local` exist only then).
macro_rules! if_specalloc {
    ($($item:item)*) => {$(
        #[cfg(not(any(
            feature = "global-system",
            feature = "global-mimalloc",
            feature = "global-jemalloc",
            feature = "global-snmalloc"
        )))]
        $item
    )*};
}

if_specalloc! {
    use std::alloc::Layout;
    use specalloc_bench::sweep_loops::Way;

    /// The size-specialised entry points (`opt-out` in the opt-out build).
    struct Specialised;

    impl Way for Specialised {
        #[inline(always)]
        fn alloc<T>() -> *mut u8 {
            Box::into_raw(specalloc_runtime::spec::uninit::<T>()).cast()
        }
        #[inline(always)]
        fn alloc_zeroed<T>() -> *mut u8 {
            Box::into_raw(specalloc_runtime::spec::zeroed::<T>()).cast()
        }
    }

    /// The fully inlined generic path of the runtime.
    struct Inline;

    impl Way for Inline {
        #[inline(always)]
        fn alloc<T>() -> *mut u8 {
            specalloc_runtime::alloc_inline(const { Layout::new::<T>() })
        }
        #[inline(always)]
        fn alloc_zeroed<T>() -> *mut u8 {
            specalloc_runtime::alloc_zeroed_inline(const { Layout::new::<T>() })
        }
    }

    /// `std::alloc::alloc` called in this crate, which declares the global
    /// allocator: the optimiser may inline the allocator shim and fold the
    /// size-class lookup at the constant layout. (The same code as the
    /// library's `Global`, under a type of this crate, so that its loops are
    /// instantiated here.)
    struct Local;

    impl Way for Local {
        #[inline(always)]
        fn alloc<T>() -> *mut u8 {
            // SAFETY: every swept `T` has a non-zero size.
            unsafe { std::alloc::alloc(const { Layout::new::<T>() }) }
        }
        #[inline(always)]
        fn alloc_zeroed<T>() -> *mut u8 {
            // SAFETY: every swept `T` has a non-zero size.
            unsafe { std::alloc::alloc_zeroed(const { Layout::new::<T>() }) }
        }
    }

    /// The loops of `W` for every swept size, instantiated in this crate.
    fn local_loops<W: Way>() -> Vec<Loops> {
        let mut v = Vec::new();
        specalloc_bench::for_each_swept_type!(T => v.push(Loops::of::<W, T>()));
        v
    }

    /// The routine each specialised cell calls, per size and path, as the
    /// entry points choose it (checked against `nm` by the driver).
    fn routine_targets() -> Vec<[usize; 2]> {
        let mut v = Vec::new();
        specalloc_bench::for_each_swept_type!(T => v.push([
            specalloc_runtime::spec::One::<T>::PLAIN as usize,
            specalloc_runtime::spec::One::<T>::ZEROED as usize,
        ]));
        v
    }
}

/// One (configuration, path, shape, size) cell.
struct Cell {
    id: CellId,
    align: usize,
    /// The function the cell's allocation calls, where the driver checks it.
    target: Option<usize>,
    time: TimeFn,
    fill: fn(&mut [*mut u8]),
    free: fn(&[*mut u8]),
    pairs: fn(u64),
}

/// Adds the cells of one configuration: every size of `loops`, both paths,
/// both shapes; `targets[size index][path]` is what its allocation calls.
fn add(cells: &mut Vec<Cell>, config: &str, loops: &[Loops], targets: &[[usize; 2]]) {
    for (k, l) in loops.iter().enumerate() {
        for path in AllocPath::ALL {
            let i = Loops::index(path);
            for shape in Shape::ALL {
                cells.push(Cell {
                    id: CellId {
                        config: config.to_string(),
                        path,
                        shape,
                        size: l.size,
                    },
                    align: l.align,
                    target: targets.get(k).map(|t| t[i]),
                    time: match shape {
                        Shape::Alloc => l.batch[i],
                        Shape::Pair => l.pair[i],
                    },
                    fill: l.fill[i],
                    free: l.free,
                    pairs: l.pairs[i],
                });
            }
        }
    }
}

/// The pair loops of `loops`, as call targets: where the generic
/// configurations' allocations sit (the driver checks which crate's
/// instance each configuration runs).
fn loop_targets(loops: &[Loops]) -> Vec<[usize; 2]> {
    loops
        .iter()
        .map(|l| [l.pair[0] as usize, l.pair[1] as usize])
        .collect()
}

/// Every cell of this build, in a fixed order.
fn all_cells() -> Vec<Cell> {
    let mut cells = Vec::new();
    let generic = sweep_loops::out_of_line();
    if let Err(e) = sweep_loops::check_types(&generic) {
        eprintln!("sweep_worker: {e}");
        std::process::exit(1);
    }
    #[cfg(not(any(
        feature = "global-system",
        feature = "global-mimalloc",
        feature = "global-jemalloc",
        feature = "global-snmalloc"
    )))]
    {
        let spec = local_loops::<Specialised>();
        if cfg!(feature = "no-size-specialized") {
            add(&mut cells, sweep::OPT_OUT, &spec, &routine_targets());
        } else {
            add(&mut cells, sweep::SPECIALISED, &spec, &routine_targets());
            add(
                &mut cells,
                sweep::GENERIC,
                &generic,
                &loop_targets(&generic),
            );
            add(&mut cells, sweep::INLINE, &local_loops::<Inline>(), &[]);
            let local = local_loops::<Local>();
            add(&mut cells, sweep::LOCAL, &local, &loop_targets(&local));
        }
    }
    #[cfg(any(
        feature = "global-system",
        feature = "global-mimalloc",
        feature = "global-jemalloc",
        feature = "global-snmalloc"
    ))]
    add(&mut cells, GLOBAL_NAME, &generic, &loop_targets(&generic));
    cells
}

use specalloc_bench::harness::SplitMix64 as Rng;

/// The cost of one `Instant::now()` + `elapsed()` pair, in ns: the best of
/// five averages over 20 000 pairs.
fn timer_overhead_ns() -> f64 {
    const N: u32 = 20_000;
    (0..5)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..N {
                black_box(Instant::now().elapsed());
            }
            t.elapsed().as_nanos() as f64 / f64::from(N)
        })
        .fold(f64::INFINITY, f64::min)
}

/// Runs one cell for `iters` iterations; returns (ops, elapsed ns), the
/// timer overhead removed from the `alloc` shape.
fn measure(cell: &Cell, iters: u64, slots: &mut [*mut u8], overhead_ns: f64) -> (u64, u64) {
    let elapsed = (cell.time)(iters, slots).as_nanos() as f64;
    match cell.id.shape {
        Shape::Alloc => {
            let net = (elapsed - overhead_ns * iters as f64).max(1.0);
            (iters * BATCH as u64, net.round() as u64)
        }
        Shape::Pair => (iters, elapsed.round().max(1.0) as u64),
    }
}

fn describe(cells: &[Cell]) {
    let mut out = String::new();
    out.push_str(&format!("global,{GLOBAL_NAME}\n"));
    out.push_str(&format!(
        "size_specialized,{}\n",
        specalloc_runtime::spec::SIZE_SPECIALIZED
    ));
    let marker: extern "C" fn() -> usize = sweep_worker_marker;
    out.push_str(&format!("marker,{:x}\n", marker as usize));
    let mut configs: Vec<&str> = cells.iter().map(|c| c.id.config.as_str()).collect();
    configs.dedup();
    for c in configs {
        out.push_str(&format!("config,{c}\n"));
    }
    for c in cells.iter().filter(|c| c.id.shape == Shape::Pair) {
        if let Some(addr) = c.target {
            let t = Target {
                config: c.id.config.clone(),
                path: c.id.path,
                size: c.id.size,
                align: c.align,
                addr: addr as u64,
            };
            out.push_str(&sweep::format_target(&t));
            out.push('\n');
        }
    }
    print!("{out}");
}

fn calibrate(cells: &[Cell], target_us: u64) {
    let target = target_us as f64 * 1000.0;
    let overhead = timer_overhead_ns();
    let mut slots = vec![std::ptr::null_mut(); BATCH];
    let mut counts = Vec::with_capacity(cells.len());
    for cell in cells {
        measure(cell, 1, &mut slots, overhead);
        let mut iters = 1u64;
        let iters = loop {
            let (_, ns) = measure(cell, iters, &mut slots, overhead);
            let ns = ns as f64;
            if ns >= target / 4.0 || iters >= 1 << 32 {
                break ((iters as f64 * target / ns).round() as u64).max(1);
            }
            iters = if ns < target / 100.0 {
                iters * 10
            } else {
                (iters as f64 * target / ns).ceil() as u64
            };
        };
        counts.push(iters);
    }
    let mut out = String::new();
    for (cell, iters) in cells.iter().zip(counts) {
        out.push_str(&sweep::format_iters(&cell.id, iters));
        out.push('\n');
    }
    print!("{out}");
}

/// `run`: a warm-up pass, then one sample of every cell in shuffled order.
/// A sample is the fastest of `sub` consecutive runs of `1/sub` of the
/// calibrated iterations: a preemption or a burst of another process on
/// the machine can only slow a run down, so the fastest is the one it
/// touched least.
///
/// With `slices > 1` the process runs only slice `slice` of the cells: the
/// cells are shuffled by `seed` and cut into `slices` near-equal parts, so
/// the `slices` invocations of one round with the same seed cover every
/// cell once.
fn run(
    cells: &[Cell],
    iters_file: &str,
    seed: u64,
    suffix: &str,
    sub: u64,
    (slice, slices): (usize, usize),
) -> Result<(), String> {
    let text = std::fs::read_to_string(iters_file).map_err(|e| format!("{iters_file}: {e}"))?;
    let table: std::collections::HashMap<CellId, u64> =
        text.lines().filter_map(sweep::parse_iters).collect();
    let iters: Vec<u64> = cells
        .iter()
        .map(|c| {
            table
                .get(&c.id)
                .copied()
                .ok_or_else(|| format!("no iteration count for {:?}", c.id))
        })
        .collect::<Result<_, _>>()?;
    let overhead = timer_overhead_ns();
    let mut slots = vec![std::ptr::null_mut(); BATCH];
    let mut rng = Rng(seed);
    let mut order: Vec<usize> = (0..cells.len()).collect();
    rng.shuffle(&mut order);
    let slices = slices.clamp(1, cells.len().max(1));
    let (lo, hi) = (
        slice * order.len() / slices,
        (slice + 1) * order.len() / slices,
    );
    let mut order = order[lo.min(order.len())..hi.min(order.len())].to_vec();
    let mut rng = Rng(seed ^ (slice as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    // Warm-up: an eighth of a sample of every cell, untimed.
    rng.shuffle(&mut order);
    for &i in &order {
        measure(&cells[i], (iters[i] / 8).max(1), &mut slots, overhead);
    }
    // Nothing may allocate between two samples: an allocation there changes
    // the allocator's state (a tiny block's offset, say) that the next cell
    // starts from, and would differ between this process and its A/A twin.
    // So the results go into storage reserved up front, and are formatted
    // only after the last sample.
    //
    // The `sub` runs of a sample are consecutive, so they start from the
    // allocator state the cell found: a state that makes a size slow (see
    // the tiny allocator's "block of its own" path) shows in the sample
    // instead of being filtered out as noise.
    rng.shuffle(&mut order);
    let mut taken: Vec<(usize, usize, u64, u64, u64)> = Vec::with_capacity(order.len());
    for (position, &i) in order.iter().enumerate() {
        let n = (iters[i] / sub).max(1);
        let mut best = (1, u64::MAX);
        for _ in 0..sub {
            let (ops, ns) = measure(&cells[i], n, &mut slots, overhead);
            if (ns as f64 / ops as f64) < (best.1 as f64 / best.0 as f64) {
                best = (ops, ns);
            }
        }
        taken.push((i, position, n, best.0, best.1));
    }
    let mut out = String::new();
    for &(i, position, iters, ops, elapsed_ns) in &taken {
        let mut cell = cells[i].id.clone();
        cell.config.push_str(suffix);
        let line = SampleLine {
            cell,
            position,
            iters,
            ops,
            elapsed_ns,
        };
        out.push_str(&line.format());
        out.push('\n');
    }
    print!("{out}");
    Ok(())
}

/// The labels of the dumps [`callgrind`] makes, in order: `-` for a segment
/// that is not a measurement, else the cell, its operation count and `n`.
fn callgrind_labels(cells: &[Cell], n: usize) -> Vec<String> {
    let mut labels = Vec::new();
    for cell in cells {
        let f = |k: usize| format!("{},{n}", sweep::format_iters(&cell.id, k as u64));
        match cell.id.shape {
            Shape::Alloc => labels.extend(["-".into(), f(n), "-".into(), f(2 * n)]),
            Shape::Pair => labels.extend(["-".into(), f(n), f(2 * n)]),
        }
    }
    labels.push("-".into());
    labels
}

/// The callgrind plan: every cell at `n` and `2n` operations, each
/// measurement between two calls of the boundary function, and nothing else
/// in between (the labels are made before and printed after: formatting
/// allocates, and would be counted).
fn callgrind(cells: &[Cell], n: usize) {
    let labels = callgrind_labels(cells, n);
    let mut slots = vec![std::ptr::null_mut(); 2 * n];
    let mut count = 0;
    let mut boundary = || {
        count += 1;
        sweep_cg_boundary(count);
    };
    for cell in cells {
        match cell.id.shape {
            Shape::Alloc => {
                // Warm-up, then N and 2N allocations; the frees outside.
                (cell.fill)(&mut slots);
                (cell.free)(&slots);
                boundary();
                (cell.fill)(&mut slots[..n]);
                boundary();
                (cell.free)(&slots[..n]);
                boundary();
                (cell.fill)(&mut slots);
                boundary();
                (cell.free)(&slots);
            }
            Shape::Pair => {
                (cell.pairs)(2 * n as u64);
                boundary();
                (cell.pairs)(n as u64);
                boundary();
                (cell.pairs)(2 * n as u64);
                boundary();
            }
        }
    }
    boundary();
    assert_eq!(count, labels.len(), "callgrind plan and labels disagree");
    let mut out = String::new();
    for (i, l) in labels.iter().enumerate() {
        out.push_str(&format!("dump,{},{l}\n", i + 1));
    }
    print!("{out}");
}

fn usage() -> Usage {
    Usage {
        name: "sweep_worker",
        synopsis: "describe | calibrate --target-us T | callgrind --n N\n\
                   run --iters-file F --seed S --aa 0|1 --sub K --slice I --slices N",
        flags: "(run by the sweep driver: cargo run --release -p specalloc-bench --bin sweep;\n\
                see the documentation of src/bin/sweep_worker.rs for the commands)\n"
            .to_string(),
    }
}

/// The command and its flags.
#[derive(Default)]
struct Args {
    command: Option<String>,
    iters_file: Option<String>,
    numbers: BTreeMap<String, u64>,
}

impl Args {
    fn parse() -> Args {
        let mut a = Args::default();
        cli::parse_env(&usage(), |arg, p| {
            match arg {
                Token::Value(v) if a.command.is_none() => a.command = Some(v.clone().string()?),
                Token::Flag(f) if f == "--iters-file" => a.iters_file = Some(cli::value(p)?),
                Token::Flag(f)
                    if [
                        "--target-us",
                        "--n",
                        "--seed",
                        "--aa",
                        "--sub",
                        "--slice",
                        "--slices",
                    ]
                    .contains(&f.as_str()) =>
                {
                    a.numbers.insert(f.clone(), cli::value(p)?);
                }
                _ => return Ok(false),
            }
            Ok(true)
        });
        a
    }

    /// The value of a numeric flag the command needs.
    fn num(&self, flag: &str) -> u64 {
        self.numbers
            .get(flag)
            .copied()
            .unwrap_or_else(|| missing(flag))
    }
}

/// Stops with the usage line: `flag` is required.
fn missing(flag: &str) -> ! {
    let usage = usage();
    Stop::Error(format!(
        "sweep_worker: error: {flag} is required\n{}",
        usage.line()
    ))
    .exit()
}

fn main() {
    let args = Args::parse();
    let cells = all_cells();
    match args.command.as_deref() {
        Some("describe") => describe(&cells),
        Some("calibrate") => calibrate(&cells, args.num("--target-us")),
        Some("run") => {
            let file = args
                .iters_file
                .clone()
                .unwrap_or_else(|| missing("--iters-file"));
            // `--aa 1` names the configurations of the A/A control; both
            // processes get argument lists of the same length.
            let suffix = if args.num("--aa") == 1 {
                sweep::AA_SUFFIX
            } else {
                ""
            };
            let slicing = (args.num("--slice") as usize, args.num("--slices") as usize);
            if let Err(e) = run(
                &cells,
                &file,
                args.num("--seed"),
                suffix,
                args.num("--sub").max(1),
                slicing,
            ) {
                eprintln!("sweep_worker: {e}");
                std::process::exit(1);
            }
        }
        Some("callgrind") => callgrind(&cells, args.num("--n") as usize),
        _ => missing("a command (describe, calibrate, run or callgrind)"),
    }
    let _ = std::io::stdout().flush();
}
