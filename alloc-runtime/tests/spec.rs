//! The size-specialised entry points with the runtime installed by `install!`: right sizes and
//! alignments, exact capacities, blocks that the generic path frees and grows, `vec!`
//! semantics, sizes no routine serves (std's behaviour, panics included), and stats showing
//! the allocations went through the size classes the routines stand for.

use std::alloc::Layout;
use std::cell::Cell;
use std::mem::{align_of, size_of};
use std::rc::Rc;

use specalloc_runtime::size_class::class_of;
use specalloc_runtime::spec;

specalloc_runtime::install!(static GLOBAL);

#[test]
fn install_marks_the_global_allocator() {
    assert!(spec::installed());
}

fn check_box<T: Copy + PartialEq + std::fmt::Debug>(x: T) {
    let b = spec::boxed(x);
    assert_eq!(*b, x);
    assert_eq!(&*b as *const T as usize % align_of::<T>(), 0);
    let z = spec::zeroed::<T>();
    // SAFETY: reading the bytes of the zeroed block.
    let bytes = unsafe { std::slice::from_raw_parts(z.as_ptr() as *const u8, size_of::<T>()) };
    assert!(bytes.iter().all(|&b| b == 0), "zeroed {}", size_of::<T>());
    let mut u = spec::uninit::<T>();
    u.write(x);
    // SAFETY: written just above.
    assert_eq!(*unsafe { u.assume_init() }, x);
}

#[repr(align(64))]
#[derive(Clone, Copy, PartialEq, Debug)]
struct Align64([u8; 80]);

#[repr(align(16384))]
#[derive(Clone, Copy, PartialEq, Debug)]
struct Align16K(u64);

#[test]
fn boxes_of_every_kind() {
    check_box(1u8);
    check_box([7u8; 3]);
    check_box(5u32);
    check_box(9u64);
    check_box([1u8; 15]);
    check_box([2u64; 2]);
    check_box([3u64; 3]);
    check_box([4u8; 1000]);
    check_box([5u8; 32768]);
    check_box([6u8; 40000]); // large: global allocator's generic path
    check_box(Align64([9; 80]));
    check_box(Align16K(11));
    check_box(()); // zero-sized: no allocation
}

fn generic_box<T>(x: T) -> Box<T> {
    spec::boxed(x)
}

#[test]
fn generic_functions_and_trait_objects() {
    let a = generic_box(String::from("abc"));
    let b: Box<dyn std::fmt::Display> = generic_box(42u16);
    assert_eq!(*a, "abc");
    assert_eq!(b.to_string(), "42");
}

#[test]
fn the_generic_path_frees_and_grows_specialised_blocks() {
    // Dropped through the global allocator (Box's drop).
    for i in 0..1000u64 {
        drop(spec::boxed([i; 5]));
    }
    // Grown by realloc across classes and into large.
    let mut v = spec::vec_with_capacity::<u64, 3>();
    for i in 0..10_000u64 {
        v.push(i);
    }
    assert_eq!(v.iter().sum::<u64>(), 10_000 * 9_999 / 2);
    v.truncate(2);
    v.shrink_to_fit();
    assert_eq!(v, [0, 1]);
    // And the generic path's blocks can be freed through `dealloc` like the routines' ones.
    let layout = Layout::new::<[u64; 3]>();
    let p = (spec::One::<[u64; 3]>::PLAIN)();
    assert!(!p.is_null());
    // SAFETY: a block for `[u64; 3]`, freed once with its layout.
    unsafe { specalloc_runtime::dealloc(p, layout) };
}

#[test]
fn vectors_get_exactly_the_capacity_asked_for() {
    let v = spec::vec_with_capacity::<u32, 5>();
    assert_eq!(v.capacity(), 5);
    let v = spec::vec_with_capacity::<u64, 100>();
    assert_eq!(v.capacity(), 100);
    let s = spec::string_with_capacity::<100>();
    assert_eq!(s.capacity(), 100);
    let s = spec::string_from::<17>("seventeen chars!!");
    assert_eq!(s.capacity(), 17);
    let z = spec::vec_with_capacity::<(), 10>();
    assert_eq!(z.capacity(), usize::MAX);
    let v = spec::vec_from_elem::<u64, 7>(3);
    assert_eq!((v.len(), v.capacity()), (7, 7));
    // SAFETY: zero is a valid u64.
    let v = unsafe { spec::vec_zeroed::<u64, 9>() };
    assert_eq!((v.len(), v.capacity()), (9, 9));
}

