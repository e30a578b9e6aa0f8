//! The macros through the facade, with nothing but `specalloc` as a dependency: the re-exports
//! resolve, rewritten code gives the results the unannotated code gives, and (in CI's
//! `--features checked,no-size-specialized` run, or with `--features checked` alone) the
//! runtime's checked mode sees no wrong layout or double free from the specialised entry points.
//! The macros' own suite (expansion snapshots, trybuild, behaviour) is in `alloc-macros/tests`.

use specalloc::{alloc, specialize};

specalloc::install!(static GLOBAL);

const LEN: usize = 12;

trait Named: Send {
    fn name(&self) -> String;
}

struct Item(u32);

impl Named for Item {
    fn name(&self) -> String {
        format!("item{}", self.0)
    }
}

type Built = (Vec<Box<dyn Named>>, Vec<Vec<u64>>, Vec<String>, Vec<u8>);

#[specialize]
fn build(rounds: u32) -> Built {
    let mut named: Vec<Box<dyn Named>> = Vec::with_capacity(LEN);
    let mut vecs = Vec::with_capacity(4);
    let mut strings = Vec::with_capacity(LEN);
    for i in 0..rounds {
        named.push(Box::new(Item(i)));
        let mut v = vec![i as u64; LEN];
        v.extend([1, 2, 3]); // grows past the class capacity: realloc
        vecs.push(v);
        let mut s = "grown".to_string();
        s.push_str(&"x".repeat(i as usize));
        strings.push(s);
    }
    let mut zeros = vec![0u8; 40];
    zeros.truncate(10);
    zeros.shrink_to_fit(); // realloc down
    (named, vecs, strings, zeros)
}

#[test]
fn rewritten_code_matches_and_frees_cleanly() {
    for _ in 0..3 {
        let (named, vecs, strings, zeros) = build(50);
        assert_eq!(named[7].name(), "item7");
        assert_eq!(vecs[3].len(), LEN + 3);
        assert_eq!(vecs[3][..LEN], [3; LEN]);
        assert_eq!(strings[2], "grownxx");
        assert_eq!(zeros, [0; 10]);
        // Freed on another thread: the remote-free path.
        std::thread::spawn(move || drop((named, vecs, strings)))
            .join()
            .unwrap();
    }
}

#[test]
fn explicit_macro_through_the_facade() {
    let mut u = alloc!(uninit [u32; 6]);
    u.write([1; 6]);
    // SAFETY: written above.
    assert_eq!(unsafe { u.assume_init() }.iter().sum::<u32>(), 6);
    // SAFETY: all-zero is a valid `u128`.
    assert_eq!(unsafe { *alloc!(zeroed u128).assume_init() }, 0);
    let b: Box<dyn Named> = alloc!(box Item(4));
    assert_eq!(b.name(), "item4");
    assert_eq!(alloc!(vec [7u8; LEN]).len(), LEN);
}
