use super::*;
use std::cell::RefCell;
use std::rc::Rc;

fn opts(rounds: usize) -> Options {
    Options {
        rounds,
        target_sample: Duration::from_micros(100),
        seed: 1,
        progress: false,
    }
}

/// A fake timing function: `ns_per_iter` per iteration, no real time.
fn fake(ns_per_iter: u64) -> impl FnMut(u64) -> Duration {
    move |n| Duration::from_nanos(n * ns_per_iter)
}

#[test]
fn calibration_hits_target() {
    let mut f = fake(10);
    let iters = calibrate(&mut f, Duration::from_millis(1));
    assert_eq!(iters, 100_000);
    // A function that reports no time must still terminate.
    let mut zero = |_| Duration::ZERO;
    assert!(calibrate(&mut zero, Duration::from_millis(1)) >= 1);
    // A slow one runs once.
    let mut slow = fake(5_000_000);
    assert_eq!(calibrate(&mut slow, Duration::from_millis(1)), 1);
    // A slow first call (one-off initialisation) is not taken as the
    // cost of an iteration.
    let mut calls = 0;
    let mut cold = |n| {
        calls += 1;
        if calls == 1 {
            Duration::from_secs(1)
        } else {
            Duration::from_nanos(n * 10)
        }
    };
    assert_eq!(calibrate(&mut cold, Duration::from_millis(1)), 100_000);
    // Nor is a slow second call: the count is corrected at the next step.
    let mut calls = 0;
    let mut cold2 = |n| {
        calls += 1;
        if calls <= 2 {
            Duration::from_secs(1)
        } else {
            Duration::from_nanos(n * 10)
        }
    };
    assert_eq!(calibrate(&mut cold2, Duration::from_millis(1)), 100_000);
}

#[test]
fn every_cell_sampled_once_per_round_in_varying_order() {
    let log = Rc::new(RefCell::new(Vec::new()));
    let mut b = Benchmark::new("t", "test");
    for row in ["8", "16"] {
        for config in ["a", "b", "c"] {
            let log = Rc::clone(&log);
            let tag = format!("{row}/{config}");
            b.add(row, config, 1, move |n| {
                log.borrow_mut().push(tag.clone());
                Duration::from_nanos(n)
            });
        }
    }
    let rounds = 8;
    let res = b.run(&opts(rounds));
    for r in 0..2 {
        for c in 0..3 {
            let s = &res.samples[r][c];
            assert_eq!(s.len(), rounds);
            assert_eq!(
                s.iter().map(|x| x.round).collect::<Vec<_>>(),
                (0..rounds).collect::<Vec<_>>()
            );
        }
    }
    // The last `rounds` blocks of 6 calls are the timed rounds; each
    // holds every cell exactly once, and the orders are not all equal.
    let log = log.borrow();
    let timed = &log[log.len() - 6 * rounds..];
    let mut orders = Vec::new();
    for chunk in timed.chunks(6) {
        let mut sorted = chunk.to_vec();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), 6);
        orders.push(chunk.to_vec());
    }
    assert!(orders.iter().any(|o| o != &orders[0]));
}

#[test]
fn ns_per_op_accounts_for_ops_per_iter() {
    let mut b = Benchmark::new("t", "test");
    b.add("x", "a", 1, fake(50));
    b.add("x", "b", 1000, fake(50_000));
    let res = b.run(&opts(3));
    assert!(res.ns_per_op(0, 0).iter().all(|&v| (v - 50.0).abs() < 1e-9));
    assert!(res.ns_per_op(0, 1).iter().all(|&v| (v - 50.0).abs() < 1e-9));
    assert!(res.samples[0][1].iter().all(|s| s.ops == s.iters * 1000));
}

/// Timing function whose per-iteration cost cycles through `costs`.
fn cycling(costs: Vec<u64>) -> impl FnMut(u64) -> Duration {
    let mut i = 0;
    move |n| {
        i += 1;
        Duration::from_nanos(n * costs[i % costs.len()])
    }
}

