//! A `macro_rules! vec` of the crate's own, defined at its root, where an annotated item
//! cannot see it being defined: `vec!` in the annotated code is still that macro, called with
//! the tokens written, as without the attribute (the attribute leaves every `vec!` to
//! whatever it names). Likewise a `vec!` defined inside the annotated item.

use std::cell::RefCell;

thread_local! {
    static CALLS: RefCell<Vec<&'static str>> = const { RefCell::new(Vec::new()) };
}

/// The crate's own `vec!`: records the tokens it is called with, then builds std's vector.
macro_rules! vec {
    ($($t:tt)*) => {{
        CALLS.with(|c| c.borrow_mut().push(stringify!($($t)*)));
        std::vec![$($t)*]
    }};
}

/// The calls of the crate's `vec!` so far, emptied.
fn calls() -> Vec<&'static str> {
    CALLS.with(|c| std::mem::take(&mut *c.borrow_mut()))
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
    calls();
    let p = plain();
    let plain_calls = calls();
    assert_eq!(plain_calls, ["0u8; LEN", "7u8; 4", "1u8, 2"]);
    let a = annotated();
    assert_eq!(calls(), plain_calls, "the crate's own `vec!` was replaced");
    assert_eq!(p, a);
}

#[specalloc::specialize]
fn local_macro() -> (usize, Box<u8>) {
    macro_rules! vec {
        ($($t:expr),*) => { [$($t),*].len() };
    }
    (vec![1, 2, 3], Box::new(4))
}

#[test]
fn a_vec_macro_of_the_annotated_item_is_its_own() {
    assert_eq!(*local_macro().1, 4);
    assert_eq!(local_macro().0, 3);
}
