// One `#[specialize]` per item: a second one (here with other options) is an error, not a
// silent no-op.
#[specalloc::specialize]
#[specalloc::specialize(report)]
fn f() -> Box<u8> {
    Box::new(1)
}

fn main() {
    f();
}
