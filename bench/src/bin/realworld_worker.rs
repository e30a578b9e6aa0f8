//! The real-workload suite's worker: runs one program of
//! `specalloc_bench::realworld` under the global allocator it was built with
//! (the `global-*` features, as the sweep's worker; specalloc when none).
//! The driver (`src/bin/realworld.rs`) builds it once per allocator, each
//! into its own target directory, and runs it; it is not meant to be run by
//! hand, though it can be.
//!
//! Commands:
//!
//! * `describe`: prints `global,<allocator>` (the driver checks it);
//! * `run PROGRAM [--scale N] [--annotated]`: runs the program once (with
//!   `--annotated`, its source compiled under `#[specialize]`, for the
//!   programs that have such a variant, in a worker built with the
//!   `annotated` feature) and prints
//!   `result,<program>,<allocator>,<checksum hex>,<wall ns>,<peak RSS KiB>,<user µs>,<sys µs>,<minor faults>`
//!   (wall time of the program alone; the rest from `getrusage`, the
//!   process's whole life);
//! * `list`: the programs, with their default and quick scales.

use std::hint::black_box;
use std::time::Instant;

use specalloc_bench::cli::{self, Token, Usage, ValueExt};
use specalloc_bench::realworld::{self, PROGRAMS};

specalloc_bench::select_global_allocator!();

fn main() {
    let usage = Usage {
        name: "realworld_worker",
        synopsis: "describe | list | run PROGRAM [--scale N] [--annotated]",
        flags: "  --scale N     amount of work (default: the program's default scale)\n\
                \x20 --annotated   the program's source compiled under #[specialize] (json, pipeline*, graph, rebuild*;\n\
                \x20               a worker built with --features annotated)\n\
                (run by the driver: cargo run --release -p specalloc-bench --features peers --bin realworld)\n"
            .to_string(),
    };
    let mut words: Vec<String> = Vec::new();
    let mut scale = None;
    let mut annotated = false;
    cli::parse_env(&usage, |arg, p| {
        match arg {
            Token::Flag(f) if f == "--scale" => scale = Some(cli::positive(p)? as u32),
            Token::Flag(f) if f == "--annotated" => annotated = true,
            Token::Value(v) if words.len() < 2 => words.push(v.clone().string()?),
            _ => return Ok(false),
        }
        Ok(true)
    });
    let bad = |msg: &str| -> ! {
        cli::Stop::Error(format!("realworld_worker: error: {msg}\n{}", usage.line())).exit()
    };
    match words.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["describe"] => println!("global,{GLOBAL_NAME}"),
        ["list"] => {
            for p in PROGRAMS {
                println!(
                    "{},{},{},{}",
                    p.name, p.default_scale, p.quick_scale, p.what
                );
            }
        }
        ["run", name] => {
            let Some(program) = realworld::program(name) else {
                bad(&format!("no program {name:?}"));
            };
            let run = if annotated {
                annotated_variant(name).unwrap_or_else(|e| bad(&e))
            } else {
                program.run
            };
            let scale = scale.unwrap_or(program.default_scale);
            let start = Instant::now();
            let checksum = black_box(run(black_box(scale)));
            let wall = start.elapsed().as_nanos();
            let u = specalloc_bench::usage();
            println!(
                "result,{name},{GLOBAL_NAME},{checksum:016x},{wall},{},{},{},{}",
                u.peak_rss_kb, u.user_us, u.sys_us, u.minor_faults
            );
        }
        _ => bad("expected describe, list or run PROGRAM"),
    }
}

/// The annotated variant of `name` (`--annotated`).
#[cfg(feature = "annotated")]
fn annotated_variant(name: &str) -> Result<fn(u32) -> u64, String> {
    realworld::annotated(name).ok_or_else(|| format!("{name} has no annotated variant"))
}

/// Without the `annotated` feature the worker links no annotated code.
#[cfg(not(feature = "annotated"))]
fn annotated_variant(_: &str) -> Result<fn(u32) -> u64, String> {
    Err("--annotated needs a worker built with --features annotated".to_string())
}
