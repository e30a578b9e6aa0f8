//! Reading `nm` output: symbols, the size-specialised routines and their
//! code size.

use std::collections::{BTreeMap, BTreeSet};

use super::{AllocPath, ROUTINE_PREFIX};

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
