// A site whose value is discarded keeps std's `#[must_use]` diagnostics, word for word: the
// same errors as the unannotated `plain` below.
#![deny(unused_must_use)]

#[specalloc::specialize]
fn annotated() {
    Box::new(5u8);
    Vec::<u8>::with_capacity(8);
    "x".to_string();
}

fn plain() {
    Box::new(5u8);
    Vec::<u8>::with_capacity(8);
    "x".to_string();
}

fn main() {
    annotated();
    plain();
}
