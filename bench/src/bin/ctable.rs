//! The C-workload table: C programs run on glibc's malloc and on specalloc, mimalloc,
//! jemalloc, tcmalloc and snmalloc, each preloaded (`LD_PRELOAD`), in interleaved rounds, with
//! an A/A control (specalloc twice, under two names).
//!
//! ```sh
//! cargo run --release -p specalloc-bench --bin ctable -- [--rounds N] [--quick] [--out DIR]
//! ```
//!
//! It builds `libspecalloc.so` (`cargo build --release -p specalloc-capi`, into a target
//! directory of its own), compiles the fifteen C workloads of `bench/c/` with `cc -O2` (one of them as C++), and finds
//! the peers' libraries where Debian's packages put them (`apt-get install libmimalloc2.0
//! libjemalloc2 libtcmalloc-minimal4`), snmalloc's built with `c++` from the sources the
//! snmalloc-sys crate ships (present in cargo's registry once `--features peers` was built),
//! or where `CTABLE_<NAME>` (`CTABLE_SNMALLOC`, …) says; a peer that is missing is left out,
//! with a line (all of this is [`specalloc_bench::preload`], which the scaling table shares).
//! The C workloads: mixed-size churn (`churn`), a Larson-style server (`larson`, 2 threads),
//! larson as the field's suite runs it, with workers that start their successors and exit
//! unjoined while the main thread sleeps (`larsonspawn`, 2 threads), the same in C++ with `new[]`
//! and sized `delete[]`, as the field's larson-sized (`larsonsized`, 2 threads), the same as a
//! thread pool's server whose workers run to the end (`larsonpool`, 2 threads),
//! producer/consumer pairs (`prodcons`, 4 threads), medium sizes across threads after rptest
//! (`medium`, 2 threads), string building (`strings`), binary trees
//! (`bintree`), realloc-grown buffers (`reallocbuf`), a cross-thread exchange after
//! xmalloc-test (`xmalloc`, 2 threads), glibc's bench-malloc-thread pattern (`mallocthread`, 2
//! threads), a working set of 64 KiB–4 MiB blocks (`largeblocks`), realloc-grown large buffers
//! (`largebuf`) and a chain of 4,000 threads alive at once (`threadchain`). The real programs (a
//! python3 workload, `gcc -O2` on a large generated file, a `sqlite3` script) run where
//! installed. Every run's output must equal the glibc run's, byte for byte (the run stops
//! otherwise). Per program and allocator: the median wall time and its spread, user and system
//! time, minor page faults and peak RSS (from `wait4`'s rusage), and the ratio to the fastest
//! peer; then the geometric means and the A/A control. Outputs: the table on stdout and in
//! `<out>/results.md`, the chart of time per program relative to glibc in
//! `<out>/ctable.svg` (`<out>` is `target/ctable` unless `--out`).
//!
//! How long: a round runs every program once on every allocator; with all seven
//! allocators a round took about 2.7 minutes on a loaded 2-core machine with the first six
//! workloads (gcc's 15 s runs are most of it), the next three add about 15 s, and `largebuf`
//! about a minute (4–5 s a run, 15–20 s on mimalloc and jemalloc, which fault every page in),
//! `larsonspawn` and `threadchain` about 15 s (0.2 s and 0.5–2 s a run), so the default 7
//! rounds take about 30 minutes. `--quick` (2 rounds, gcc on a fifth of the
//! file) took 2.6 minutes of runs without `largebuf` (load 4), about 5 with it, plus building
//! `libspecalloc.so` the first time (minutes; 15 minutes in all was seen on a busy machine).
//! Its figures are not a measurement.

use std::path::{Path, PathBuf};

use specalloc_bench::chart::{self, Series};
use specalloc_bench::cli::{self, Common, Token, Usage};
use specalloc_bench::preload::{self, have, median_of, Allocator, Program, Run};
use specalloc_bench::stats::{geomean, median, spread};
use specalloc_bench::table::markdown;
use specalloc_bench::workers::{self, commit, machine};

/// The note `--quick` prints at the start and beside its figures.
const QUICK_NOTE: &str = "--quick: 2 rounds and a smaller gcc input, to check that everything \
                          runs: NOT A MEASUREMENT";

