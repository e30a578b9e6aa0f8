//! trybuild: every diagnostic of the macros (compile-fail cases with their `.stderr`), and the
//! forms they must accept (pass cases, which also run and check their results).
//!
//! After an intended change to a message, regenerate with
//! `TRYBUILD=overwrite cargo test -p specalloc-macros --test ui` and review the `.stderr` diff.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/fail/*.rs");
    t.pass("tests/ui/pass/*.rs");
}
