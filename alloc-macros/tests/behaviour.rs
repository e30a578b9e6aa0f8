//! Annotated code gives the same results as unannotated code: every function below is
//! compiled twice, as written (`plain`) and under `#[specialize]` (`special`), and the tests
//! compare the two. Run with and without the opt-out switch:
//!
//! ```sh
//! cargo test -p specalloc-macros --test behaviour
//! cargo test -p specalloc-macros --test behaviour --features no-size-specialized
//! ```
// The functions are written the way user code is, allocation sites and all, not the way clippy
// would have them; `Box::new_zeroed` (Rust 1.92) is exercised although the MSRV is older.
#![allow(
    clippy::type_complexity,
    clippy::to_string_in_format_args,
    clippy::vec_init_then_push,
    clippy::incompatible_msrv,
    clippy::vec_box,
    clippy::zero_repeat_side_effects
)]

use std::cell::Cell;
use std::fmt::Debug;

use specalloc::specialize;

specalloc::install!(static GLOBAL);

/// Compiles the functions twice: in `plain` as they are, in `special` under `#[specialize]`.
macro_rules! both {
    ($($body:tt)*) => {
        #[allow(dead_code)]
        mod plain {
            use super::*;
            $($body)*
        }
        #[allow(dead_code)]
        #[specialize]
        mod special {
            use super::*;
            $($body)*
        }
    };
}

thread_local! {
    static EVALS: Cell<usize> = const { Cell::new(0) };
    static CLONES: Cell<usize> = const { Cell::new(0) };
    static DROPS: Cell<usize> = const { Cell::new(0) };
    /// The clone that panics (0: none).
    static PANIC_AT: Cell<usize> = const { Cell::new(0) };
}

fn bump(c: &'static std::thread::LocalKey<Cell<usize>>) -> usize {
    c.with(|c| {
        c.set(c.get() + 1);
        c.get()
    })
}

/// Counts its evaluations, clones and drops.
#[derive(Debug, PartialEq)]
pub struct Tracked(u32);

impl Tracked {
    fn new(v: u32) -> Tracked {
        bump(&EVALS);
        Tracked(v)
    }
}

impl Clone for Tracked {
    fn clone(&self) -> Tracked {
        let n = bump(&CLONES);
        if PANIC_AT.with(Cell::get) == n {
            panic!("clone {n}");
        }
        Tracked(self.0)
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        bump(&DROPS);
    }
}

/// (evaluations, clones, drops) since the last call.
fn counts() -> (usize, usize, usize) {
    let take = |c: &'static std::thread::LocalKey<Cell<usize>>| c.with(|c| c.replace(0));
    (take(&EVALS), take(&CLONES), take(&DROPS))
}

