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
