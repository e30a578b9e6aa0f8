// An element that is not `Clone` in `vec![e; N]`: the error names the user-facing bound
// (`Clone`), not a runtime function.
struct NotClone;

#[specalloc::specialize]
fn f() -> Vec<NotClone> {
    vec![NotClone; 3]
}

fn main() {
    f();
}
