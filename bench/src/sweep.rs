//! The size sweep's shared logic: the sizes, paths and shapes swept, the
//! configurations and how each is built, the line formats the worker and the
//! driver exchange, the `nm` check that every worker binary must pass before
//! it is timed, and the summaries printed under the tables.
//!
//! The sweep itself is two binaries: `src/bin/sweep.rs` (the driver: builds,
//! verifies, runs interleaved rounds, prints tables) and
//! `src/bin/sweep_worker.rs` (one build per configuration; runs the timed
//! loops). Everything here is pure logic, so it is unit-tested.
//!
//! # Why the worker is built several times
//!
//! Cargo unifies features: if any crate of a build enables the runtime's
//! `no-size-specialized` opt-out, every crate of that build gets it, and an
//! "A/B" comparison silently compares B with B. So each configuration is its
//! own `cargo build` into its own target directory, and each binary is
//! checked ([`verify`]) before any of its samples are used: its
//! self-description must match the configuration, and `nm` must show the
//! size-specialised routine symbols where they belong (every specialised call
//! resolves to the routine of its size) and nowhere else (zero in the opt-out
//! build).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::harness::{Results, Sample, ALPHA};
use crate::stats;

/// Every size swept, in bytes: the tiny sizes 1 to 15, then the reference's
/// sweep from 16 to 1024 (its 8 is the tiny row 8).
pub const SIZES: [usize; 28] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160,
    256, 512, 1024,
];

/// The sizes of the Go reference's sweep (8 to 1024 bytes).
pub const REFERENCE_SIZES: [usize; 14] =
    [8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 160, 256, 512, 1024];

/// Sizes served by the tiny allocator (1 to 15 bytes).
pub const TINY_SIZES: [usize; 15] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

/// Blocks allocated per repetition of the `alloc` shape.
pub const BATCH: usize = 1000;

/// The symbol the worker exports so the driver can relate the addresses the
/// worker prints at run time to those `nm` reports (position-independent
/// executables are loaded at a random base).
pub const MARKER_SYMBOL: &str = "sweep_worker_marker";

/// The function the worker calls between callgrind measurement segments;
/// callgrind dumps its counters on every entry (`--dump-before`).
pub const BOUNDARY_SYMBOL: &str = "sweep_cg_boundary";

/// Prefix of the size-specialised routines' demangled symbol names.
pub const ROUTINE_PREFIX: &str = "specalloc_runtime::routines::";

/// The shared `pair` loop of [`crate::sweep_loops`], whose instances the
/// generic configurations' cells run (demangled, without hash: every
/// instance has this name).
pub const PAIR_LOOP: &str = "specalloc_bench::sweep_loops::pair";

/// The generic out-of-line path (`std::alloc::alloc` through the global
/// allocator, as `Box::new` does): every comparison's baseline.
pub const GENERIC: &str = "generic";
/// The size-specialised entry points (`spec::uninit` / `spec::zeroed`).
pub const SPECIALISED: &str = "specialised";
/// The fully inlined generic path (`specalloc_runtime::alloc_inline`).
pub const INLINE: &str = "inline";
/// `std::alloc::alloc` called directly in the crate that declares the
/// `#[global_allocator]`, where the allocator shim may be inlined (what
/// `Box::new` costs in that crate).
pub const LOCAL: &str = "generic-local";
/// The specialised entry points in a build with the opt-out switch on.
pub const OPT_OUT: &str = "opt-out";
/// Suffix of the A/A control's configurations: a second process of the
/// specialised build, running the very same cells.
pub const AA_SUFFIX: &str = " A/A";
/// The other allocators, each the global allocator of its own build.
pub const GLOBALS: [&str; 4] = ["system", "mimalloc", "jemalloc", "snmalloc"];

/// The two allocation paths: Rust's counterparts of Go's pointer-free
/// (`alloc`) and pointer-containing (`alloc_zeroed`, memory must read zero)
/// paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AllocPath {
    /// Uninitialised memory.
    Plain,
    /// Memory that reads zero.
    Zeroed,
}

impl AllocPath {
    /// Both paths.
    pub const ALL: [AllocPath; 2] = [AllocPath::Plain, AllocPath::Zeroed];

    /// The path's name in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            AllocPath::Plain => "plain",
            AllocPath::Zeroed => "zeroed",
        }
    }

    /// Parses [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }
}

/// What one sample measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Shape {
    /// [`BATCH`] allocations into an array, timed; then their frees, untimed.
    /// Reported per allocation.
    Alloc,
    /// One allocation freed at once, repeatedly. Reported per pair.
    Pair,
}

impl Shape {
    /// Both shapes.
    pub const ALL: [Shape; 2] = [Shape::Alloc, Shape::Pair];

