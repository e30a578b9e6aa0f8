//! Without specalloc as the global allocator, a size-specialised entry point panics with the fix
//! instead of handing `Box` a block that the other allocator would free (this test binary keeps
//! the system allocator).

#[test]
#[cfg_attr(
    not(feature = "no-size-specialized"),
    should_panic(expected = "specalloc is not the global allocator")
)]
fn specialised_box_without_global_allocator_panics() {
    let b = specalloc::spec::boxed([1u64, 2, 3]);
    // Reached only with the opt-out switch, which goes through the global allocator.
    assert_eq!(b.iter().sum::<u64>(), 6);
}

#[test]
fn generic_path_still_works_without_global_allocator() {
    // The runtime's own generic entry points are fine to call directly: their blocks go back
    // to the runtime through `dealloc`, never through the global allocator.
    let layout = std::alloc::Layout::new::<[u64; 3]>();
    let p = specalloc::alloc(layout);
    assert!(!p.is_null());
    // SAFETY: allocated just above with `layout`.
    unsafe { specalloc::dealloc(p, layout) };
}
