//! The size sweep: what one allocation costs, size by size, for the
//! size-specialised entry points against the generic path, the opt-out
//! build, the fully inlined generic path and other allocators.
//!
//! # What it compares
//!
//! Sizes 1 to 15 bytes (tiny) and 16, 24, 32, 48, 64, 80, 96, 112, 128,
//! 160, 256, 512, 1024 bytes; the `plain` path (`alloc`) and the `zeroed`
//! path (`alloc_zeroed`, memory must read zero); two shapes: `alloc` (1000
//! allocations timed, their frees not; ns per allocation) and `pair` (alloc
//! and free at once; ns per pair). Configurations:
//!
//! * `generic`: `std::alloc::alloc` with the type's constant layout through
//!   the global allocator (specalloc), in loops compiled in this library
//!   crate, so the allocator shim is called out of line, as from any crate
//!   but the one declaring the global allocator; every table's baseline;
//! * `specialised`: `specalloc_runtime::spec::uninit::<T>()` /
//!   `spec::zeroed::<T>()`, which call the routine of `T`'s size class;
//! * `specialised A/A`: the same binary again, in a separate process: the
//!   control, whose true difference is zero;
//! * `inline`: `specalloc_runtime::alloc_inline` (the generic path with the
//!   lookup folded at the constant layout);
//! * `generic-local`: `std::alloc::alloc` called directly in the crate that
//!   declares the `#[global_allocator]`, where the optimiser may inline the
//!   allocator shim (what `Box::new` costs in that crate);
//! * `opt-out`: the `spec::` calls in a build with `no-size-specialized`;
//! * `system`, and with `--features peers` `mimalloc`, `jemalloc`,
//!   `snmalloc` (0.3): each the global allocator of its own build, called
//!   like `generic`.
//!
//! Every block is freed through one out-of-line `std::alloc::dealloc`
//! call. The loops are in `src/sweep_loops.rs`, the configurations in
//! `src/bin/sweep_worker.rs`.
//!
//! # How
//!
//! 1. **Build** the worker once per configuration family, each its own
//!    `cargo build` with exactly its features, so cargo's feature unification
//!    cannot carry the opt-out switch (or an allocator) from one into
//!    another. The builds share the driver's target directory: cargo keeps
//!    each feature set's artifacts apart, so syn, serde and the peers are
//!    compiled once, and each binary is copied to `<out>/workers/<name>/`.
//!    Progress: `building worker k of n`.
//! 2. **Verify** each binary before timing it: its self-description must
//!    match (global allocator, opt-out state, configurations) and `nm` must
//!    agree: in the specialised build every specialised cell calls the
//!    routine of its size and path (and routines are present), in the
//!    opt-out build there is no routine at all, and the generic cells run
//!    the library's loop instances, not the binary's own. A build that
//!    fails is **refused**: it is not timed and not reported.
//! 3. **Calibrate** an iteration count per cell (about `--target-us` µs per
//!    sample), once.
//! 4. **Rounds**: each round takes one sample of every cell of every
//!    configuration, in worker processes of about `--cells-per-run` (16)
//!    cells each, started in a freshly shuffled order (the cells of a
//!    build are shuffled and cut into slices anew each round). Each process
//!    warms its cells up, then samples them in shuffled order. Samples are
//!    pooled over rounds (n = rounds), so drift of the machine spreads over
//!    all configurations instead of biasing whichever ran last —
//!    back-to-back processes lie — and a burst of load hits a few cells,
//!    not a whole configuration. A sample is the fastest of `--sub` (5)
//!    consecutive runs of a fifth of its length: on a shared machine a
//!    preemption only ever slows a run. The A/A processes get argument
//!    lists of the same length as the specialised ones (`--aa 1` against
//!    `--aa 0`), and the worker allocates nothing between samples, so the
//!    two differ in nothing but the moment they run.
//! 5. **The answer** first, on stdout: per size range, a specialised
//!    allocation's cost and its ratio to the generic path, the system
//!    allocator and the best peer (alloc+free and alloc alone, plain path),
//!    the A/A control, and where the details went. **The details** in
//!    `<out>/sweep.txt`: benchstat-style tables per path and shape (median ±
//!    spread per configuration, the change against `generic` with the
//!    Mann-Whitney p-value, `~` when p ≥ 0.05, the geomean), the A/A
//!    controls, the compact ratio tables and the overview; the chart of cost
//!    per size in `<out>/sweep.svg`.
//!
//! # Running
//!
//! ```text
//! cargo run --release -p specalloc-bench --features peers --bin sweep            # ~5 min warm
//! cargo run --release -p specalloc-bench --bin sweep -- --quick                  # ~1 min warm
//! cargo run --release -p specalloc-bench --features peers --bin sweep -- --callgrind
//! cargo run --release -p specalloc-bench --bin sweep -- --binsize
//! cargo run --release -p specalloc-bench --features peers --bin sweep -- --verify
//! ```
//!
//! The first run builds every worker (the peers take minutes: jemalloc and
//! snmalloc compile C/C++). Output: the answer on stdout, the tables in
//! `<out>/sweep.txt`, the chart in `<out>/sweep.svg`, raw samples in
//! `<out>/sweep.csv`, one line per cell in `<out>/sweep-summary.csv`; `<out>`
//! is `target/sweep` unless `--out`.
//!
//! `--callgrind` runs each worker under `valgrind --tool=callgrind` and
//! reports instructions per operation: each cell is run for N and 2N
//! operations between two calls of a boundary function on which callgrind
//! dumps its counters, and the difference over N cancels the fixed costs.
//!
//! The driver's parts: `prepare.rs` (build and check every worker; the
//! trap), `rounds.rs` (calibrate, run the interleaved rounds), `report.rs`
//! (the tables and files of a sweep), `callgrind.rs`, `binsize.rs`.
//!
//! `--binsize` builds `examples/nm_probe.rs` (ten size classes) with and
//! without the opt-out switch and reports both sizes, as built and
//! stripped, their difference, and the routines `nm` finds in each.

