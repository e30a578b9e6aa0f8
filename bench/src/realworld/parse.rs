//! A parser building an AST: syn parses Rust source — this crate's own
//! sources (embedded) and generated source — into full syntax trees, which
//! are walked, cloned and dropped.

use std::fmt::Write as _;

use syn::visit::Visit;

use super::{hash_str, mix, rng, word};

/// Sources of this crate, embedded at build time (every allocator's build
/// embeds the same text).
const SOURCES: [&str; 4] = [
    include_str!("../harness/mod.rs"),
    include_str!("../stats.rs"),
    include_str!("../sweep_loops.rs"),
    include_str!("json.rs"),
];

/// Generated source: `n` items (structs, impls with match-heavy functions,
/// closures and generics), deterministic in `seed`.
fn generate(seed: u64, n: usize) -> String {
    let mut r = rng(seed);
    let mut s = String::new();
    for i in 0..n {
        // Prefixed: a bare word may be a keyword (`do`, `in`, `fn`).
        let (a, b, c) = (
            format!("x_{}", word(&mut r)),
            format!("y_{}", word(&mut r)),
            format!("z_{}", word(&mut r)),
        );
        let _ = writeln!(
            s,
            "/// Item {i}.\n#[derive(Clone, Debug)]\npub struct S{i}<T: Clone> {{ {a}: Vec<T>, {b}: \
             Option<String>, {c}: u{} }}\n\
             impl<T: Clone + Into<u64>> S{i}<T> {{\n    pub fn f{i}(&self, x: u64) -> u64 {{\n        \
             let k = self.{a}.iter().cloned().map(Into::into).fold(x, |acc: u64, v| acc.wrapping_mul(31) ^ v);\n        \
             match k % {} {{ 0 => k + {i}, 1 | 2 => {{ let v: Vec<u64> = (0..k % 7).collect(); v.len() as u64 }} \
             _ if self.{b}.is_some() => self.{b}.as_ref().map(|s| s.len() as u64).unwrap_or(0), _ => {{ \
             let t = (k, \"{a}{b}\", [1u8, 2, 3]); t.0 >> 3 }} }}\n    }}\n}}",
            [8, 16, 32, 64][i % 4],
            3 + i % 5,
        );
    }
    s
}

/// Counts nodes of a syntax tree and hashes its identifiers.
#[derive(Default)]
struct Walker {
    h: u64,
    exprs: u64,
}

impl<'ast> Visit<'ast> for Walker {
    fn visit_ident(&mut self, i: &'ast syn::Ident) {
        self.h = self.h.wrapping_add(hash_str(&i.to_string()));
    }
    fn visit_expr(&mut self, e: &'ast syn::Expr) {
        self.exprs += 1;
        syn::visit::visit_expr(self, e);
    }
}

/// Parses one source, walks and clones its tree.
fn parse_one(src: &str) -> u64 {
    let file = syn::parse_file(src).expect("valid Rust source");
    let copy = file.clone();
    let mut w = Walker::default();
    w.visit_file(&copy);
    mix(mix(w.h, w.exprs), file.items.len() as u64)
}

/// `scale` times: the embedded sources and 40 generated items, parsed.
pub fn run(scale: u32) -> u64 {
    let mut h = 0;
    for round in 0..scale {
        for src in SOURCES {
            h = mix(h, parse_one(src));
        }
        h = mix(h, parse_one(&generate(round as u64, 40)));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_source_parses_at_every_round_of_a_full_run() {
        for round in 0..24 {
            let src = generate(round, 40);
            assert!(syn::parse_file(&src).is_ok(), "round {round}:\n{src}");
        }
    }
}