fn usage() -> Usage {
    Usage {
        name: "ctable",
        synopsis: "[--rounds N] [--quick] [--out DIR]",
        flags: "  --rounds N     interleaved rounds (default 7: about 30 minutes on a 2-core \
                machine)\n\
                \x20 --quick        2 rounds, gcc on a smaller file: about 5 minutes once built; \
                a smoke test,\n\
                \x20                not a measurement\n\
                \x20 --out DIR      where results.md and ctable.svg go (default target/ctable)\n\
                \n\
                Runs fifteen C workloads (bench/c/) and python3, gcc and sqlite3 where installed, on \
                glibc and on\n\
                specalloc, mimalloc, jemalloc, tcmalloc and snmalloc (each LD_PRELOADed, missing \
                ones left\n\
                out); every run's output is checked against glibc's. The first run also builds \
                libspecalloc.so.\n"
            .to_string(),
    }
}

/// The command line: rounds, quick, the output directory.
fn parse_args(args: Vec<String>) -> Result<(usize, bool, Option<PathBuf>), cli::Stop> {
    let mut common = Common::default();
    cli::parse(&usage(), args, |arg, p| {
        if matches!(arg, Token::Flag(f) if f == "--seed") {
            return Ok(false);
        }
        common.take(arg, p)
    })?;
    let rounds = common
        .rounds
        .map_or(if common.quick { 2 } else { 7 }, |n| n as usize);
    Ok((rounds, common.quick, common.out))
}

fn main() {
    let (rounds, quick, out) = match parse_args(std::env::args().skip(1).collect()) {
        Ok(o) => o,
        Err(stop) => stop.exit(),
    };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let root = root.canonicalize().unwrap();
    let work = root.join("target/ctable");
    let out = out.unwrap_or_else(|| work.clone());
    for dir in [&work, &out] {
        if let Err(e) = workers::make_dir(dir) {
            eprintln!("ctable: error: {e}");
            std::process::exit(1);
        }
    }
    if quick {
        eprintln!("[ctable] {QUICK_NOTE}");
    }

    let allocs = preload::allocators("ctable", &root, &preload::work_dir(&root));
    let programs = programs(&root, &work, quick);
    let runs = preload::interleaved("ctable", &programs, &allocs, rounds).runs;
    let mut report = preload::report_header("ctable", quick.then_some(QUICK_NOTE));
    report += "\n";
    report += &table(&programs, &allocs, &runs, rounds);
    let svg = out.join("ctable.svg");
    let note = format!(
        "{}; median of {rounds} rounds\ncommit {}; {}",
        if quick {
            QUICK_NOTE
        } else {
            "interleaved rounds"
        },
        commit(),
        machine()
    );
    let (categories, series) = relative_to_glibc(&programs, &allocs, &runs);
    let chart = chart::ratio_chart(
        &svg,
        "C workloads: wall time relative to glibc's malloc (LD_PRELOAD; below 1: faster)",
        &note,
        "wall time / glibc's (median)",
        &categories,
        &series,
    );
    println!("{report}");
    let md = out.join("results.md");
    std::fs::write(&md, &report).unwrap();
    println!("table: {}", md.display());
    match chart {
        Ok(()) => println!(
            "chart of time per program relative to glibc: {}",
            svg.display()
        ),
        Err(e) => println!("chart not written: {e}"),
    }
    if quick {
        println!("{QUICK_NOTE}");
    }
}

/// The chart's data: the program names, and per allocator but glibc and the A/A control,
/// each program's median wall time over glibc's.
fn relative_to_glibc(
    programs: &[Program],
    allocs: &[Allocator],
    runs: &[Vec<Vec<Run>>],
) -> (Vec<String>, Vec<Series>) {
    let wall = |p: usize, k: usize| median_of(&runs[p][k], |r| r.wall);
    let categories = programs.iter().map(|p| p.name.clone()).collect();
    let series = allocs
        .iter()
        .enumerate()
        .filter(|(_, a)| a.name != "glibc" && !a.name.ends_with("A/A"))
        .map(|(k, a)| Series {
            name: a.name.clone(),
            points: (0..programs.len())
                .map(|p| (p as f64, wall(p, k) / wall(p, 0)))
                .collect(),
        })
        .collect();
    (categories, series)
}

/// The C workloads of `bench/c/` the table runs, each at its default scale and thread count.
const C_WORKLOADS: [&str; 15] = [
    "churn",
    "larson",
    "larsonspawn",
    "larsonsized",
    "larsonpool",
    "prodcons",
    "medium",
    "strings",
    "bintree",
    "reallocbuf",
    "xmalloc",
    "mallocthread",
    "largeblocks",
    "largebuf",
    "threadchain",
];

