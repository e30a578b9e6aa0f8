// `#[specialize = "x"]` is one clear error.
#[specalloc::specialize = "x"]
fn f() -> Box<u8> {
    Box::new(1)
}

fn main() {
    f();
}
