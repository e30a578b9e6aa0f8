// `vec!{…}` as a statement without `;` is an error in std (its value is not `()`), annotated
// too.
specalloc::install!(static GLOBAL);

#[specalloc::specialize]
fn g() -> Vec<u8> {
    let s = String::from("rewritten");
    vec! {1u8, 2}
    vec! {0u8; 4}
    let _ = s;
    Vec::new()
}

fn main() {
    g();
}
