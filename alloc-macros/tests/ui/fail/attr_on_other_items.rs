// The attribute on items it cannot rewrite: each error is on the item's keyword (or, for a
// method without a body, on the method), and every item is still emitted.
use specalloc::specialize;

#[specialize]
enum E {
    A,
}

#[specialize]
const C: u8 = 1;

#[specialize]
use std::vec::Vec as V;

trait T {
    #[specialize]
    fn declared(&self) -> Box<u8>;
}

fn main() {
    let _ = (E::A, C, V::<u8>::new());
}
