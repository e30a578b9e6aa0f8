//! The checked-in `src/routines.rs` is exactly what its generator produces.

#[path = "../tools/gen_routines.rs"]
mod gen_routines;

#[test]
fn regenerating_changes_nothing() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/routines.rs");
    let on_disk = std::fs::read_to_string(path).expect("read src/routines.rs");
    assert!(
        on_disk == gen_routines::generate(),
        "src/routines.rs is stale: run `cargo run -p specalloc-runtime --example gen_routines`"
    );
}

#[test]
fn one_routine_per_class_and_tiny_size() {
    // Every class but class 1 (8 bytes: all sizes under 16 are tiny), and every tiny size.
    let text = gen_routines::generate();
    let count = |prefix: &str| text.matches(&format!("pub fn {prefix}")).count();
    assert_eq!(
        count("small_sc"),
        specalloc_runtime::size_class::NUM_CLASSES - 2
    );
    assert_eq!(
        count("small_zeroed_sc"),
        specalloc_runtime::size_class::NUM_CLASSES - 2
    );
    assert_eq!(count("tiny_size"), 15);
    assert_eq!(count("tiny_zeroed_size"), 15);
}
