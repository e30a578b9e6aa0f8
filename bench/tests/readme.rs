//! The README against the repository: every figure it quotes is among `bench/RESULTS.md`'s
//! current figures, its Quickstart is `examples/quickstart.rs` (which clippy builds with
//! warnings as errors; the facade's doctests compile and run the README's Rust snippets), every
//! file it links to exists, and it names no issue or commit (those belong in `CHANGELOG.md` and
//! `bench/RESULTS.md`).

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The numbers of `text` worth checking: every one with a decimal point (`0.71`, `26.6`), and
/// every percentage and ratio, with its sign stripped.
fn figures(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_ascii_digit() && (i == 0 || !chars[i - 1].is_alphanumeric()) {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                i += 1;
            }
            let number: String = chars[start..i].iter().collect();
            let number = number.trim_end_matches('.').to_string();
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let unit = matches!(chars.get(i), Some('%' | '×')) || rest == " %";
            if number.contains('.') || unit {
                out.push(number);
            }
        } else {
            i += 1;
        }
    }
    out
}

/// `bench/RESULTS.md` up to its history part.
fn current_results() -> String {
    let results = read("bench/RESULTS.md");
    let end = results
        .find("\n# History")
        .expect("RESULTS.md has a History part");
    results[..end].to_string()
}

#[test]
fn figures_come_from_the_current_results() {
    assert_eq!(
        figures("0.71× and 26.6, 29.7 %, 2,047 nodes, 5 minutes"),
        ["0.71", "26.6", "29.7"]
    );
    let readme = read("README.md");
    let results = current_results();
    let found = figures(&readme);
    assert!(found.len() >= 8, "the README quotes its figures: {found:?}");
    let missing: Vec<&String> = found
        .iter()
        .filter(|f| !results.contains(f.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "figures in README.md that bench/RESULTS.md's current part does not have: {missing:?}"
    );
}

#[test]
fn quickstart_is_the_example() {
    let readme = read("README.md");
    let start = readme.find("```rust\n").expect("a Rust block") + "```rust\n".len();
    let block = &readme[start..start + readme[start..].find("```").unwrap()];
    let example = read("examples/quickstart.rs");
    let body = example
        .split_once("\n\n")
        .map(|(_, b)| b)
        .expect("a header comment, then the code");
    assert_eq!(
        block, body,
        "README's Quickstart and examples/quickstart.rs differ"
    );
}

#[test]
fn links_point_at_files_that_exist() {
    for doc in ["README.md", "docs/usage.md", "docs/design.md", "docs/c.md"] {
        let text = read(doc);
        let dir = Path::new(doc).parent().unwrap();
        for (i, _) in text.match_indices("](") {
            let rest = &text[i + 2..];
            let target = &rest[..rest.find(')').unwrap()];
            let path = target.split('#').next().unwrap();
            if path.is_empty() || path.contains("://") {
                continue;
            }
            assert!(
                root().join(dir).join(path).exists(),
                "{doc} links to {target}, which does not exist"
            );
        }
    }
}

#[test]
fn no_issue_numbers_or_commits() {
    let readme = read("README.md");
    for word in readme.split(|c: char| !c.is_alphanumeric() && c != '#') {
        let hex = word.len() >= 7 && word.chars().all(|c| c.is_ascii_hexdigit());
        let hash = hex
            && word.chars().any(|c| c.is_ascii_digit())
            && word.chars().any(|c| c.is_ascii_alphabetic());
        assert!(!hash, "README names a commit: {word}");
        assert!(
            !(word.starts_with('#')
                && word[1..].chars().all(|c| c.is_ascii_digit())
                && word.len() > 1),
            "README names an issue: {word}"
        );
    }
    assert!(
        !readme.to_lowercase().contains("issue "),
        "README names an issue"
    );
}