mod binsize;
mod callgrind;
mod prepare;
mod report;
mod rounds;

use std::path::PathBuf;

use specalloc_bench::cli::{self, Common, Token, Usage};
use specalloc_bench::workers;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Sweep,
    Verify,
    Callgrind,
    Binsize,
    Trap,
}

/// The command line.
#[derive(Clone, Debug)]
pub(crate) struct Opts {
    mode: Mode,
    pub(crate) quick: bool,
    pub(crate) rounds: usize,
    pub(crate) target_us: u64,
    pub(crate) seed: u64,
    pub(crate) out: PathBuf,
    pub(crate) peers: bool,
    pub(crate) cg_n: usize,
    pub(crate) sub: u64,
    pub(crate) cells_per_run: usize,
    args: Vec<String>,
}

fn usage() -> Usage {
    Usage {
        name: "sweep",
        synopsis: "[--quick] [--rounds N] [--target-us N] [--seed N] [--out DIR] [--no-peers]\n\
                   [--sub K] [--cells-per-run K]\n\
                   --verify | --callgrind [--cg-n N] | --binsize | --trap",
        flags: "  How long: 30 rounds take about 5 minutes once the workers are built; the first \
                run builds\n  3 workers (6 with --features peers: minutes more, jemalloc and \
                snmalloc compile C and C++).\n\n"
            .to_string()
            + &Common::help(
                "5 rounds of ~0.5 ms samples (about a minute once built)",
                30,
                "output directory (default target/sweep)",
            )
            + "  --target-us N  length of one sample in µs (default 2000)\n\
             \x20 --sub K        a sample is the fastest of K runs of 1/K of it (default 5; 1: plain)\n\
             \x20 --cells-per-run K  cells per worker invocation (default 16; 0: all of a process's)\n\
             \x20 --no-peers     leave mimalloc, jemalloc and snmalloc out (built with --features peers)\n\
             \x20 --verify       build and check every configuration, run nothing\n\
             \x20 --callgrind    instructions per operation, under valgrind --tool=callgrind\n\
             \x20 --cg-n N       operations per callgrind measurement (default 1000)\n\
             \x20 --binsize      binary-size cost of specialisation (examples/nm_probe.rs)\n\
             \x20 --trap         show the check refusing a worker built together with a crate\n\
             \x20                that enables the opt-out switch (cargo feature unification)\n",
    }
}

