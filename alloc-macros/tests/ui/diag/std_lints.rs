// The lints std's forms draw, and no more: `unused_must_use` through parentheses and blocks,
// `unused_allocation` through parentheses, and no `unused_parens`/`unused_braces` from
// elements the attribute would re-emit.
#![deny(unused_must_use, unused_allocation, unused_parens, unused_braces)]
specalloc::install!(static GLOBAL);

#[specalloc::specialize]
fn f() -> usize {
    (Box::new(1u8));
    (Vec::<u8>::with_capacity(8));
    { Box::new(2u8) };
    unsafe { Box::new(3u8) };
    (vec![1u8, 2]);
    let a = vec![(0..44), (0..19)];
    let b = vec![("two"), ("five")];
    let c = vec![{ 5 }, 6];
    let s = String::from("rewritten");
    (Box::new([1u8, 2, 3])).len() + a.len() + b.len() + c.len() + s.len()
}

// An `#[expect]` of the lint is fulfilled, as without the attribute (else
// `unfulfilled_lint_expectations` would warn).
#[specalloc::specialize]
#[expect(unused_allocation)]
fn g() -> usize {
    (Box::new([4u8, 5])).len() + String::from("rewritten").len()
}

fn main() {
    f();
    g();
}