    /// The shape's name in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Alloc => "alloc",
            Shape::Pair => "pair",
        }
    }

    /// Parses [`name`](Self::name).
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    /// What one operation of this shape is, for table headings.
    pub fn unit(self) -> &'static str {
        match self {
            Shape::Alloc => "ns per allocation (1000 allocations timed, their frees not)",
            Shape::Pair => "ns per alloc+free pair",
        }
    }
}

/// What a worker build must turn out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// specalloc global, specialisation on: runs `specialised`, `generic`,
    /// `inline`; every specialised call must reach its routine.
    Specialised,
    /// specalloc global, opt-out switch on: runs `opt-out`; no routine may be
    /// in the binary.
    OptOut,
    /// The named allocator global: runs one configuration of that name (the
    /// generic shape).
    Global(&'static str),
}

/// One build of the worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Build {
    /// Name of the build (and of its target directory).
    pub name: &'static str,
    /// Features of `specalloc-bench` it is built with (and no others).
    pub features: &'static [&'static str],
    /// What it must be.
    pub expect: Expect,
}

/// The worker builds of a sweep; the peer allocators only with `peers`.
pub fn builds(peers: bool) -> Vec<Build> {
    let mut v = vec![
        Build {
            name: SPECIALISED,
            features: &[],
            expect: Expect::Specialised,
        },
        Build {
            name: OPT_OUT,
            features: &["no-size-specialized"],
            expect: Expect::OptOut,
        },
        Build {
            name: "system",
            features: &["global-system"],
            expect: Expect::Global("system"),
        },
    ];
    if peers {
        v.push(Build {
            name: "mimalloc",
            features: &["global-mimalloc"],
            expect: Expect::Global("mimalloc"),
        });
        v.push(Build {
            name: "jemalloc",
            features: &["global-jemalloc"],
            expect: Expect::Global("jemalloc"),
        });
        v.push(Build {
            name: "snmalloc",
            features: &["global-snmalloc"],
            expect: Expect::Global("snmalloc"),
        });
    }
    v
}

/// The table columns, in order, for the configurations that passed their
/// checks (`available`): generic first (the baseline), then specialised, its
/// A/A control, inline, opt-out and the other allocators.
pub fn columns(available: &[String]) -> Vec<String> {
    let mut order = vec![
        GENERIC.to_string(),
        SPECIALISED.to_string(),
        format!("{SPECIALISED}{AA_SUFFIX}"),
        INLINE.to_string(),
        LOCAL.to_string(),
        OPT_OUT.to_string(),
    ];
    order.extend(GLOBALS.iter().map(|g| g.to_string()));
    order.retain(|c| available.contains(c));
    order
}

// ---------------------------------------------------------------------------
// nm
// ---------------------------------------------------------------------------

/// One line of `nm -C --defined-only`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Symbol {
    /// Address (link-time).
    pub addr: u64,
    /// nm's type letter.
    pub kind: char,
    /// Demangled name.
    pub name: String,
}

/// Parses the output of `nm -C --defined-only`; lines without an address are
/// skipped.
pub fn parse_nm(text: &str) -> Vec<Symbol> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ' ');
            let addr = u64::from_str_radix(parts.next()?, 16).ok()?;
            let kind = parts.next()?.chars().next()?;
            let name = parts.next()?.trim().to_string();
            Some(Symbol { addr, kind, name })
        })
        .collect()
}

