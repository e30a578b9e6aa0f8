//! A `macro_rules! vec` of the crate's own, defined at its root, where an annotated item
//! cannot see it being defined: `vec!` in the annotated code is still that macro, as without
//! the attribute (the attribute leaves every `vec!` to whatever it names).

use std::cell::Cell;

thread_local! {
    static CALLS: Cell<usize> = const { Cell::new(0) };
}

/// The crate's own `vec!`: counts its calls, then builds std's vector.
macro_rules! vec {
    ($($t:tt)*) => {{
        CALLS.with(|c| c.set(c.get() + 1));
        std::vec![$($t)*]
    }};
}

fn calls() -> usize {
    CALLS.with(Cell::get)
}

const LEN: usize = 4;

fn plain() -> (Vec<u8>, Vec<u8>, Vec<u8>, Box<u8>) {
    (vec![0u8; LEN], vec![7u8; 4], vec![1u8, 2], Box::new(3))
}

#[specalloc::specialize]
fn annotated() -> (Vec<u8>, Vec<u8>, Vec<u8>, Box<u8>) {
    (vec![0u8; LEN], vec![7u8; 4], vec![1u8, 2], Box::new(3))
}

#[test]
fn the_crates_own_vec_macro_runs_in_annotated_code() {
    let before = calls();
    let p = plain();
    assert_eq!(calls() - before, 3);
    let before = calls();
    let a = annotated();
    assert_eq!(calls() - before, 3, "the crate's own `vec!` was replaced");
    assert_eq!(p, a);
}