pub trait Shape: Debug {
    fn area(&self) -> u64;
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rect(u64, u64);

impl Shape for Rect {
    fn area(&self) -> u64 {
        self.0 * self.1
    }
}

#[repr(align(128))]
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aligned(u64);

pub const LEN: usize = 7;
pub const BIG: usize = 5000;

both! {
    pub fn boxes(x: u64) -> (Box<u64>, Box<[u8; 100]>, Box<String>, Box<dyn Shape>, Box<Aligned>) {
        let f: Box<dyn Fn(u64) -> u64> = Box::new(move |y| x + y);
        (
            Box::new(f(1)),
            Box::new([x as u8; 100]),
            Box::new(format!("{x}")),
            Box::new(Rect(x, 2)),
            Box::new(Aligned(x)),
        )
    }

    pub fn uninit_and_zeroed() -> ([u64; 5], [u8; 33], u16) {
        let mut u = Box::<[u64; 5]>::new_uninit();
        u.write([1, 2, 3, 4, 5]);
        let z = Box::<[u8; 33]>::new_zeroed();
        let mut w = Box::new_uninit();
        w.write(9u16);
        // SAFETY: written above; all-zero is a valid `[u8; 33]`.
        unsafe { (*u.assume_init(), *z.assume_init(), *w.assume_init()) }
    }

    pub fn vecs(seed: u32) -> (Vec<u32>, Vec<String>, Vec<u8>, Vec<f64>, Vec<Box<u32>>, Vec<Aligned>) {
        (
            vec![seed; LEN],
            vec![seed.to_string(); 3],
            vec![0; 1000],
            vec![0.0; BIG],
            (0..seed).map(Box::new).collect(),
            vec![Aligned(1), Aligned(2)],
        )
    }

    pub fn vec_lists() -> (Vec<u8>, Vec<&'static str>, Vec<Box<dyn Shape>>, Vec<()>) {
        (
            vec![1, 2, 3],
            vec!["a", "b"],
            vec![Box::new(Rect(1, 2)), Box::new(Rect(3, 4))],
            vec![(); 3],
        )
    }

    pub fn strings() -> (String, String, String, String, String, String) {
        let mut cap = String::with_capacity(64);
        cap.push_str("pushed");
        (
            String::from("héllo"),
            "to_string".to_string(),
            "to_owned".to_owned(),
            String::from(""),
            cap,
            format!("{}/{}", "a".to_string(), String::from("b")),
        )
    }

    pub fn capacities() -> (Vec<u64>, String, Vec<u8>) {
        let mut v = Vec::with_capacity(10);
        v.extend(0..20u64);
        let mut s = String::with_capacity(3);
        s.push_str("grows past its capacity");
        let mut z = Vec::<u8>::with_capacity(0);
        z.push(1);
        (v, s, z)
    }

    pub fn elem(n0: u32) -> [usize; 4] {
        let a = vec![Tracked::new(n0); 0];
        let b = vec![Tracked::new(n0); 1];
        let c = vec![Tracked::new(n0); 5];
        let d = vec![Tracked::new(n0); LEN];
        [a.len(), b.len(), c.len(), d.len()]
    }

    pub fn elem_runtime(n: usize) -> usize {
        vec![Tracked::new(1); n].len()
    }

    pub fn elem_panics() -> usize {
        vec![Tracked::new(1); 6].len()
    }

    pub fn in_closures_and_macros(n: u32) -> (Vec<Box<u32>>, String) {
        let mk = |x: u32| Box::new(x + n);
        let v: Vec<Box<u32>> = [1, 2, 3].into_iter().map(mk).collect();
        assert_eq!(vec![1, 2], [1, 2], "{}", String::from("in a macro"));
        (v, format!("{:?}", Box::new(vec![n; 2])))
    }
}

#[test]
fn boxes_match() {
    let (p, s) = (plain::boxes(21), special::boxes(21));
    assert_eq!((&p.0, &p.1, &p.2, &p.4), (&s.0, &s.1, &s.2, &s.4));
    assert_eq!(format!("{:?}", p.3), format!("{:?}", s.3));
    assert_eq!(p.3.area(), s.3.area());
    assert_eq!(&*s.4 as *const Aligned as usize % 128, 0);
}

#[test]
fn uninit_and_zeroed_match() {
    assert_eq!(plain::uninit_and_zeroed(), special::uninit_and_zeroed());
}

#[test]
fn vecs_match() {
    assert_eq!(plain::vecs(4), special::vecs(4));
    let (p, s) = (plain::vec_lists(), special::vec_lists());
    assert_eq!((&p.0, &p.1, &p.3), (&s.0, &s.1, &s.3));
    assert_eq!(format!("{:?}", p.2), format!("{:?}", s.2));
}

#[test]
fn strings_match() {
    assert_eq!(plain::strings(), special::strings());
}

#[test]
fn capacities_at_least_as_asked() {
    let (p, s) = (plain::capacities(), special::capacities());
    assert_eq!(p, s);
    assert!(s.0.capacity() >= 20 && s.1.capacity() >= s.1.len() && s.2.capacity() >= 1);
    // The specialised vectors start with at least what was asked (a whole size class).
    assert!(specalloc::spec::vec_with_capacity::<u64, 10>().capacity() >= 10);
}

#[test]
fn vec_elem_semantics_match() {
    counts();
    let p = plain::elem(3);
    let pc = counts();
    let s = special::elem(3);
    let sc = counts();
    assert_eq!(p, s);
    assert_eq!(p, [0, 1, 5, LEN]);
    // Each element expression evaluated once, cloned n - 1 times; everything dropped (the
    // element of `vec![e; 0]` right away).
    assert_eq!(pc, (4, 4 + (LEN - 1), 1 + 1 + 5 + LEN));
    assert_eq!(pc, sc);
    for n in [0, 1, 9] {
        plain::elem_runtime(n);
        let pc = counts();
        special::elem_runtime(n);
        assert_eq!(pc, counts());
    }
}

#[test]
fn vec_elem_panicking_clone_drops_the_same() {
    let run = |f: fn() -> usize| {
        counts();
        PANIC_AT.with(|p| p.set(3));
        let r = std::panic::catch_unwind(f);
        PANIC_AT.with(|p| p.set(0));
        assert!(r.is_err());
        counts()
    };
    let p = run(plain::elem_panics);
    let s = run(special::elem_panics);
    // One evaluation, three clones (the third panics), and the two clones made plus the
    // original dropped on unwinding.
    assert_eq!(p, (1, 3, 3));
    assert_eq!(p, s);
}

#[test]
fn closures_and_macros_match() {
    assert_eq!(
        plain::in_closures_and_macros(5),
        special::in_closures_and_macros(5)
    );
}

/// A module of its own, since `both!` names its modules `plain` and `special` (which import
/// nothing from it).
#[allow(unused_imports)]
mod names {
    use super::*;

    both! {
    /// The user's own `from_elem` and `put`, the names of the local functions the rewrite of
    /// `vec![e; N]` and `vec![a, b, c]` emits.
    fn from_elem(x: u8) -> u8 {
        x * 2
    }

    fn put(x: u8) -> u8 {
        x + 1
    }

    pub fn user_names() -> (Vec<u8>, Vec<u8>) {
        (vec![from_elem(2); 3], vec![put(1), put(from_elem(3))])
    }
    }

    #[test]
    fn elements_name_the_users_functions() {
        assert_eq!(plain::user_names(), (vec![4, 4, 4], vec![2, 7]));
        assert_eq!(special::user_names(), plain::user_names());
    }
}