fn two_config_results() -> Results {
    let mut b = Benchmark::new("demo", "two configs and an A/A");
    for row in ["8", "16", "24"] {
        b.add(row, "ours", 1, cycling(vec![100, 101, 102, 103, 104]));
        b.add(row, "ours A/A", 1, cycling(vec![100, 101, 102, 103, 104]));
        b.add(row, "theirs", 1, cycling(vec![200, 202, 204, 206, 208]));
    }
    b.baseline("ours");
    b.run(&opts(10))
}

#[test]
fn comparisons_and_geomean() {
    let res = two_config_results();
    for r in 0..3 {
        let aa = res.compare(r, 1).unwrap();
        assert!(!aa.significant(), "A/A p = {}", aa.p);
        assert!((aa.ratio - 1.0).abs() < 0.03);
        let other = res.compare(r, 2).unwrap();
        assert!(other.significant());
        assert!(other.p < 0.001);
        assert!((other.ratio - 2.0).abs() < 0.05, "{}", other.ratio);
    }
    assert!((res.geomean_ratio(2) - 2.0).abs() < 0.05);
    assert!((res.geomean(0) / res.geomean(2) - 0.5).abs() < 0.02);
}

#[test]
fn table_layout() {
    let res = two_config_results();
    let t = res.table("size");
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].starts_with("demo: two configs and an A/A"));
    assert!(lines[2].starts_with("size"));
    assert!(lines[2].contains("ours A/A") && lines[2].contains("vs ours"));
    // Three size rows and a geomean row.
    assert_eq!(lines.len(), 3 + 3 + 1);
    for l in &lines[3..6] {
        assert!(l.contains("~ (p="), "A/A not marked ~: {l}");
        assert!(l.contains("+100.0% (p=0.000)"), "{l}");
    }
    assert!(lines[6].starts_with("geomean"));
}

#[test]
fn csv_has_one_line_per_sample() {
    let res = two_config_results();
    let mut buf = Vec::new();
    Results::write_csv_header(&mut buf).unwrap();
    res.write_csv_rows(&mut buf).unwrap();
    let text = String::from_utf8(buf).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1 + 3 * 3 * 10);
    assert!(lines[0].starts_with("benchmark,row,config,round"));
    assert!(lines[1..].iter().all(|l| l.starts_with("demo,")));
    assert_eq!(lines[1].split(',').count(), 9);
    assert_eq!(csv_field("a,b"), "\"a,b\"");
}

#[test]
fn cli_parsing() {
    let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let cli = Cli::from_args("g", args(&[])).unwrap();
    assert_eq!(cli.options, Options::default());
    assert!(cli.out.ends_with("bench-g.csv"));
    let cli = Cli::from_args("g", args(&["--quick", "--rounds", "3", "--out", "x.csv"])).unwrap();
    assert!(cli.quick);
    assert_eq!(cli.options.rounds, 3);
    assert_eq!(cli.options.target_sample, Options::quick().target_sample);
    assert_eq!(cli.out, PathBuf::from("x.csv"));
    for bad in [
        &["--rounds", "0"][..],
        &["--rounds"],
        &["--bogus"],
        &["--csv", "x"],
    ] {
        assert!(
            matches!(Cli::from_args("g", args(bad)), Err(Stop::Error(_))),
            "{bad:?}"
        );
    }
    let Err(Stop::Help(h)) = Cli::from_args("g", args(&["--help"])) else {
        panic!("no help");
    };
    assert!(h.starts_with("usage: g [--quick]"), "{h}");
}

#[test]
fn shuffle_is_a_permutation() {
    let mut rng = SplitMix64(42);
    let mut v: Vec<usize> = (0..100).collect();
    rng.shuffle(&mut v);
    assert_ne!(v, (0..100).collect::<Vec<_>>());
    v.sort();
    assert_eq!(v, (0..100).collect::<Vec<_>>());
}
