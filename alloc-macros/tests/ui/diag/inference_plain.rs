// Issue 22, item 4: an inference error reads as without the attribute.
specalloc::install!(static GLOBAL);

// (plain: the same code without the attribute)
fn f() {
    let v = Vec::with_capacity(4);
    drop(v);
}

fn main() {
    f();
}
