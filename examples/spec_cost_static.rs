//! binary-trees, plain or annotated, with a hand-written `#[global_allocator]` of `SpecAlloc`
//! (not installed: what a program gets from a library that annotates its code), see
//! `common/spec_cost.rs`.

#[path = "common/spec_cost.rs"]
mod body;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

fn main() {
    body::main("hand-written static");
}
