//! binary-trees, plain or annotated, with the system allocator (not installed), see
//! `common/spec_cost.rs`.

#[path = "common/spec_cost.rs"]
mod body;

fn main() {
    body::main("System");
}