fn programs(root: &Path, work: &Path, quick: bool) -> Vec<Program> {
    let mut v = Vec::new();
    for w in C_WORKLOADS {
        let exe = preload::compiled(root, w, &work.join("bin"));
        v.push(Program::c(w, &exe, &[], work));
    }
    if have("python3") {
        let script = work.join("workload.py");
        std::fs::write(&script, PY_WORKLOAD).unwrap();
        v.push(Program {
            name: "python3 workload".into(),
            argv: vec!["python3".into(), script.display().to_string()],
            dir: work.to_path_buf(),
            scratch: vec![],
        });
    } else {
        println!("python3 workload: left out (python3 not installed)");
    }
    if have("gcc") {
        let src = work.join("big.c");
        std::fs::write(&src, big_c(if quick { 300 } else { 1500 })).unwrap();
        v.push(Program {
            name: "gcc -O2 big.c".into(),
            argv: vec![
                "sh".into(),
                "-c".into(),
                format!("gcc -O2 -c {} -o big.o && sha256sum < big.o", src.display()),
            ],
            dir: work.to_path_buf(),
            scratch: vec![],
        });
    } else {
        println!("gcc: left out (not installed)");
    }
    if have("sqlite3") {
        let sql = work.join("script.sql");
        std::fs::write(&sql, SQL).unwrap();
        v.push(Program {
            name: "sqlite3 script".into(),
            argv: vec![
                "sh".into(),
                "-c".into(),
                format!("sqlite3 ctable.sqlite < {}", sql.display()),
            ],
            dir: work.to_path_buf(),
            scratch: vec![work.join("ctable.sqlite")],
        });
    } else {
        println!("sqlite3: left out (not installed)");
    }
    v
}

/// The tables: the summary first (the geometric means, the A/A control, the check against
/// glibc's outputs), then every program on every allocator.
fn table(
    programs: &[Program],
    allocs: &[Allocator],
    runs: &[Vec<Vec<Run>>],
    rounds: usize,
) -> String {
    let spec = allocs.iter().position(|a| a.name == "specalloc").unwrap();
    let aa = allocs
        .iter()
        .position(|a| a.name == "specalloc A/A")
        .unwrap();
    let med = |p: usize, k: usize, f: fn(&Run) -> f64| median_of(&runs[p][k], f);
    let mut summary =
        String::from("Geometric mean of the median wall times over all programs:\n\n");
    let mut g = vec![vec![
        "allocator".to_string(),
        "geomean wall s".into(),
        "vs glibc".into(),
        "vs specalloc".into(),
    ]];
    let gm = |k: usize| {
        geomean(
            &(0..programs.len())
                .map(|p| med(p, k, |r| r.wall))
                .collect::<Vec<_>>(),
        )
    };
    let gspec = gm(spec);
    for (k, a) in allocs.iter().enumerate() {
        g.push(vec![
            a.name.clone(),
            format!("{:.3}", gm(k)),
            format!("{:.2}×", gm(k) / gm(0)),
            format!("{:.2}×", gm(k) / gspec),
        ]);
    }
    summary += &markdown(&g);
    summary += &format!(
        "\nA/A control: specalloc A/A over specalloc {:.3}× (geometric mean; its true difference \
         is 0, so smaller differences are noise).\nEvery run's output was the same as glibc's \
         run of the same program (compared byte for byte).\n",
        gm(aa) / gspec
    );
    let mut out = summary;
    out += &format!(
        "\nC workloads, {rounds} interleaved rounds per program and allocator (median; spread = \
         largest deviation from the median after Tukey's fences; RSS = peak; \"vs glibc\", \
         \"vs fastest peer\" = wall time over glibc's, over the fastest peer's on that program)\n\n"
    );
    let mut lines = vec![vec![
        "program".to_string(),
        "allocator".into(),
        "wall s".into(),
        "spread".into(),
        "user s".into(),
        "sys s".into(),
        "faults".into(),
        "RSS MiB".into(),
        "vs glibc".into(),
        "vs fastest peer".into(),
    ]];
    for (p, prog) in programs.iter().enumerate() {
        let fastest = (0..allocs.len())
            .filter(|&k| allocs[k].is_peer())
            .map(|k| med(p, k, |r| r.wall))
            .fold(f64::INFINITY, f64::min);
        for (k, a) in allocs.iter().enumerate() {
            let walls: Vec<f64> = runs[p][k].iter().map(|r| r.wall).collect();
            let w = median(&walls);
            lines.push(vec![
                prog.name.clone(),
                a.name.clone(),
                format!("{w:.3}"),
                format!("±{:.1}%", spread(&walls) * 100.0),
                format!("{:.3}", med(p, k, |r| r.user)),
                format!("{:.3}", med(p, k, |r| r.sys)),
                format!("{:.0}", med(p, k, |r| r.minflt)),
                format!("{:.1}", med(p, k, |r| r.rss_kb) / 1024.0),
                format!("{:.2}×", w / med(p, 0, |r| r.wall)),
                format!("{:.2}×", w / fastest),
            ]);
        }
    }
    out += &markdown(&lines);
    out
}

