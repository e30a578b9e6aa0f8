// The attribute on a `const fn`: an error on `const`; the function is still emitted and usable
// in a constant.
use specalloc::specialize;

#[specialize]
pub const fn size() -> usize {
    4
}

const N: usize = size();

fn main() {
    assert_eq!(N, 4);
}