#[test]
fn sizes_no_routine_serves_compile_and_behave_like_std() {
    // `[u64; usize::MAX]` has no size: the entry point compiles and panics like std.
    let r = std::panic::catch_unwind(spec::vec_with_capacity::<u64, { usize::MAX }>);
    let std_r = std::panic::catch_unwind(|| Vec::<u64>::with_capacity(usize::MAX));
    assert!(r.is_err() && std_r.is_err());
    let v = spec::vec_with_capacity::<u8, 100_000>();
    assert_eq!(v.capacity(), 100_000);
}

#[derive(Clone)]
struct Counted(Rc<Cell<usize>>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.set(self.0.get() + 1);
    }
}

#[test]
fn vec_from_elem_keeps_vec_macro_semantics() {
    let drops = Rc::new(Cell::new(0));
    let v = spec::vec_from_elem::<_, 4>(Counted(drops.clone()));
    assert_eq!(v.len(), 4);
    // Three clones and the original moved in: five strong references in all.
    assert_eq!(Rc::strong_count(&drops), 5);
    drop(v);
    assert_eq!(drops.get(), 4);
    let v = spec::vec_from_elem::<_, 0>(Counted(drops.clone()));
    assert!(v.is_empty());
    assert_eq!(drops.get(), 5, "the element is dropped when N == 0");
    assert_eq!(spec::vec_from_elem::<u8, 3>(7), std::vec![7u8; 3]);
    assert_eq!(spec::vec_from_array(["a", "b"]), ["a", "b"]);
    // SAFETY: zero is a valid u16.
    assert_eq!(unsafe { spec::vec_zeroed::<u16, 9>() }, [0u16; 9]);
    assert_eq!(spec::string_from::<4>("spec"), "spec");
}

#[test]
fn routines_are_chosen_at_compile_time() {
    const R24: Option<specalloc_runtime::routines::Routine> = spec::routine(24, 8, false);
    assert_eq!(
        R24.map(|f| f as usize),
        Some(
            specalloc_runtime::routines::small_sc3 as specalloc_runtime::routines::Routine as usize
        )
    );
    assert_eq!(
        spec::routine(5, 1, false).map(|f| f as usize),
        Some(
            specalloc_runtime::routines::tiny_size5 as specalloc_runtime::routines::Routine
                as usize
        )
    );
    // 3 bytes at alignment 8 is no type's layout, and the 3-byte routine's block (of the tiny
    // class) is only 4-aligned: the generic path takes it.
    assert!(spec::routine(3, 8, false).is_none());
    assert!(spec::routine(3, 4, false).is_some());
    assert!(spec::routine(40000, 8, false).is_none());
    if spec::SIZE_SPECIALIZED {
        assert_eq!(
            spec::One::<[u64; 3]>::PLAIN as usize,
            specalloc_runtime::routines::small_sc3 as specalloc_runtime::routines::Routine as usize
        );
    }
}

#[test]
fn specialised_allocations_are_counted_in_their_class() {
    // Class 59 (16 KiB) is used by no other test of this binary, but the test harness's own
    // buffers (output capture, a test thread's exit) may land in it now and then, so the
    // counts are at least ours.
    let c = class_of(16384, 8);
    let before = specalloc_runtime::stats().classes[c];
    let boxes: Vec<_> = (0..10).map(|_| spec::zeroed::<[u8; 16384]>()).collect();
    let during = specalloc_runtime::stats().classes[c];
    assert!(
        during.allocs - before.allocs >= 10,
        "{during:?} after {before:?}"
    );
    assert!(during.live_objects >= 10, "{during:?}");
    drop(boxes);
    let after = specalloc_runtime::stats().classes[c];
    assert!(
        after.frees - before.frees >= 10,
        "{after:?} after {before:?}"
    );
}
