//! The house rules of the sources, checked: no import circle among the modules of the runtime,
//! the macros or the facade (every `crate::` path points down a layer), and no runtime source
//! file over 600 lines but the generated routines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The `.rs` files under `dir`, recursively.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(sources(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// Top-level module of a source file (`heap/slow.rs` -> `heap`), `None` for the crate root
/// and for protocol files included by another module.
fn module_of(root: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(root).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?.to_string();
    let name = first.trim_end_matches(".rs").to_string();
    let stem = file.file_stem()?.to_str()?;
    if name == "lib" || stem.ends_with("_proto") {
        return None;
    }
    Some(name)
}

/// The module graph: module -> modules it names through `crate::` (comments ignored).
fn graph(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut text: BTreeMap<String, String> = BTreeMap::new();
    for f in sources(root) {
        if let Some(m) = module_of(root, &f) {
            let src = std::fs::read_to_string(&f).unwrap();
            let code: String = src
                .lines()
                .map(|l| l.split("//").next().unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n");
            text.entry(m).or_default().push_str(&code);
        }
    }
    let names: BTreeSet<String> = text.keys().cloned().collect();
    text.iter()
        .map(|(m, code)| {
            let deps = code
                .match_indices("crate::")
                .map(|(i, _)| {
                    code[i + 7..]
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .filter(|d| d != m && names.contains(d))
                .collect();
            (m.clone(), deps)
        })
        .collect()
}

/// A cycle of the graph, if there is one.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        g: &BTreeMap<String, BTreeSet<String>>,
        m: &str,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(2) => return None,
            Some(1) => {
                let i = path.iter().position(|p| p == m).unwrap();
                let mut c = path[i..].to_vec();
                c.push(m.to_string());
                return Some(c);
            }
            _ => {}
        }
        state.insert(m.to_string(), 1);
        path.push(m.to_string());
        for d in &g[m] {
            if let Some(c) = visit(g, d, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(m.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for m in g.keys() {
        if let Some(c) = visit(g, m, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

fn root(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn no_import_circles() {
    for crate_src in ["alloc-runtime/src", "alloc-macros/src", "src"] {
        let g = graph(&root(crate_src));
        assert!(
            g.len() > 1 || crate_src == "src",
            "{crate_src}: no modules found"
        );
        if let Some(c) = find_cycle(&g) {
            panic!("{crate_src}: import circle {}", c.join(" -> "));
        }
    }
}

#[test]
fn the_checker_finds_a_circle() {
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    g.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "c", "a"]);
    g.get_mut("c").unwrap().clear();
    assert!(find_cycle(&g).is_none());
}

#[test]
fn runtime_files_stay_small() {
    for f in sources(&root("alloc-runtime/src")) {
        if f.ends_with("routines.rs") {
            continue; // generated
        }
        let lines = std::fs::read_to_string(&f).unwrap().lines().count();
        assert!(lines <= 600, "{} has {lines} lines", f.display());
    }
}

/// Code of a source file without its comments.
fn code_of(path: &Path) -> String {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The sibling files that `code` names (`super::x`, `x::`, or `super::{x, ..}`), of `files`.
fn names_of(code: &str, files: &[String]) -> BTreeSet<String> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = BTreeSet::new();
    for f in files {
        let path_use = code.match_indices(&format!("{f}::")).any(|(i, _)| {
            let before = code[..i].chars().next_back();
            before.is_none_or(|c| !ident(c))
        });
        let group_use = code.match_indices("super::{").any(|(i, _)| {
            let group = &code[i + 8..];
            let group = &group[..group.find('}').unwrap_or(group.len())];
            group.split(',').any(|item| {
                item.trim().split("::").next() == Some(f.as_str())
                    || item.split_whitespace().next() == Some(f.as_str())
            })
        });
        if path_use || group_use {
            out.insert(f.clone());
        }
    }
    out
}

/// The files of `heap/` in the order of the table in its `mod.rs`, top layer first.
fn heap_layers(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("mod.rs"))
        .unwrap()
        .lines()
        .filter_map(|l| l.strip_prefix("//! | `")?.split_once(".rs`"))
        .map(|(name, _)| name.to_string())
        .collect()
}

/// Files of `heap/` each call only files below them in the table of `heap/mod.rs`: a reader
/// follows a call down and never back up. `mod.rs` is checked without its module declarations
/// and re-exports (the heap's interface to the rest of the crate).
#[test]
fn heap_files_are_one_way_layers() {
    let dir = root("alloc-runtime/src/heap");
    let layers = heap_layers(&dir);
    let mut on_disk: Vec<String> = sources(&dir)
        .iter()
        .map(|p| p.file_stem().unwrap().to_str().unwrap().to_string())
        .filter(|s| !s.ends_with("_proto"))
        .collect();
    on_disk.sort();
    let mut listed = layers.clone();
    listed.sort();
    assert_eq!(
        listed, on_disk,
        "the table of heap/mod.rs lists every file once"
    );
    for (i, f) in layers.iter().enumerate() {
        let mut code = code_of(&dir.join(format!("{f}.rs")));
        if f == "mod" {
            code = code
                .lines()
                .filter(|l| {
                    let t = l.trim_start();
                    !(t.starts_with("mod ")
                        || t.starts_with("pub use ")
                        || t.starts_with("pub(crate) use "))
                })
                .collect::<Vec<_>>()
                .join("\n");
        }
        let others: Vec<String> = layers.iter().filter(|g| *g != f).cloned().collect();
        for g in names_of(&code, &others) {
            let j = layers.iter().position(|x| *x == g).unwrap();
            assert!(j > i, "heap/{f}.rs calls heap/{g}.rs, which is above it");
        }
    }
}

#[test]
fn the_layer_check_sees_calls_up() {
    let files = ["slow".to_string(), "fast".to_string(), "tls".to_string()];
    let code = "use super::{central, fast::clear_block};\nfn f() { slow::x(); tls::y(); }";
    assert_eq!(
        names_of(code, &files),
        BTreeSet::from(["slow".to_string(), "fast".to_string(), "tls".to_string()])
    );
    assert!(names_of("fn g() { myslow::x(); }", &files).is_empty());
}
