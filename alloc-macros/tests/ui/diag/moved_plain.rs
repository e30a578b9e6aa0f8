// Issue 29, item 3: a use after move in `vec!`'s elements reads as without the attribute (see
// tests/ui.rs): no suggestion about a function the user never wrote.
specalloc::install!(static GLOBAL);

// (plain: the same code without the attribute)
fn twice() -> Vec<String> {
    let s = String::new();
    vec![s, s]
}

fn main() {
    twice();
}
