use std::fmt::Write as _;

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

#[test]
fn headline_per_size_range_and_chart_series() {
    let mut pool = Pool::default();
    // generic 10 ns, specialised 5, system 20, mimalloc 6, jemalloc 8 at every size.
    let configs = [
        (GENERIC, 10.0),
        (SPECIALISED, 5.0),
        ("system", 20.0),
        ("mimalloc", 6.0),
        ("jemalloc", 8.0),
    ];
    for round in 0..5 {
        for (config, ns) in configs {
            for size in SIZES {
                let s = SampleLine {
                    cell: CellId {
                        config: config.to_string(),
                        path: AllocPath::Plain,
                        shape: Shape::Pair,
                        size,
                    },
                    position: 0,
                    iters: 100,
                    ops: 100,
                    elapsed_ns: (ns * 100.0) as u64,
                };
                pool.add(&s, round);
            }
        }
    }
    let names: Vec<String> = configs.iter().map(|c| c.0.to_string()).collect();
    let res = pool.results(AllocPath::Plain, Shape::Pair, &columns(&names));
    let text = headline(&[("alloc+free", &res)]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + RANGES.len(), "{text}");
    assert!(lines.iter().all(|l| l.chars().count() <= 100), "{text}");
    let first: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        first,
        [
            "alloc+free",
            "1–15",
            "B",
            "5.00",
            "ns",
            "0.50×",
            "0.25×",
            "0.83×",
            "mimalloc"
        ],
        "{text}"
    );
    assert!(lines[4].trim_start().starts_with("512–1024 B"), "{text}");
    // No peer at all: the column says so.
    let alone = pool.results(AllocPath::Plain, Shape::Pair, &columns(&names[..2]));
    assert!(headline(&[("x", &alone)])
        .lines()
        .nth(1)
        .unwrap()
        .ends_with('-'));

    let series = chart_series(&res);
    let order: Vec<&str> = series.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        order,
        [SPECIALISED, GENERIC, "system", "mimalloc", "jemalloc"]
    );
    assert_eq!(series[0].points.len(), SIZES.len());
    assert_eq!(series[0].points[0], (1.0, 5.0));
    assert_eq!(*series[1].points.last().unwrap(), (1024.0, 10.0));
}
