//! `libspecalloc.so` reads its thread-locals with the initial-exec TLS model: no function of the
//! allocator makes the general-dynamic model's call (which stable Rust's `thread_local!` makes in
//! a shared library), as `objdump -d` shows. On x86_64 that call is `__tls_get_addr`; on aarch64
//! it goes through a TLS descriptor (`R_AARCH64_TLSDESC`: the resolver loaded from the
//! descriptor's GOT slot, then `blr`). The calls left are std's own (panics, thread-local
//! destructors, captured output), and the library has the initial-exec model's relocation
//! (x86_64 also marks it `STATIC_TLS`). Its TLS segment, which a late `dlopen` must fit into
//! glibc's static TLS surplus, is the size `docs/c.md` gives.
//!
//! The library is the host's, or the one `SPECALLOC_SO` names, disassembled with the binutils
//! named by `SPECALLOC_BINUTILS_PREFIX` (`aarch64-linux-gnu-` checks an aarch64 build from an
//! x86_64 machine: `scripts/check-aarch64.sh`). Skipped, with a line, without `objdump`, `nm`
//! and `readelf`.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

/// `tool` from the binutils `SPECALLOC_BINUTILS_PREFIX` names (the host's by default).
fn binutil(tool: &str) -> String {
    format!(
        "{}{tool}",
        std::env::var("SPECALLOC_BINUTILS_PREFIX").unwrap_or_default()
    )
}

fn run(tool: &str, args: &[&str], lib: &Path) -> String {
    let o = Command::new(binutil(tool))
        .args(args)
        .arg(lib)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", binutil(tool)));
    assert!(o.status.success(), "{} failed", binutil(tool));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The functions (as `objdump` heads them: `addr <name>:`) of a disassembly, each with its
/// lines.
fn functions(text: &str) -> Vec<(&str, Vec<&str>)> {
    let mut out: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        if let Some((_, name)) = line.strip_suffix(">:").and_then(|l| l.split_once(" <")) {
            out.push((name, Vec::new()));
        } else if let Some(f) = out.last_mut() {
            f.1.push(line);
        }
    }
    out
}

/// x86_64: the functions that call `__tls_get_addr`.
fn x86_64_callers<'a>(funcs: &[(&'a str, Vec<&str>)]) -> Vec<&'a str> {
    funcs
        .iter()
        .filter(|(_, lines)| {
            lines
                .iter()
                .any(|l| l.contains("call") && l.contains("__tls_get_addr"))
        })
        .map(|(name, _)| *name)
        .collect()
}

/// aarch64: the functions that load a TLS descriptor's resolver, `ldr xA, [xB, #lo]` after
/// `adrp xB, page` with `page + lo` one of the descriptors' GOT slots (`slots`).
fn aarch64_callers<'a>(funcs: &[(&'a str, Vec<&str>)], slots: &BTreeSet<u64>) -> Vec<&'a str> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).ok();
    funcs
        .iter()
        .filter(|(_, lines)| {
            // The page each register was last set to by `adrp`.
            let mut page: HashMap<&str, u64> = HashMap::new();
            lines.iter().any(|l| {
                // `   addr:\tmnemonic\toperands`
                let mut cols = l.split('\t').skip(1);
                let (Some(op), Some(args)) = (cols.next(), cols.next()) else {
                    return false;
                };
                let args: Vec<&str> = args.split(", ").map(str::trim).collect();
                match op.trim() {
                    "adrp" if args.len() >= 2 => {
                        let target = args[1].split_whitespace().next().and_then(hex);
                        if let Some(t) = target {
                            page.insert(args[0], t);
                        }
                        false
                    }
                    "ldr" if args.len() >= 2 => {
                        let base = args[1].trim_start_matches('[').trim_end_matches(']');
                        let lo = args
                            .get(2)
                            .map(|a| a.trim_start_matches('#').trim_end_matches(']'))
                            .map_or(Some(0), |a| a.parse::<u64>().ok());
                        matches!((page.get(base), lo), (Some(p), Some(lo)) if slots.contains(&(p + lo)))
                    }
                    _ => false,
                }
            })
        })
        .map(|(name, _)| *name)
        .collect()
}

