// A `no_std`-style module using `alloc`'s imports: every `vec!`, `to_string()` and
// `to_owned()` is rewritten, and the imports stay used (`deny(unused_imports)`); a local
// `macro_rules! vec` is respected; the program does not install specalloc (a library's
// test), and runs through the global allocator.
#![deny(warnings, unused_imports)]

extern crate alloc;

#[specalloc::specialize]
mod lib {
    use alloc::borrow::ToOwned;
    use alloc::string::{String, ToString};
    use alloc::vec;
    use alloc::vec::Vec;

    pub fn make() -> (Vec<u8>, Vec<u8>, String, String) {
        (vec![1, 2, 3], vec![7; 4], "ab".to_string(), "cd".to_owned())
    }
}

#[specalloc::specialize]
mod local_vec {
    macro_rules! vec {
        ($($t:tt)*) => {
            42
        };
    }

    pub fn f() -> i32 {
        vec![1, 2]
    }
}

fn main() {
    let (a, b, c, d) = lib::make();
    assert_eq!((a, b, c, d), (vec![1, 2, 3], vec![7; 4], "ab".into(), "cd".into()));
    assert_eq!(local_vec::f(), 42);
    assert!(!specalloc::spec::installed());
}