fn parse_args(args: Vec<String>) -> Result<Opts, cli::Stop> {
    let mut common = Common::default();
    let mut o = Opts {
        mode: Mode::Sweep,
        quick: false,
        rounds: 30,
        target_us: 2000,
        seed: 0x5eed_a110c,
        out: workers::target_dir().join("sweep"),
        peers: cfg!(feature = "peers"),
        cg_n: 1000,
        sub: 5,
        cells_per_run: 16,
        args: args.clone(),
    };
    let mut target = None;
    cli::parse(&usage(), args, |arg, p| {
        if common.take(arg, p)? {
            return Ok(true);
        }
        let Token::Flag(flag) = arg else {
            return Ok(false);
        };
        match flag.as_str() {
            "--target-us" => target = Some(cli::positive(p)?),
            "--cg-n" => o.cg_n = cli::positive(p)? as usize,
            "--sub" => o.sub = cli::positive(p)?,
            "--cells-per-run" => o.cells_per_run = cli::value(p)?,
            "--no-peers" => o.peers = false,
            "--verify" => o.mode = Mode::Verify,
            "--callgrind" => o.mode = Mode::Callgrind,
            "--binsize" => o.mode = Mode::Binsize,
            "--trap" => o.mode = Mode::Trap,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    o.quick = common.quick;
    if o.quick {
        o.rounds = 5;
        o.target_us = 500;
    }
    o.rounds = common.rounds.map_or(o.rounds, |n| n as usize);
    o.target_us = target.unwrap_or(o.target_us);
    o.seed = common.seed.unwrap_or(o.seed);
    o.out = common.out.unwrap_or(o.out);
    Ok(o)
}

fn main() {
    let opts = match parse_args(std::env::args().skip(1).collect()) {
        Ok(o) => o,
        Err(stop) => stop.exit(),
    };
    if opts.peers && !cfg!(feature = "peers") {
        eprintln!("note: peers need `--features peers`");
    }
    let result = match opts.mode {
        Mode::Binsize => binsize::binsize(&opts),
        Mode::Trap => prepare::trap(&opts),
        Mode::Sweep | Mode::Verify | Mode::Callgrind => {
            prepare::prepare(&opts, opts.mode == Mode::Verify).and_then(|workers| match opts.mode {
                Mode::Sweep => rounds::run_sweep(&opts, &workers)
                    .and_then(|(run, pool)| report::report(&opts, &workers, &run, &pool)),
                Mode::Callgrind => callgrind::callgrind(&opts, &workers),
                _ => Ok(()),
            })
        }
    };
    if let Err(e) = result {
        eprintln!("sweep: error: {e}");
        std::process::exit(1);
    }
}

/// The command line that reproduces this run.
pub(crate) fn command_line(opts: &Opts) -> String {
    cli::command_line("sweep", &opts.args)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Opts, cli::Stop> {
        parse_args(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn flags() {
        let o = parse(&[]).unwrap();
        assert_eq!((o.mode, o.rounds, o.target_us), (Mode::Sweep, 30, 2000));
        let o = parse(&["--quick"]).unwrap();
        assert_eq!((o.rounds, o.target_us), (5, 500));
        let o = parse(&["--quick", "--rounds", "7", "--no-peers"]).unwrap();
        assert_eq!(o.rounds, 7);
        assert!(!o.peers);
        assert_eq!(parse(&["--callgrind"]).unwrap().mode, Mode::Callgrind);
        assert_eq!(parse(&["--cells-per-run", "0"]).unwrap().cells_per_run, 0);
        assert!(matches!(
            parse(&["--rounds", "0"]),
            Err(cli::Stop::Error(_))
        ));
        assert!(matches!(parse(&["--bogus"]), Err(cli::Stop::Error(_))));
        let Err(cli::Stop::Help(h)) = parse(&["--help"]) else {
            panic!("no help");
        };
        assert!(h.starts_with("usage: sweep"), "{h}");
    }
}