/// A C file of `n` functions for `gcc -O2`.
fn big_c(n: usize) -> String {
    let mut src = String::from("#include <stddef.h>\n");
    for i in 0..n {
        src += &format!(
            "struct s{i} {{ int a[{m}]; double d; struct s{i} *next; }};\n\
             static int f{i}(struct s{i} *p, int x) {{ int r = 0; for (int k = 0; k < {m}; k++) r += p->a[k] * (x ^ k); \
             switch (x % 5) {{ case 0: r += {i}; break; case 1: r -= x; break; case 2: r *= 3; break; default: r ^= {i}; }} \
             return p->next ? r + f{i}(p->next, x + 1) : r; }}\n\
             int g{i}(struct s{i} *p) {{ return f{i}(p, {i}) + (int)p->d; }}\n",
            m = i % 13 + 1
        );
    }
    src
}

const PY_WORKLOAD: &str = r#"
import collections, json, random, re
rng = random.Random(21)
d = {}
for i in range(400000):
    k = "k%d" % rng.randrange(50000)
    d.setdefault(k, []).append(i)
words = [("w%x" % rng.getrandbits(40)) * rng.randrange(1, 6) for _ in range(120000)]
c = collections.Counter(w[:3] for w in words)
s = " ".join(words)
parts = re.findall(r"w[0-9a-f]{4}", s)
nested = [{"id": i, "tags": [str(j) for j in range(i % 17)], "v": i * 1.5} for i in range(40000)]
back = json.loads(json.dumps(nested))
print(len(d), sum(len(v) for v in d.values()), len(parts), c.most_common(2), len(back))
"#;

const SQL: &str = "CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v INTEGER, blob BLOB);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000)
INSERT INTO t(k, v, blob) SELECT 'key' || (i * 7919 % 10007), i % 977, zeroblob(i % 500) FROM n;
CREATE INDEX tk ON t(k);
CREATE TABLE u AS SELECT k, count(*) AS c, sum(v) AS s FROM t GROUP BY k;
SELECT count(*), sum(c), sum(s) FROM u;
SELECT count(*) FROM t JOIN u USING (k) WHERE t.v > u.c;
UPDATE t SET k = upper(k) || length(blob) WHERE id % 3 = 0;
DELETE FROM t WHERE v % 5 = 0;
SELECT count(*), count(DISTINCT k), sum(length(blob)) FROM t;
";

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<(usize, bool, Option<PathBuf>), cli::Stop> {
        parse_args(v.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn flags_and_help() {
        assert_eq!(parse(&[]).unwrap(), (7, false, None));
        assert_eq!(parse(&["--quick"]).unwrap(), (2, true, None));
        assert_eq!(
            parse(&["--quick", "--rounds", "3", "--out", "x"]).unwrap(),
            (3, true, Some(PathBuf::from("x")))
        );
        assert!(matches!(parse(&["--seed", "1"]), Err(cli::Stop::Error(_))));
        assert!(matches!(
            parse(&["--rounds", "0"]),
            Err(cli::Stop::Error(_))
        ));
        let Err(cli::Stop::Help(h)) = parse(&["--help"]) else {
            panic!("no help");
        };
        // The durations and what --quick is, in the help itself.
        let texts = [
            "about 30 minutes",
            "about 5 minutes",
            "not a measurement",
            "glibc's",
        ];
        assert_eq!(cli::help_problem(&h, "ctable", &texts), None);
    }
}
