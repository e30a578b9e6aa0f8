//! Text processing: a generated corpus is tokenised, words are counted in a
//! `HashMap<String, u32>`, lines are rewritten with `format!`, and a report
//! is assembled by `String` growth and sorted.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{hash_str, mix, rng, word};

/// Lines per unit of scale.
const LINES: usize = 1_500;

/// `scale` corpora of 1,500 lines each, processed.
pub fn run(scale: u32) -> u64 {
    let mut h = 0;
    for round in 0..scale {
        let mut r = rng(0x7e47_0000 + round as u64);
        // The corpus, grown line by line.
        let mut corpus = String::new();
        for i in 0..LINES {
            let n = 4 + r.next_u64() % 12;
            for j in 0..n {
                if j > 0 {
                    corpus.push(if r.next_u64().is_multiple_of(9) {
                        ','
                    } else {
                        ' '
                    });
                    corpus.push(' ');
                }
                let w = word(&mut r);
                if j == 0 {
                    let mut c = w.chars();
                    let first = c.next().map(|f| f.to_ascii_uppercase()).unwrap_or('X');
                    corpus.push(first);
                    corpus.push_str(c.as_str());
                } else {
                    corpus.push_str(&w);
                }
            }
            let _ = writeln!(corpus, ". ({i})");
        }
        // Tokenise and count.
        let mut counts: HashMap<String, u32> = HashMap::new();
        let mut tokens = 0u64;
        for tok in corpus
            .split(|c: char| !c.is_alphanumeric())
            .filter(|t| !t.is_empty())
        {
            tokens += 1;
            *counts.entry(tok.to_lowercase()).or_insert(0) += 1;
        }
        // Rewrite every line.
        let rewritten: Vec<String> = corpus
            .lines()
            .enumerate()
            .map(|(i, l)| format!("{i:>5}: {} [{}]", l.replace(", ", "; "), l.len()))
            .collect();
        let joined = rewritten.join("\n");
        // The report: the most frequent words.
        let mut top: Vec<(String, u32)> = counts.into_iter().collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let mut report = String::new();
        for (w, c) in top.iter().take(200) {
            let _ = writeln!(report, "{w:>12} {c:6} {}", w.to_uppercase());
        }
        h = mix(h, tokens);
        h = mix(h, hash_str(&report));
        h = mix(h, joined.len() as u64 ^ top.len() as u64);
    }
    h
}
