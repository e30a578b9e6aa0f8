// Issue 29, item 3: elements of the wrong type in `vec![a, b]` (see tests/ui.rs).
specalloc::install!(static GLOBAL);

#[specalloc::specialize]
fn bytes() -> Vec<u8> {
    let v: Vec<u8> = vec!["a", "b"];
    v
}

fn main() {
    bytes();
}
