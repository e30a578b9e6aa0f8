// A type error in rewritten code points at the user's tokens, as it would without the
// attribute.
specalloc::install!(static GLOBAL);

#[specalloc::specialize]
fn f() -> Box<u8> {
    Box::new("not a u8")
}

#[specalloc::specialize]
fn g() -> Vec<u8> {
    vec!["a", "b"]
}

fn main() {
    f();
    g();
}
