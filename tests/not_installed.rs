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

/// Issue 22: without the mark every entry point goes to the std code at once (the mark is
/// read first), with std's capacities; a large zeroed vector comes from `alloc_zeroed`.
#[test]
fn every_entry_point_does_what_std_does() {
    use specalloc::spec;
    assert!(!spec::installed());
    let v = spec::vec_for_array::<u16, 3>();
    assert_eq!((v.len(), v.capacity()), (0, 3));
    // SAFETY: all-zero bytes are a valid `u64`.
    let z = unsafe { spec::vec_zeroed::<u64, { 1 << 20 }>() };
    assert_eq!((z.len(), z.capacity(), z[12345]), (1 << 20, 1 << 20, 0));
    let s = spec::string_from::<5>("hello");
    assert_eq!((s.as_str(), s.capacity()), ("hello", 5));
    // SAFETY: zeroed just above.
    let b = unsafe { spec::zeroed::<[u32; 8]>().assume_init() };
    assert_eq!(*b, [0; 8]);
    let v = spec::vec_from_elem::<_, 4>(String::from("x"));
    assert_eq!((v.len(), v.capacity()), (4, 4));
}
