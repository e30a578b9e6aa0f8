//! Real programs under `LD_PRELOAD=libspecalloc.so`: each runs the same workload on glibc's
//! malloc and on specalloc, and the output must be identical. Every process (the programs
//! start others: git its helpers, gcc cc1 and as) appends its counters at exit to a file
//! (`SPECALLOC_STATS_AT_EXIT`), which shows it ran on specalloc. A program that is not
//! installed is skipped with a line.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `make()`'s command on glibc, then on specalloc; returns both outputs after checking
/// that both succeeded and that the specalloc run's processes reported allocations.
fn both(what: &str, dir: &Path, make: impl Fn(&Path) -> Command) -> (Output, Output) {
    let glibc_dir = dir.join("glibc");
    let spec_dir = dir.join("specalloc");
    std::fs::create_dir_all(&glibc_dir).unwrap();
    std::fs::create_dir_all(&spec_dir).unwrap();
    let plain = make(&glibc_dir).output().expect("run on glibc");
    common::assert_ok(&format!("{what} on glibc"), &plain);
    let report = dir.join("stats-at-exit.txt");
    let _ = std::fs::remove_file(&report);
    let mut cmd = make(&spec_dir);
    cmd.env("SPECALLOC_STATS_AT_EXIT", &report);
    let spec = common::preloaded(cmd);
    common::assert_ok(&format!("{what} on specalloc"), &spec);
    let lines = std::fs::read_to_string(&report).unwrap_or_default();
    let allocs: Vec<u64> = lines
        .lines()
        .filter_map(|l| l.split_whitespace().find_map(|w| w.strip_prefix("allocs=")))
        .map(|n| n.parse().unwrap())
        .collect();
    println!(
        "{what}: {} processes on specalloc, {} allocations",
        allocs.len(),
        allocs.iter().sum::<u64>()
    );
    assert!(
        !allocs.is_empty() && allocs.iter().all(|&n| n > 0),
        "{what}: no process reported allocations from specalloc:\n{lines}"
    );
    (plain, spec)
}

fn same_stdout(what: &str, a: &Output, b: &Output) {
    assert!(
        a.stdout == b.stdout,
        "{what}: output differs\n--- glibc ---\n{}\n--- specalloc ---\n{}",
        String::from_utf8_lossy(&a.stdout),
        String::from_utf8_lossy(&b.stdout)
    );
    assert!(!a.stdout.is_empty(), "{what}: no output");
}

fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

const PY_WORKLOAD: &str = r#"
import collections, json, random, re
rng = random.Random(21)
d = {}
for i in range(200000):
    k = "k%d" % rng.randrange(50000)
    d.setdefault(k, []).append(i)
words = [("w%x" % rng.getrandbits(40)) * rng.randrange(1, 6) for _ in range(60000)]
c = collections.Counter(w[:3] for w in words)
s = " ".join(words)
parts = re.findall(r"w[0-9a-f]{4}", s)
nested = [{"id": i, "tags": [str(j) for j in range(i % 17)], "v": i * 1.5} for i in range(20000)]
blob = json.dumps(nested)
back = json.loads(blob)
big = [bytearray(rng.randrange(1, 300000)) for _ in range(200)]
print(len(d), sum(len(v) for v in d.values()), max(len(v) for v in d.values()))
print(len(words), len(s), len(parts), c.most_common(3))
print(len(blob), back[19999]["tags"][-1], sum(x["v"] for x in back))
print(sum(len(b) for b in big), sorted(d)[:3], "".join(sorted(set(s)))[:20])
"#;

