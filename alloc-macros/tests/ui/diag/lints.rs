// Issue 22, item 4: rustc lints fire as without the attribute.
#![deny(unused_allocation, unreachable_code)]
specalloc::install!(static GLOBAL);

#[specalloc::specialize]
fn f() -> usize {
    Box::new([1u8, 2]).len()
}

#[specalloc::specialize]
fn g() -> Vec<u32> {
    vec![1, todo!(), 3]
}

fn main() {
    f();
    g();
}
