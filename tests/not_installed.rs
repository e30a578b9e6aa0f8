//! Without `install!` (this test binary keeps the system allocator), the size-specialised
//! entry points do what std does, through the global allocator, instead of panicking or
//! handing `Box` a block that the other allocator would free.

#[test]
fn specialised_entry_points_use_the_global_allocator() {
    assert!(!specalloc::spec::installed());
    let b = specalloc::spec::boxed([1u64, 2, 3]);
    assert_eq!(b.iter().sum::<u64>(), 6);
    let v = specalloc::spec::vec_with_capacity::<u32, 5>();
    assert_eq!(v.capacity(), 5);
    // The routine itself refuses to hand out a block.
    assert!(
        !specalloc::spec::SIZE_SPECIALIZED || (specalloc::spec::One::<[u64; 3]>::PLAIN)().is_null()
    );
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
