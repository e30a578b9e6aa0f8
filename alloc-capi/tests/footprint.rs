//! What preloading `libspecalloc.so` adds to every process before it allocates anything: the
//! libraries it loads. Each one it needs is mapped and relocated at start and counts in the
//! process's resident set (`libm.so`'s start-up made about 300 KiB resident, for the two
//! functions the heap profiler's sampler called), so the library needs glibc, the loader and
//! `libgcc_s` (the unwinder: Rust's panics and the profiler's stacks) and nothing else. And the
//! code that runs is placed together (`hot-text.ld`): the kernel maps a library's pages around
//! each one touched, so code spread through the text made about 300 KiB of it resident. The
//! PLT's stubs go with that code, and the allocator's tables before the rest of the read-only
//! data, next to what the dynamic loader reads.
//!
//! Skipped, with a line, without `readelf` (and `nm`).

mod common;

use std::process::Command;

/// What `prog flag <the library>` prints.
fn tool(prog: &str, flag: &str) -> String {
    let o = Command::new(prog)
        .arg(flag)
        .arg(common::lib())
        .output()
        .unwrap_or_else(|e| panic!("run {prog}: {e}"));
    assert!(o.status.success(), "{prog} {flag} failed");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The shared libraries the library names as needed (`readelf -d`'s `NEEDED` entries).
fn needed() -> Option<Vec<String>> {
    if !common::have("readelf", "the needed-libraries check") {
        return None;
    }
    let text = tool("readelf", "-dW");
    Some(
        text.lines()
            .filter(|l| l.contains("(NEEDED)"))
            .filter_map(|l| Some(l.split_once('[')?.1.split_once(']')?.0.to_string()))
            .collect(),
    )
}

#[test]
fn only_libc_the_loader_and_the_unwinder_are_needed() {
    let Some(libs) = needed() else { return };
    println!("NEEDED: {libs:?}");
    assert!(
        libs.iter().any(|l| l.starts_with("libc.so")),
        "libc is among the needed libraries: {libs:?}"
    );
    let extra: Vec<&String> = libs
        .iter()
        .filter(|l| {
            !(l.starts_with("libc.so") || l.starts_with("ld-linux") || l.starts_with("libgcc_s"))
        })
        .collect();
    assert!(
        extra.is_empty(),
        "libspecalloc.so needs libraries beyond libc, the loader and libgcc_s: {extra:?} \
         (each one is mapped and relocated in every preloaded process)"
    );
}

#[test]
fn the_allocators_code_is_placed_together() {
    let Some(sections) = sections("the text-order check") else {
        return;
    };
    // `[15] .text.specalloc PROGBITS 0000000000030250 02f250 0191ee ...`
    let (start, size) = must_have(&sections, ".text.specalloc");
    println!(".text.specalloc: {start:#x}, {size} bytes");
    let symbols = tool("nm", "-C");
    for name in [
        "malloc",
        "free",
        "calloc",
        "realloc",
        "heap::miss::alloc_slow",
        "heap::miss::free_slow",
        "heap::slow::alloc_from",
        "chunk::place::alloc_runs",
    ] {
        let at = address(&symbols, name, true);
        assert!(
            (start..start + size).contains(&at),
            "{name} at {at:#x} lies outside .text.specalloc ({start:#x}, {size} bytes)"
        );
    }
    // The text that follows is the rest: the section holds the allocator, not the library.
    let (_, text) = must_have(&sections, ".text");
    assert!(
        size < text,
        "the allocator's section ({size} bytes) is not the smaller part of the text ({text} bytes)"
    );
    // The PLT's stubs, which the C library's `pthread_atfork` and `atexit` call when the library
    // is loaded, are in the allocator's section, not after the rest of the text: the library
    // has them (it has their relocations) and no `.plt` section of its own.
    assert!(
        section(&sections, ".rela.plt").is_some(),
        "no PLT relocations: nothing to check\n{sections}"
    );
    assert!(
        section(&sections, ".plt").is_none(),
        "a .plt section of its own, outside the allocator's:\n{sections}"
    );
}

#[test]
fn the_allocators_tables_come_first_in_the_read_only_data() {
    let Some(sections) = sections("the read-only data check") else {
        return;
    };
    let (start, size) = must_have(&sections, ".rodata.specalloc");
    let (rodata, _) = must_have(&sections, ".rodata");
    println!(".rodata.specalloc: {start:#x}, {size} bytes; .rodata at {rodata:#x}");
    assert!(
        start + size <= rodata,
        "the allocator's read-only data does not precede the rest"
    );
    // The tables `malloc` reads on every call, at the section's start, in the first 64 KiB of
    // the file (where the loader reads the symbol tables and relocations; the first segment's
    // addresses are its offsets).
    let symbols = tool("nm", "-C");
    for name in ["cabi::C_CACHE", "cabi::C_CACHE_MEDIUM"] {
        let at = address(&symbols, name, false);
        assert!(
            (start..start + 1024).contains(&at),
            "{name} at {at:#x} is not in the first KiB of .rodata.specalloc ({start:#x})"
        );
        assert!(
            at < 64 << 10,
            "{name} at {at:#x} is past the library's first 64 KiB"
        );
    }
}

/// `readelf -SW`'s listing of the library's sections; `None`, with a line saying that `check`
/// is skipped, without `readelf` and `nm`.
fn sections(check: &str) -> Option<String> {
    (common::have("readelf", check) && common::have("nm", check)).then(|| tool("readelf", "-SW"))
}

/// The address and size of the section `name` in `readelf -SW`'s listing, if there is one.
fn section(sections: &str, name: &str) -> Option<(u64, u64)> {
    sections.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let at = f.iter().position(|w| *w == name)?;
        let hex = |w: &str| u64::from_str_radix(w, 16).ok();
        Some((hex(f.get(at + 2)?)?, hex(f.get(at + 4)?)?))
    })
}

/// [`section`], which the library must have.
fn must_have(sections: &str, name: &str) -> (u64, u64) {
    section(sections, name).unwrap_or_else(|| panic!("no {name} section in:\n{sections}"))
}

/// The address of the symbol `name` (or one ending in `::name`) in `nm -C`'s listing: a
/// function when `code`, any symbol otherwise.
fn address(symbols: &str, name: &str, code: bool) -> u64 {
    symbols
        .lines()
        .find_map(|l| {
            let (addr, rest) = l.split_once(' ')?;
            let (kind, sym) = rest.split_once(' ')?;
            ((!code || kind.eq_ignore_ascii_case("t"))
                && (sym == name || sym.ends_with(&format!("::{name}"))))
            .then(|| u64::from_str_radix(addr, 16).ok())?
        })
        .unwrap_or_else(|| panic!("no symbol {name} in the library"))
}