/// The routine a symbol names (`small_sc3`, `tiny_zeroed_size5`...), if it is
/// one of the size-specialised routines; a trailing legacy-mangling hash
/// (`::h0123456789abcdef`) is dropped.
pub fn routine_name(symbol: &str) -> Option<&str> {
    let symbol = strip_hash(symbol);
    let rest = &symbol[symbol.find(ROUTINE_PREFIX)? + ROUTINE_PREFIX.len()..];
    let known = [
        "small_sc",
        "small_zeroed_sc",
        "tiny_size",
        "tiny_zeroed_size",
    ];
    let ok = known.iter().any(|k| {
        rest.strip_prefix(k)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    ok.then_some(rest)
}

/// `name` without a trailing legacy-mangling hash (`::h0123456789abcdef`).
pub fn strip_hash(name: &str) -> &str {
    match name.rfind("::h") {
        Some(i) if name.len() - i == 19 && name[i + 3..].bytes().all(|b| b.is_ascii_hexdigit()) => {
            &name[..i]
        }
        _ => name,
    }
}

/// Distinct addresses of routine symbols: identical routines (a tiny size's
/// plain and zeroing ones) may be folded into one function with two names,
/// so addresses, not names, are counted.
pub fn routine_addresses(symbols: &[Symbol]) -> BTreeSet<u64> {
    symbols
        .iter()
        .filter(|s| routine_name(&s.name).is_some())
        .map(|s| s.addr)
        .collect()
}

/// Count and total code size of the distinct routines in the output of
/// `nm -S -C --defined-only` (lines `address size type name`).
pub fn routine_bytes(nm_sizes: &str) -> (usize, u64) {
    let mut seen = BTreeMap::new();
    for line in nm_sizes.lines() {
        let mut parts = line.splitn(4, ' ');
        let (Some(addr), Some(size), Some(_), Some(name)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let (Ok(addr), Ok(size)) = (u64::from_str_radix(addr, 16), u64::from_str_radix(size, 16))
        else {
            continue;
        };
        if routine_name(name.trim()).is_some() {
            seen.insert(addr, size);
        }
    }
    (seen.len(), seen.values().sum())
}

/// The routine that must serve `size` bytes at alignment `align` on `path`.
pub fn expected_routine(path: AllocPath, size: usize, align: usize) -> String {
    let zeroed = if path == AllocPath::Zeroed {
        "zeroed_"
    } else {
        ""
    };
    if size < 16 {
        format!("tiny_{zeroed}size{size}")
    } else {
        let class = specalloc_runtime::size_class::class_of(size, align);
        format!("small_{zeroed}sc{class}")
    }
}

// ---------------------------------------------------------------------------
// The worker's self-description, and the check of a build
// ---------------------------------------------------------------------------

/// A function the worker's specialised cell calls, as the worker saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The configuration (`specialised` or `opt-out`).
    pub config: String,
    /// The path of the cell.
    pub path: AllocPath,
    /// The allocation's size.
    pub size: usize,
    /// The allocated type's alignment.
    pub align: usize,
    /// Run-time address of the function called.
    pub addr: u64,
}

/// What `sweep_worker describe` prints about its build.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Description {
    /// The global allocator compiled in.
    pub global: String,
    /// `specalloc_runtime::spec::SIZE_SPECIALIZED` as compiled.
    pub size_specialized: bool,
    /// Run-time address of [`MARKER_SYMBOL`].
    pub marker: u64,
    /// The configurations the build runs.
    pub configs: Vec<String>,
    /// The functions its specialised cells call.
    pub targets: Vec<Target>,
}

/// Formats a `describe` line for a target.
pub fn format_target(t: &Target) -> String {
    format!(
        "target,{},{},{},{},{:x}",
        t.config,
        t.path.name(),
        t.size,
        t.align,
        t.addr
    )
}

/// Parses the output of `sweep_worker describe`.
pub fn parse_description(text: &str) -> Result<Description, String> {
    let mut d = Description::default();
    let (mut global, mut spec, mut marker) = (false, false, false);
    for line in text.lines() {
        let f: Vec<&str> = line.split(',').collect();
        let bad = || format!("bad describe line: {line:?}");
        match f.as_slice() {
            ["global", name] => {
                d.global = name.to_string();
                global = true;
            }
            ["size_specialized", v] => {
                d.size_specialized = v.parse().map_err(|_| bad())?;
                spec = true;
            }
            ["marker", a] => {
                d.marker = u64::from_str_radix(a, 16).map_err(|_| bad())?;
                marker = true;
            }
            ["config", name] => d.configs.push(name.to_string()),
            ["target", config, path, size, align, addr] => d.targets.push(Target {
                config: config.to_string(),
                path: AllocPath::parse(path).ok_or_else(bad)?,
                size: size.parse().map_err(|_| bad())?,
                align: align.parse().map_err(|_| bad())?,
                addr: u64::from_str_radix(addr, 16).map_err(|_| bad())?,
            }),
            [""] => {}
            _ => return Err(bad()),
        }
    }
    if !(global && spec && marker) {
        return Err("describe output lacks global, size_specialized or marker".to_string());
    }
    Ok(d)
}

/// The outcome of checking one build.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Check {
    /// Distinct routine addresses `nm` finds in the binary.
    pub routines: usize,
    /// Why the build must not be reported; empty if it passed.
    pub problems: Vec<String>,
    /// Remarks that do not fail the check.
    pub notes: Vec<String>,
}

