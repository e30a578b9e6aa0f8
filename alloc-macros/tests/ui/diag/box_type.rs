// Issue 29, item 3: a boxed value of the wrong type (see tests/ui.rs).
specalloc::install!(static GLOBAL);

#[specalloc::specialize]
fn boxed() -> Box<u8> {
    let b: Box<u8> = Box::new("x");
    b
}

fn main() {
    boxed();
}
