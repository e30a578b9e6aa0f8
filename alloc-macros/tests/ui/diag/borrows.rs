// Issue 22, item 4: borrow errors and their suggestions read as without the attribute.
specalloc::install!(static GLOBAL);

#[specalloc::specialize]
fn f() {
    let s: &str = String::from("abc").as_str();
    let v = vec![1u8, 2].as_slice();
    println!("{s} {v:?}");
}

fn main() {
    f();
}
