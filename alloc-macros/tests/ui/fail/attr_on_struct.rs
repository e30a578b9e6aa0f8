// The attribute on a struct: an error on `struct`, and the struct is still emitted, so its uses
// below raise no follow-on error.
use specalloc::specialize;

#[specialize]
struct Node(Box<u8>);

fn main() {
    let n = Node(Box::new(1));
    assert_eq!(*n.0, 1);
}