#[test]
fn no_allocator_function_calls_tls_get_addr() {
    for tool in ["objdump", "nm", "readelf"] {
        if !common::have(&binutil(tool), "the TLS-model check") {
            return;
        }
    }
    let lib = common::lib();
    let header = run("readelf", &["-h"], &lib);
    let aarch64 = header.contains("AArch64");
    assert!(
        aarch64 || header.contains("X86-64"),
        "neither x86_64 nor aarch64: {header}"
    );
    let text = run("objdump", &["-d", "--no-show-raw-insn", "-C"], &lib);
    let funcs = functions(&text);
    let relocs = run("readelf", &["-rW"], &lib);
    let callers = if aarch64 {
        // The GOT slots of the TLS descriptors.
        let slots: BTreeSet<u64> = relocs
            .lines()
            .filter(|l| l.contains("R_AARCH64_TLSDESC"))
            .filter_map(|l| u64::from_str_radix(l.split_whitespace().next()?, 16).ok())
            .collect();
        aarch64_callers(&funcs, &slots)
    } else {
        x86_64_callers(&funcs)
    };
    // The entry points themselves are there and were read (under their own name, or another
    // one at the same address: the linker folds identical functions, `malloc` and
    // `__libc_malloc`).
    let symbols = run("nm", &["-D", "--defined-only"], &lib);
    for f in ["malloc", "free", "calloc", "realloc", "posix_memalign"] {
        let addr = symbols
            .lines()
            .find_map(|l| {
                let mut w = l.split_whitespace();
                let (a, _, name) = (w.next()?, w.next()?, w.next()?);
                (name == f).then(|| a.to_string())
            })
            .unwrap_or_else(|| panic!("`{f}` is not exported"));
        assert!(
            text.contains(&format!("{addr} <")),
            "no function at `{f}`'s address {addr} in the disassembly"
        );
    }
    // Writing a heap profile (symbolising its stacks with the `backtrace` crate, encoding it)
    // is no allocation path: it runs at exit, on the profile signal's request, or when the
    // program asks, and may read thread-locals as std does.
    let dump_time =
        |f: &str| f.starts_with("specalloc_runtime::prof::pprof::") || f.contains("backtrace::");
    let ours: Vec<_> = callers
        .iter()
        .filter(|f| {
            !f.starts_with("std::")
                && !f.starts_with("<std::")
                && !f.starts_with("<&std::")
                && !dump_time(f)
        })
        .collect();
    assert!(
        ours.is_empty(),
        "functions other than std's make the general-dynamic TLS call: {ours:?}"
    );
    // The initial-exec model's relocation: the block's offset from the thread pointer.
    let tprel = if aarch64 {
        "R_AARCH64_TLS_TPREL"
    } else {
        "R_X86_64_TPOFF64"
    };
    assert!(
        relocs.contains(tprel),
        "no {tprel} relocation: not initial-exec"
    );
    if !aarch64 {
        assert!(
            run("readelf", &["-d"], &lib).contains("STATIC_TLS"),
            "the library is not marked STATIC_TLS"
        );
    }
}

/// The TLS segment's size (`PT_TLS`'s memory size: what a late `dlopen` takes of glibc's static
/// TLS surplus) is the figure `docs/c.md` gives ("TLS segment takes N bytes"), on x86_64, which
/// the figure is for (printed elsewhere).
#[test]
fn tls_segment_is_the_documented_size() {
    if !common::have(&binutil("readelf"), "the TLS-size check") {
        return;
    }
    let lib = common::lib();
    let segments = run("readelf", &["-lW"], &lib);
    // `TLS  Offset VirtAddr PhysAddr FileSiz MemSiz Flg Align`
    let line = segments
        .lines()
        .find(|l| l.split_whitespace().next() == Some("TLS"))
        .unwrap_or_else(|| panic!("no TLS segment in:\n{segments}"));
    let memsz = line
        .split_whitespace()
        .nth(5)
        .and_then(|f| usize::from_str_radix(f.trim_start_matches("0x"), 16).ok())
        .unwrap_or_else(|| panic!("no memory size in `{line}`"));
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/c.md"))
        .expect("read docs/c.md");
    let doc = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    let documented: usize = doc
        .split_once("TLS segment takes ")
        .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
        .expect("docs/c.md gives the TLS segment's size (\"TLS segment takes N bytes\")");
    println!("TLS segment: {memsz} bytes; docs/c.md: {documented}");
    if run("readelf", &["-h"], &lib).contains("X86-64") {
        assert_eq!(
            memsz, documented,
            "the TLS segment's size is not the one docs/c.md gives"
        );
    }
}