#[test]
fn python3_workload_and_regression_tests() {
    if !common::have("python3", "python3 workload") {
        return;
    }
    let dir = common::scratch("python3");
    let script = write(&dir.join("workload.py"), PY_WORKLOAD);
    let (a, b) = both("python3 workload", &dir, |_| {
        let mut c = Command::new("python3");
        c.arg(&script).env("PYTHONHASHSEED", "0");
        c
    });
    same_stdout("python3 workload", &a, &b);

    // A few of Python's own regression tests, where the installation has them.
    let has_tests = Command::new("python3")
        .args(["-c", "import test.libregrtest"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !has_tests {
        println!("SKIPPED python3 -m test: this python3 has no test package");
        return;
    }
    let (a, b) = both("python3 -m test", &dir, |work| {
        let mut c = Command::new("python3");
        c.args([
            "-m",
            "test",
            "test_list",
            "test_dict",
            "test_string",
            "test_bytes",
            "test_set",
        ])
        .current_dir(work);
        c
    });
    for o in [&a, &b] {
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("SUCCESS"), "python3 -m test:\n{out}");
    }
}

/// A `git fast-import` stream of `n` commits, each changing a few files, with fixed dates (so
/// the hashes are the same on every run).
fn fast_import_stream(n: usize) -> String {
    let mut s = String::new();
    let mut mark = 0;
    for i in 0..n {
        let mut blobs = Vec::new();
        for f in 0..3 {
            mark += 1;
            let body: String = (0..(i * 7 + f * 13) % 120 + 5)
                .map(|l| format!("line {l} of file {} in commit {i}\n", (i + f) % 40))
                .collect();
            s += &format!("blob\nmark :{mark}\ndata {}\n{body}\n", body.len());
            blobs.push((mark, format!("dir{}/file{}.txt", (i + f) % 7, (i + f) % 40)));
        }
        let msg = format!("commit {i}: touch {} files\n", blobs.len());
        s += &format!(
            "commit refs/heads/main\ncommitter Spec Alloc <spec@example.com> {} +0000\ndata {}\n{msg}",
            1_700_000_000 + i * 60,
            msg.len()
        );
        for (m, path) in blobs {
            s += &format!("M 100644 :{m} {path}\n");
        }
        s += "\n";
    }
    s
}

#[test]
fn git_repository_gc_fsck() {
    if !common::have("git", "git repository") {
        return;
    }
    let dir = common::scratch("git");
    let stream = write(&dir.join("stream.fi"), &fast_import_stream(400));
    let script = write(
        &dir.join("git.sh"),
        "set -e\n\
         export GIT_CONFIG_NOSYSTEM=1 HOME=\"$PWD\"\n\
         git init -q -b main repo\n\
         cd repo\n\
         git fast-import --quiet < \"$1\"\n\
         git checkout -q main\n\
         git log --format='%H %s' --stat | sha256sum\n\
         git rev-list --count HEAD\n\
         git gc -q --aggressive\n\
         git fsck --full --strict 2>&1\n\
         git count-objects -v | grep -v size\n\
         git log -p --format=%H | sha256sum\n\
         git diff HEAD~150 HEAD --stat | tail -1\n",
    );
    let (a, b) = both("git", &dir, |work| {
        let mut c = Command::new("sh");
        c.arg(&script).arg(&stream).current_dir(work);
        c
    });
    same_stdout("git", &a, &b);
}

#[test]
fn sqlite3_script() {
    if !common::have("sqlite3", "sqlite3 script") {
        return;
    }
    let dir = common::scratch("sqlite3");
    let sql = write(
        &dir.join("script.sql"),
        "CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v INTEGER, blob BLOB);\n\
         WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 60000)\n\
         INSERT INTO t(k, v, blob) SELECT 'key' || (i * 7919 % 10007), i % 977, zeroblob(i % 500) FROM n;\n\
         CREATE INDEX tk ON t(k);\n\
         CREATE TABLE u AS SELECT k, count(*) AS c, sum(v) AS s FROM t GROUP BY k;\n\
         SELECT count(*), sum(c), sum(s) FROM u;\n\
         SELECT k, c, s FROM u ORDER BY s DESC, k LIMIT 5;\n\
         SELECT count(*) FROM t JOIN u USING (k) WHERE t.v > u.c;\n\
         UPDATE t SET k = upper(k) || length(blob) WHERE id % 3 = 0;\n\
         DELETE FROM t WHERE v % 5 = 0;\n\
         SELECT count(*), count(DISTINCT k), sum(length(blob)) FROM t;\n\
         VACUUM;\n\
         PRAGMA integrity_check;\n\
         SELECT group_concat(k, ',') FROM (SELECT DISTINCT k FROM t ORDER BY k LIMIT 20);\n",
    );
    let (a, b) = both("sqlite3", &dir, |work| {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("sqlite3 db.sqlite < \"$1\"")
            .arg("sh")
            .arg(&sql)
            .current_dir(work);
        c
    });
    same_stdout("sqlite3", &a, &b);
}

#[test]
fn perl_script() {
    if !common::have("perl", "perl script") {
        return;
    }
    let dir = common::scratch("perl");
    let pl = write(
        &dir.join("work.pl"),
        r#"use strict; use warnings;
my %h; my @a; my $s = "";
srand(21);
for my $i (0 .. 200000) { my $k = "k" . int(rand(30000)); push @{$h{$k}}, $i; }
for my $i (0 .. 50000) { push @a, join("-", map { $_ * $i % 97 } 1 .. ($i % 9 + 1)); }
$s .= $_ for @a;
my @m = ($s =~ /(\d+-\d+-\d+)/g);
my @sorted = sort { length($a) <=> length($b) or $a cmp $b } @a;
my %len; $len{length $_}++ for @a;
print scalar(keys %h), " ", length($s), " ", scalar(@m), "\n";
print join(",", @sorted[0 .. 4]), " ", $sorted[-1], "\n";
print join(" ", map { "$_=$len{$_}" } sort { $a <=> $b } keys %len), "\n";
"#,
    );
    let (a, b) = both("perl", &dir, |_| {
        let mut c = Command::new("perl");
        c.arg(&pl);
        c
    });
    same_stdout("perl", &a, &b);
}

#[test]
fn gcc_compiles_identical_object() {
    if !common::have("gcc", "gcc compile") {
        return;
    }
    let dir = common::scratch("gcc");
    let mut src = String::from("#include <stddef.h>\n");
    for i in 0..400 {
        src += &format!(
            "struct s{i} {{ int a[{n}]; double d; struct s{i} *next; }};\n\
             static int f{i}(struct s{i} *p, int x) {{ int r = 0; for (int k = 0; k < {n}; k++) r += p->a[k] * (x ^ k); \
             switch (x % 5) {{ case 0: r += {i}; break; case 1: r -= x; break; case 2: r *= 3; break; default: r ^= {i}; }} \
             return p->next ? r + f{i}(p->next, x + 1) : r; }}\n\
             int g{i}(struct s{i} *p) {{ return f{i}(p, {i}) + (int)p->d; }}\n",
            n = i % 13 + 1
        );
    }
    let c_file = write(&dir.join("big.c"), &src);
    let (a, b) = both("gcc", &dir, |work| {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("gcc -O2 -c \"$1\" -o big.o && sha256sum < big.o && size big.o | tail -1 | cut -f1-3")
            .arg("sh")
            .arg(&c_file)
            .current_dir(work);
        c
    });
    same_stdout("gcc", &a, &b);
    let (oa, ob) = (
        std::fs::read(dir.join("glibc/big.o")).unwrap(),
        std::fs::read(dir.join("specalloc/big.o")).unwrap(),
    );
    assert!(oa == ob, "gcc produced different objects");
}

#[test]
fn sort_parallel() {
    if !common::have("sort", "sort --parallel=2") {
        return;
    }
    let dir = common::scratch("sort");
    let mut text = String::new();
    let mut x: u64 = 21;
    for i in 0..300_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        text += &format!(
            "{:016x} {} {}\n",
            x,
            i % 1000,
            "z".repeat((x % 40) as usize)
        );
    }
    let input = write(&dir.join("input.txt"), &text);
    let (a, b) = both("sort", &dir, |work| {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("sort --parallel=2 -S 8M -T . -k2,2n -k1,1 \"$1\" | sha256sum && sort --parallel=2 -u \"$1\" | wc -l")
            .arg("sh")
            .arg(&input)
            .current_dir(work)
            .env("LC_ALL", "C");
        c
    });
    same_stdout("sort", &a, &b);
}
