// Issue 22, item 4: an inference error reads as without the attribute.
specalloc::install!(static GLOBAL);

#[specalloc::specialize]
fn f() {
    let v = Vec::with_capacity(4);
    drop(v);
}

fn main() {
    f();
}
