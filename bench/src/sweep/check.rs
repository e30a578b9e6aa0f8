//! The worker's self-description (`sweep_worker describe`) and the check
//! of a build against it and against `nm`.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

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
    let binary = Binary::new(desc, symbols);
    let p = &mut check.problems;
    if binary.bias.is_none() {
        p.push(format!("nm finds no `{MARKER_SYMBOL}` symbol"));
    }
    check_identity(expect, desc, p);
    check_loops(expect, &binary, p);
    match expect {
        Expect::Specialised => {
            let uncalled = check_specialised(&binary, &routines, p);
            if uncalled > 0 && p.is_empty() {
                check.notes.push(format!(
                    "{uncalled} routine(s) in the binary not called by a cell"
                ));
            }
        }
        Expect::OptOut => check_opt_out(&binary, &routines, p),
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

/// A worker's self-description related to its `nm` symbols.
struct Binary<'a> {
    desc: &'a Description,
    by_addr: BTreeMap<u64, Vec<&'a str>>,
    /// Run-time address minus link-time address (from the marker symbol),
    /// if the marker is in the binary.
    bias: Option<u64>,
}

impl<'a> Binary<'a> {
    fn new(desc: &'a Description, symbols: &'a [Symbol]) -> Self {
        let mut by_addr: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
        for s in symbols {
            by_addr.entry(s.addr).or_default().push(&s.name);
        }
        let marker = symbols.iter().find(|s| s.name == MARKER_SYMBOL);
        Binary {
            desc,
            by_addr,
            bias: marker.map(|m| desc.marker.wrapping_sub(m.addr)),
        }
    }

    /// The symbol names at a run-time address.
    fn names_at(&self, addr: u64) -> Vec<&'a str> {
        self.bias
            .and_then(|b| self.by_addr.get(&addr.wrapping_sub(b)))
            .cloned()
            .unwrap_or_default()
    }

    /// Checks that `config` reports exactly one call target per path and
    /// size.
    fn cover(&self, config: &str, p: &mut Vec<String>) {
        for path in AllocPath::ALL {
            for size in SIZES {
                let n = self
                    .desc
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
    }

    /// The call targets of `config`.
    fn targets(&self, config: &'a str) -> impl Iterator<Item = &'a Target> + 'a {
        self.desc.targets.iter().filter(move |t| t.config == config)
    }
}

/// The configurations the build runs and its global allocator.
fn check_identity(expect: Expect, desc: &Description, p: &mut Vec<String>) {
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
}

/// The configurations that call `std::alloc::alloc` run instances of the
/// shared loop; `generic` (the library's instances, out of line) and
/// `generic-local` (this binary's own) must be different instances, one per
/// size and path.
fn check_loops(expect: Expect, binary: &Binary<'_>, p: &mut Vec<String>) {
    let loop_configs: Vec<&str> = match expect {
        Expect::Specialised => vec![GENERIC, LOCAL],
        Expect::OptOut => vec![],
        Expect::Global(name) => vec![name],
    };
    let mut instances: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
    for &config in &loop_configs {
        binary.cover(config, p);
        let set = instances.entry(config).or_default();
        for t in binary.targets(config) {
            let names = binary.names_at(t.addr);
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
}

/// The specialised build: specialisation on, routines present, every
/// specialised cell calling the routine of its size and path. Returns the
/// number of routines no cell calls.
fn check_specialised(binary: &Binary<'_>, routines: &BTreeSet<u64>, p: &mut Vec<String>) -> usize {
    if !binary.desc.size_specialized {
        p.push("built with the opt-out switch on (SIZE_SPECIALIZED is false)".into());
    }
    if routines.is_empty() {
        p.push("nm finds no size-specialised routine symbol".into());
    }
    binary.cover(SPECIALISED, p);
    let mut called = BTreeSet::new();
    for t in binary.targets(SPECIALISED) {
        let want = expected_routine(t.path, t.size, t.align);
        let names = binary.names_at(t.addr);
        if names.iter().any(|n| routine_name(n) == Some(want.as_str())) {
            called.insert(t.addr.wrapping_sub(binary.bias.unwrap_or(0)));
        } else {
            p.push(format!(
                "{} {} B calls {:?}, expected specalloc_runtime::routines::{want}",
                t.path.name(),
                t.size,
                names
            ));
        }
    }
    routines.difference(&called).count()
}

/// The opt-out build: the switch on, no routine in the binary, no cell
/// calling one.
fn check_opt_out(binary: &Binary<'_>, routines: &BTreeSet<u64>, p: &mut Vec<String>) {
    if binary.desc.size_specialized {
        p.push("the opt-out switch is off (SIZE_SPECIALIZED is true)".into());
    }
    if !routines.is_empty() {
        p.push(format!(
            "nm finds {} size-specialised routine(s); the opt-out build must have none",
            routines.len()
        ));
    }
    binary.cover(OPT_OUT, p);
    for t in binary.targets(OPT_OUT) {
        let names = binary.names_at(t.addr);
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
