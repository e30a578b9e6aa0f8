// Issue 29, item 3: `vec![e; N]` of an element that is not `Clone` (see tests/ui.rs).
specalloc::install!(static GLOBAL);

struct NotClone;

#[specalloc::specialize]
fn repeated() -> Vec<NotClone> {
    vec![NotClone; 3]
}

fn main() {
    repeated();
}
