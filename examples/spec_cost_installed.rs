//! binary-trees, plain or annotated, with `install!` (see `common/spec_cost.rs`).

#[path = "common/spec_cost.rs"]
mod body;

specalloc::install!(static GLOBAL);

fn main() {
    body::main("install!");
}
