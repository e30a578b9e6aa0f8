//! trybuild: every diagnostic of the macros (compile-fail cases with their `.stderr`), and the
//! forms they must accept (pass cases, which also run and check their results).
//!
//! After an intended change to a message, regenerate with
//! `TRYBUILD=overwrite cargo test -p specalloc-macros --test ui` and review the `.stderr` diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    // Issue 22: the diagnostics corpus, each case annotated (`NAME.rs`) and plain
    // (`NAME_plain.rs`, the attribute lines replaced by a comment); `diagnostics_as_plain`
    // compares their `.stderr`.
    t.compile_fail("tests/ui/diag/*.rs");
    t.pass("tests/ui/pass/*.rs");
}

/// Cases of the corpus whose diagnostics still differ from plain code, with the reason (see
/// `docs/macros.md`, "Known limits"): their `.stderr` are checked by trybuild as they are.
const KNOWN_DIFFERENT: &[(&str, &str)] = &[
    (
        "reach",
        "`Box::<T>::default()` of a `T` without `Default` leaves out std's note listing `Box`'s \
         constructors; `Box::<[u8; 3]>::from([1, 2])` is E0308 on the array where std says \
         E0277 (`From<[{integer}; 2]>` is not implemented)",
    ),
    (
        "box_type",
        "`Box::new(e)` calls, through a pointer, the function chosen at compile time (std's \
         `Box::new` itself for a value no routine serves, built in place in a debug build): a \
         call through a pointer has no \"associated function defined here\" note",
    ),
];

/// Issue 22: each annotated case of `tests/ui/diag` prints what its plain twin prints (modulo
/// the file name), but for the cases in `KNOWN_DIFFERENT`.
#[test]
fn diagnostics_as_plain() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui/diag");
    let mut compared = 0;
    for entry in std::fs::read_dir(&dir).expect("tests/ui/diag") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let Some(case) = name.strip_suffix(".stderr") else {
            continue;
        };
        if case.ends_with("_plain") {
            continue;
        }
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).expect("a .stderr");
        let annotated = read(name);
        let plain = read(&format!("{case}_plain.stderr"))
            .replace(&format!("{case}_plain.rs"), &format!("{case}.rs"));
        match KNOWN_DIFFERENT.iter().find(|(c, _)| *c == case) {
            Some(_) => assert_ne!(
                annotated, plain,
                "{case} now matches: drop it from KNOWN_DIFFERENT"
            ),
            None => assert_eq!(annotated, plain, "{case}: annotated against plain"),
        }
        // Whether they differ or not, no annotated diagnostic points into specalloc or names
        // its internals.
        for internal in ["$WORKSPACE", "__private", "specalloc_runtime", "spec::"] {
            assert!(
                !annotated.contains(internal),
                "{case}: the diagnostics name {internal}:\n{annotated}"
            );
        }
        compared += 1;
    }
    assert!(compared >= 4, "{compared}");
}
