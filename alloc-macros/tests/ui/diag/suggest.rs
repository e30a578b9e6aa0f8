// Issue 22, item 4: a suggestion on a rewritten call covers the whole call, as without the
// attribute (`Box::new(5).to_string()`).
specalloc::install!(static GLOBAL);

#[specalloc::specialize]
fn f() -> String {
    Box::new(5)
}

fn main() {
    f();
}
