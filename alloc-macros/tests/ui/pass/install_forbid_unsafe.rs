// `install!` in a crate that forbids unsafe code (its own `unsafe` comes from the macro), with
// a named static; the mark is set before `main`, so the routines serve.
#![forbid(unsafe_code)]

specalloc::install!(static GLOBAL);

#[specalloc::specialize]
fn make() -> (Box<u64>, Vec<u8>) {
    (Box::new(7), vec![1; 40])
}

fn main() {
    assert!(specalloc::spec::installed());
    let (b, v) = make();
    assert_eq!((*b, v.len(), v.capacity()), (7, 40, 40));
}
