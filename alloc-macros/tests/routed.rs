//! Proof that rewritten sites call the size-specialised routines: this binary keeps the system
//! allocator, and the routines (unlike the generic path) refuse to run without specalloc as
//! the global allocator. So the annotated function panics with the runtime's message, and the
//! same code unannotated does not. With `no-size-specialized`, both run normally.

use specalloc::specialize;

#[specialize]
fn annotated() -> Box<[u64; 3]> {
    Box::new([1, 2, 3])
}

fn unannotated() -> Box<[u64; 3]> {
    Box::new([1, 2, 3])
}

#[specialize]
fn annotated_vec() -> Vec<u32> {
    vec![1, 2, 3, 4, 5]
}

#[test]
#[cfg_attr(
    not(feature = "no-size-specialized"),
    should_panic(expected = "specalloc is not the global allocator")
)]
fn annotated_box_goes_through_a_routine() {
    assert_eq!(annotated().iter().sum::<u64>(), 6);
}

#[test]
#[cfg_attr(
    not(feature = "no-size-specialized"),
    should_panic(expected = "specalloc is not the global allocator")
)]
fn annotated_vec_goes_through_a_routine() {
    assert_eq!(annotated_vec().len(), 5);
}

#[test]
fn unannotated_box_does_not() {
    assert_eq!(unannotated().iter().sum::<u64>(), 6);
}