impl Check {
    /// Whether the build passed.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

/// Checks a worker build against what it must be: its self-description
/// (global allocator, opt-out switch, configurations) and its symbols. A
/// specialised build must contain routines, and every specialised cell must
/// call the routine of its size and path; an opt-out build must contain no
/// routine and no cell may call one. A build that fails is refused: its
/// samples are never reported.
pub fn verify(expect: Expect, desc: &Description, symbols: &[Symbol]) -> Check {
    let routines = routine_addresses(symbols);
    let mut check = Check {
        routines: routines.len(),
        ..Check::default()
    };
    let mut by_addr: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for s in symbols {
        by_addr.entry(s.addr).or_default().push(&s.name);
    }
    let marker = symbols.iter().find(|s| s.name == MARKER_SYMBOL);
    let bias = marker.map(|m| desc.marker.wrapping_sub(m.addr));
    let names_at = |addr: u64| -> Vec<&str> {
        bias.and_then(|b| by_addr.get(&addr.wrapping_sub(b)))
            .cloned()
            .unwrap_or_default()
    };
    let p = &mut check.problems;
    if marker.is_none() {
        p.push(format!("nm finds no `{MARKER_SYMBOL}` symbol"));
    }
    let want_configs: Vec<String> = match expect {
        Expect::Specialised => vec![
            SPECIALISED.into(),
            GENERIC.into(),
            INLINE.into(),
            LOCAL.into(),
        ],
        Expect::OptOut => vec![OPT_OUT.into()],
        Expect::Global(name) => vec![name.into()],
    };
    let mut have = desc.configs.clone();
    have.sort();
    let mut want = want_configs.clone();
    want.sort();
    if have != want {
        p.push(format!(
            "runs configurations {:?}, expected {:?}",
            desc.configs, want_configs
        ));
    }
    let want_global = match expect {
        Expect::Specialised | Expect::OptOut => "specalloc",
        Expect::Global(name) => name,
    };
    if desc.global != want_global {
        p.push(format!(
            "global allocator is {}, expected {want_global}",
            desc.global
        ));
    }
    // The set of (path, size) a spec-calling configuration must cover.
    let cover = |config: &str, p: &mut Vec<String>| {
        for path in AllocPath::ALL {
            for size in SIZES {
                let n = desc
                    .targets
                    .iter()
                    .filter(|t| t.config == config && t.path == path && t.size == size)
                    .count();
                if n != 1 {
                    p.push(format!(
                        "{n} call targets reported for {config} {} {size} B, expected 1",
                        path.name()
                    ));
                }
            }
        }
    };
    // The configurations that call `std::alloc::alloc` run instances of the
    // shared loop; `generic` (the library's instances, out of line) and
    // `generic-local` (this binary's own) must be different instances, one
    // per size and path.
    let loop_configs: Vec<&str> = match expect {
        Expect::Specialised => vec![GENERIC, LOCAL],
        Expect::OptOut => vec![],
        Expect::Global(name) => vec![name],
    };
    let mut instances: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for &config in &loop_configs {
        cover(config, p);
        let set = instances.entry(config).or_default();
        for t in desc.targets.iter().filter(|t| t.config == config) {
            let names = names_at(t.addr);
            if names.iter().any(|n| strip_hash(n) == PAIR_LOOP) {
                set.insert(t.addr);
            } else {
                p.push(format!(
                    "{config} {} {} B runs {names:?}, expected an instance of {PAIR_LOOP}",
                    t.path.name(),
                    t.size
                ));
            }
        }
        if set.len() != 2 * SIZES.len() && p.is_empty() {
            p.push(format!(
                "{config} runs {} loop instances for {} cells",
                set.len(),
                2 * SIZES.len()
            ));
        }
    }
    if let (Some(g), Some(l)) = (instances.get(GENERIC), instances.get(LOCAL)) {
        if !g.is_disjoint(l) {
            p.push(format!(
                "{GENERIC} and {LOCAL} share loop instances: the out-of-line path is not measured"
            ));
        }
    }
    match expect {
        Expect::Specialised => {
            if !desc.size_specialized {
                p.push("built with the opt-out switch on (SIZE_SPECIALIZED is false)".into());
            }
            if routines.is_empty() {
                p.push("nm finds no size-specialised routine symbol".into());
            }
            cover(SPECIALISED, p);
            let mut called = BTreeSet::new();
            for t in desc.targets.iter().filter(|t| t.config == SPECIALISED) {
                let want = expected_routine(t.path, t.size, t.align);
                let names = names_at(t.addr);
                if names.iter().any(|n| routine_name(n) == Some(want.as_str())) {
                    called.insert(t.addr.wrapping_sub(bias.unwrap_or(0)));
                } else {
                    p.push(format!(
                        "{} {} B calls {:?}, expected specalloc_runtime::routines::{want}",
                        t.path.name(),
                        t.size,
                        names
                    ));
                }
            }
            let uncalled = routines.difference(&called).count();
            if uncalled > 0 && p.is_empty() {
                check.notes.push(format!(
                    "{uncalled} routine(s) in the binary not called by a cell"
                ));
            }
        }
        Expect::OptOut => {
            if desc.size_specialized {
                p.push("the opt-out switch is off (SIZE_SPECIALIZED is true)".into());
            }
            if !routines.is_empty() {
                p.push(format!(
                    "nm finds {} size-specialised routine(s); the opt-out build must have none",
                    routines.len()
                ));
            }
            cover(OPT_OUT, p);
            for t in desc.targets.iter().filter(|t| t.config == OPT_OUT) {
                let names = names_at(t.addr);
                if names.iter().any(|n| routine_name(n).is_some()) {
                    p.push(format!(
                        "{} {} B calls the routine {:?}",
                        t.path.name(),
                        t.size,
                        names
                    ));
                }
            }
        }
        Expect::Global(_) => {
            if !routines.is_empty() {
                check.notes.push(format!(
                    "{} routine symbol(s) in a build that never calls one",
                    routines.len()
                ));
            }
        }
    }
    check
}

// ---------------------------------------------------------------------------
// Samples and iteration counts exchanged with the worker
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Summaries
// ---------------------------------------------------------------------------

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

/// Formats a ratio as `0.55×`.
pub fn fmt_ratio(r: f64) -> String {
    if r.is_nan() {
        "-".to_string()
    } else {
        format!("{r:.2}×")
    }
}

/// Formats a ratio as a signed percentage: `1.0021` → `+0.21%`.
pub fn fmt_pct(r: f64) -> String {
    if r.is_nan() {
        "-".to_string()
    } else {
        format!("{:+.2}%", (r - 1.0) * 100.0)
    }
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
                    fmt_pct(a.geomean),
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
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|i| {
            lines
                .iter()
                .map(|l| l[i].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = format!(
        "{}: ratio of medians to {base} (~: not significant at p>={ALPHA})\n",
        res.name
    );
    for l in &lines {
        let mut s = String::new();
        for (i, cell) in l.iter().enumerate() {
            let pad = " ".repeat(widths[i] - cell.chars().count());
            if i == 0 {
                s.push_str(cell);
                s.push_str(&pad);
            } else {
                s.push_str("  ");
                s.push_str(&pad);
                s.push_str(cell);
            }
        }
        out.push_str(s.trim_end());
        out.push('\n');
    }
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

// ---------------------------------------------------------------------------
// Files
// ---------------------------------------------------------------------------

/// The cargo target directory the running binary was built in (the nearest
/// ancestor of the executable holding cargo's `CACHEDIR.TAG`), or `target`
/// under the workspace root.
pub fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .skip(1)
                .find(|d| d.join("CACHEDIR.TAG").is_file())
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NM: &str = "\
0000000000001000 T sweep_worker_marker
0000000000002000 T specalloc_runtime::routines::small_sc3
0000000000002040 T specalloc_runtime::routines::small_zeroed_sc3
0000000000002080 t specalloc_runtime::routines::tiny_size5
0000000000002080 t specalloc_runtime::routines::tiny_zeroed_size5
00000000000020c0 T specalloc_runtime::spec::fallback_one::h0123456789abcdef
00000000000020f0 T <specalloc_runtime::SpecAlloc as core::alloc::global::GlobalAlloc>::alloc
                 U malloc
";

    /// The fake binaries' common symbols: the marker, the opt-out fallback,
    /// and instances of the shared pair loop (for generic at
    /// [`loop_addr`]`(0x30000, ..)`, for generic-local at `0x40000`).
    fn base_nm() -> String {
        let mut s = String::from(
            "0000000000001000 T sweep_worker_marker\n\
             00000000000020c0 T specalloc_runtime::spec::fallback_one\n",
        );
        for base in [0x30000, 0x40000] {
            for size in SIZES {
                for path in AllocPath::ALL {
                    let _ = writeln!(
                        s,
                        "{:016x} t {PAIR_LOOP}::h00112233445566aa",
                        loop_addr(base, size, path)
                    );
                }
            }
        }
        s
    }

    /// Where the fake pair loop of one size and path sits.
    fn loop_addr(base: u64, size: usize, path: AllocPath) -> u64 {
        base + size as u64 * 0x20 + if path == AllocPath::Zeroed { 0x10 } else { 0 }
    }

    /// What a worker of kind `expect` says about itself, loaded at `base`;
    /// its specialised cells call `addrs` (size, plain routine address; the
    /// zeroed one 0x40 above for classes), or the fallback if empty.
    fn desc(
        expect: Expect,
        global: &str,
        spec: bool,
        base: u64,
        addrs: &[(usize, u64)],
    ) -> Description {
        let (spec_config, loop_configs, configs): (Option<&str>, Vec<String>, Vec<String>) =
            match expect {
                Expect::Specialised => (
                    Some(SPECIALISED),
                    vec![GENERIC.into(), LOCAL.into()],
                    vec![
                        SPECIALISED.into(),
                        GENERIC.into(),
                        INLINE.into(),
                        LOCAL.into(),
                    ],
                ),
                Expect::OptOut => (Some(OPT_OUT), vec![], vec![OPT_OUT.into()]),
                Expect::Global(g) => (None, vec![g.into()], vec![g.into()]),
            };
        let mut targets = Vec::new();
        for path in AllocPath::ALL {
            for size in SIZES {
                let align = 8.min(size & size.wrapping_neg());
                if let Some(config) = spec_config {
                    let addr = addrs
                        .iter()
                        .find(|(s, _)| *s == size)
                        .map(|&(_, a)| {
                            a + if path == AllocPath::Zeroed && size >= 16 {
                                0x40
                            } else {
                                0
                            }
                        })
                        .unwrap_or(0x20c0);
                    targets.push(Target {
                        config: config.into(),
                        path,
                        size,
                        align,
                        addr: addr + base,
                    });
                }
                for config in &loop_configs {
                    let at = if config == LOCAL { 0x40000 } else { 0x30000 };
                    targets.push(Target {
                        config: config.clone(),
                        path,
                        size,
                        align,
                        addr: loop_addr(at, size, path) + base,
                    });
                }
            }
        }
        Description {
            global: global.to_string(),
            size_specialized: spec,
            marker: 0x1000 + base,
            configs,
            targets,
        }
    }

    #[test]
    fn nm_parsing_and_routine_names() {
        let syms = parse_nm(NM);
        assert_eq!(syms.len(), 7);
        assert_eq!(syms[0].name, "sweep_worker_marker");
        assert_eq!(syms[3].kind, 't');
        assert!(syms[6].name.contains(" as "));
        // Four routine names, three distinct addresses (tiny 5 is folded).
        assert_eq!(routine_addresses(&syms).len(), 3);
        assert_eq!(
            routine_name("specalloc_runtime::routines::small_sc3::h0123456789abcdef"),
            Some("small_sc3")
        );
        assert_eq!(routine_name("specalloc_runtime::routines::SMALL"), None);
        assert_eq!(routine_name("specalloc_runtime::routines::small_sc"), None);
        assert_eq!(routine_name("specalloc_runtime::spec::routine"), None);
        assert_eq!(strip_hash("a::b::h0123456789abcdef"), "a::b");
        assert_eq!(strip_hash("a::b::hello"), "a::b::hello");
    }

    #[test]
    fn routine_code_size() {
        let text = "\
0000000000069f00 0000000000000042 T specalloc_runtime::routines::small_sc10
0000000000069f50 0000000000000040 t specalloc_runtime::routines::tiny_size3
0000000000069f50 0000000000000040 t specalloc_runtime::routines::tiny_zeroed_size3
0000000000069fa0 0000000000000010 T sweep_worker_marker
0000000000001000 T no_size_column
";
        assert_eq!(routine_bytes(text), (2, 0x82));
        assert_eq!(routine_bytes(""), (0, 0));
    }

    #[test]
    fn expected_routines() {
        assert_eq!(expected_routine(AllocPath::Plain, 24, 8), "small_sc3");
        assert_eq!(
            expected_routine(AllocPath::Zeroed, 24, 8),
            "small_zeroed_sc3"
        );
        assert_eq!(expected_routine(AllocPath::Plain, 5, 1), "tiny_size5");
        assert_eq!(
            expected_routine(AllocPath::Zeroed, 8, 8),
            "tiny_zeroed_size8"
        );
        assert_eq!(expected_routine(AllocPath::Plain, 1024, 8), "small_sc32");
    }

    /// A fake specialised binary: the routine of every size (plain at
    /// `0x10000 + 0x100 * size`, zeroed 0x40 above; tiny ones folded).
    fn full_nm() -> String {
        let mut s = base_nm();
        for size in SIZES {
            let base = 0x10000 + size as u64 * 0x100;
            for path in AllocPath::ALL {
                let addr = if size < 16 || path == AllocPath::Plain {
                    base
                } else {
                    base + 0x40
                };
                let align = 8.min(size & size.wrapping_neg());
                let _ = writeln!(
                    s,
                    "{addr:016x} T specalloc_runtime::routines::{}",
                    expected_routine(path, size, align)
                );
            }
        }
        s
    }

    fn full_addrs() -> Vec<(usize, u64)> {
        SIZES
            .iter()
            .map(|&s| (s, 0x10000 + s as u64 * 0x100))
            .collect()
    }

    #[test]
    fn specialised_build_passes_when_every_call_hits_its_routine() {
        let syms = parse_nm(&full_nm());
        // Loaded at a random base: the marker relates the two.
        let d = desc(
            Expect::Specialised,
            "specalloc",
            true,
            0x5555_0000_0000,
            &full_addrs(),
        );
        let c = verify(Expect::Specialised, &d, &syms);
        assert!(c.ok(), "{:?}", c.problems);
        assert_eq!(c.routines, 15 + 13 * 2);
    }

    #[test]
    fn specialised_build_with_optout_leaked_in_is_refused() {
        // The trap: the opt-out switch unified into the "specialised" build.
        // No routine in the binary, every call goes to the fallback.
        let syms = parse_nm(&base_nm());
        let d = desc(Expect::Specialised, "specalloc", false, 0, &[]);
        let c = verify(Expect::Specialised, &d, &syms);
        assert!(!c.ok());
        assert_eq!(c.routines, 0);
        assert!(c
            .problems
            .iter()
            .any(|p| p.contains("no size-specialised routine")));
        assert!(c
            .problems
            .iter()
            .any(|p| p.contains("SIZE_SPECIALIZED is false")));
        // Even a self-description that lies is caught by nm.
        let d = desc(Expect::Specialised, "specalloc", true, 0, &[]);
        assert!(!verify(Expect::Specialised, &d, &syms).ok());
    }

    #[test]
    fn specialised_call_to_the_wrong_routine_is_refused() {
        let syms = parse_nm(&full_nm());
        let mut addrs = full_addrs();
        // 24 B calls the 32 B routine.
        addrs[16].1 = addrs[17].1;
        let d = desc(Expect::Specialised, "specalloc", true, 0, &addrs);
        let c = verify(Expect::Specialised, &d, &syms);
        assert!(!c.ok());
        assert!(
            c.problems.iter().any(|p| p.contains("plain 24 B calls")),
            "{:?}",
            c.problems
        );
    }

    #[test]
    fn generic_cells_must_run_their_own_loop_instances() {
        // A generic cell running something other than the shared loop.
        let syms = parse_nm(&full_nm());
        let mut d = desc(Expect::Specialised, "specalloc", true, 0, &full_addrs());
        d.targets
            .iter_mut()
            .filter(|t| t.config == GENERIC && t.size == 24)
            .for_each(|t| t.addr = 0x20f0);
        let c = verify(Expect::Specialised, &d, &syms);
        assert!(
            c.problems
                .iter()
                .any(|p| p.contains("expected an instance of")),
            "{:?}",
            c.problems
        );
        // generic running generic-local's instances (the out-of-line path
        // not measured at all).
        let mut d = desc(Expect::Specialised, "specalloc", true, 0, &full_addrs());
        for t in d.targets.iter_mut().filter(|t| t.config == GENERIC) {
            t.addr = loop_addr(0x40000, t.size, t.path);
        }
        let c = verify(Expect::Specialised, &d, &syms);
        assert!(
            c.problems
                .iter()
                .any(|p| p.contains("share loop instances")),
            "{:?}",
            c.problems
        );
    }

    #[test]
    fn opt_out_build_must_have_no_routine() {
        let clean = parse_nm(&base_nm());
        let d = desc(Expect::OptOut, "specalloc", false, 0x1234_0000, &[]);
        let c = verify(Expect::OptOut, &d, &clean);
        assert!(c.ok(), "{:?}", c.problems);
        // Specialisation leaked into the opt-out build.
        let leaked = parse_nm(&full_nm());
        let d = desc(Expect::OptOut, "specalloc", true, 0, &full_addrs());
        let c = verify(Expect::OptOut, &d, &leaked);
        assert!(!c.ok());
        assert!(c.problems.iter().any(|p| p.contains("must have none")));
        assert!(c.problems.iter().any(|p| p.contains("switch is off")));
        assert!(c.problems.iter().any(|p| p.contains("calls the routine")));
    }

    #[test]
    fn global_build_must_have_its_allocator() {
        let syms = parse_nm(&base_nm());
        let mut d = desc(Expect::Global("mimalloc"), "mimalloc", true, 0, &[]);
        let c = verify(Expect::Global("mimalloc"), &d, &syms);
        assert!(c.ok(), "{:?}", c.problems);
        d.global = "specalloc".into();
        assert!(!verify(Expect::Global("mimalloc"), &d, &syms).ok());
        // No marker: nothing can be related, refuse.
        d.global = "mimalloc".into();
        assert!(!verify(Expect::Global("mimalloc"), &d, &[]).ok());
        // Wrong configuration set.
        d.configs.push(SPECIALISED.into());
        assert!(!verify(Expect::Global("mimalloc"), &d, &syms).ok());
    }

    #[test]
    fn describe_round_trip() {
        let t = Target {
            config: SPECIALISED.into(),
            path: AllocPath::Zeroed,
            size: 24,
            align: 8,
            addr: 0xabc,
        };
        let text = format!(
            "global,specalloc\nsize_specialized,true\nmarker,10\nconfig,specialised\n{}\n",
            format_target(&t)
        );
        let d = parse_description(&text).unwrap();
        assert_eq!(d.global, "specalloc");
        assert!(d.size_specialized);
        assert_eq!(d.marker, 16);
        assert_eq!(d.targets, vec![t]);
        assert!(parse_description("global,x\n").is_err());
        assert!(parse_description("global,x\nsize_specialized,maybe\nmarker,1\n").is_err());
    }

    #[test]
    fn sample_and_iters_lines_round_trip() {
        let s = SampleLine {
            cell: CellId {
                config: "specialised A/A".into(),
                path: AllocPath::Plain,
                shape: Shape::Pair,
                size: 96,
            },
            position: 7,
            iters: 1000,
            ops: 1000,
            elapsed_ns: 2500,
        };
        assert_eq!(SampleLine::parse(&s.format()), Some(s.clone()));
        assert_eq!(SampleLine::parse("iters,a,plain,pair,8,1"), None);
        assert!((s.to_sample(3).ns_per_op - 2.5).abs() < 1e-12);
        let line = format_iters(&s.cell, 42);
        assert_eq!(parse_iters(&line), Some((s.cell.clone(), 42)));
        assert_eq!(parse_iters("iters,a,plain,bogus,8,1"), None);
    }

    #[test]
    fn pool_to_table_and_summaries() {
        let mut pool = Pool::default();
        let configs = [GENERIC, SPECIALISED, "specialised A/A", "mimalloc"];
        for round in 0..10 {
            for (i, config) in configs.iter().enumerate() {
                for size in SIZES {
                    let per_op = match i {
                        0 => 10.0,
                        1 | 2 => 5.0,
                        _ => 6.0,
                    } + (round % 3) as f64 * 0.01;
                    let s = SampleLine {
                        cell: CellId {
                            config: config.to_string(),
                            path: AllocPath::Plain,
                            shape: Shape::Pair,
                            size,
                        },
                        position: 0,
                        iters: 1000,
                        ops: 1000,
                        elapsed_ns: (per_op * 1000.0) as u64,
                    };
                    pool.add(&s, round);
                }
            }
        }
        let cols = columns(&configs.iter().map(|c| c.to_string()).collect::<Vec<_>>());
        assert_eq!(cols, configs);
        let res = pool.results(AllocPath::Plain, Shape::Pair, &cols);
        assert_eq!(res.name, "plain/pair");
        assert_eq!(res.rows.len(), SIZES.len());
        assert_eq!(res.samples[0][0].len(), 10);
        assert!((geomean_ratio(&res, SPECIALISED, GENERIC, &SIZES) - 0.5).abs() < 0.01);
        let a = aa(&res, "specialised A/A", SPECIALISED).unwrap();
        assert_eq!(a.significant, 0);
        assert!((a.geomean - 1.0).abs() < 1e-9);
        let text = summary(&res, &[("x".into(), Some(a))]);
        assert!(
            text.contains("specialised/generic: geomean 0.50×"),
            "{text}"
        );
        assert!(text.contains("above 0.6×: none"), "{text}");
        assert!(text.contains("not faster at: none"), "{text}");
        let mut csv = String::new();
        summary_csv_rows(&res, &mut csv);
        assert_eq!(csv.lines().count(), SIZES.len() * configs.len());
        let t = ratio_table(&res);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 1 + 1 + SIZES.len() + 1);
        assert!(lines[1].starts_with("size (B)") && lines[1].contains("generic (ns)"));
        // specialised 0.50× (significant), its A/A too, mimalloc 0.60×.
        let cells: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(cells, ["1", "10.01", "0.50×", "0.50×", "0.60×"]);
        assert!(lines.last().unwrap().starts_with("geomean"));
    }

    #[test]
    fn callgrind_totals() {
        let text = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 999\n\nfn=main\n1 3\ntotals: 12345\n";
        assert_eq!(parse_callgrind_total(text), Some(12345));
        assert_eq!(parse_callgrind_total("events: Ir\nsummary: 77\n"), Some(77));
        assert_eq!(parse_callgrind_total("nothing"), None);
        assert!((per_op(1000, 3000, 100) - 20.0).abs() < 1e-12);
    }

    #[test]
    fn builds_and_columns() {
        let b = builds(false);
        assert_eq!(
            b.iter().map(|b| b.name).collect::<Vec<_>>(),
            ["specialised", "opt-out", "system"]
        );
        assert_eq!(builds(true).len(), 6);
        // Each build has at most one selector feature: no build can carry
        // another's switch.
        assert!(builds(true).iter().all(|b| b.features.len() <= 1));
        let all: Vec<String> = ["snmalloc", "generic", "opt-out", "specialised"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(
            columns(&all),
            ["generic", "specialised", "opt-out", "snmalloc"]
        );
    }
}
