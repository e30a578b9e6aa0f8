//! Issue 15: the differential corpus. The same few hundred lines of ordinary code are compiled
//! three times, as written (`plain`), under `#[specialize]` (`special`) and under
//! `#[specialize(report)]` (`reported`), and must produce the same transcript byte for byte:
//! Debug and Display texts, panic messages (including `assert!`/`assert_eq!` texts, which show
//! the code), `capacity()` values, clone and drop counts. The binary installs specalloc with
//! `install!`, so the annotated copies run through the size-specialised routines; under
//! `--features no-size-specialized` (CI runs `--features checked,no-size-specialized`) they go
//! through the generic path, with the same transcript.

#![allow(clippy::vec_box)] // one allocation per box, on purpose

use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};

specalloc::install!();

/// Read under `unsafe` as a length (issue 15, case 8): a `static mut` is no const.
static mut BUF_LEN: usize = 48;

thread_local! {
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs `f`, returning its panic message (or "no panic").
fn panic_text<R>(f: impl FnOnce() -> R) -> String {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(move |info| {
            let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                s.to_string()
            } else if let Some(s) = info.payload().downcast_ref::<String>() {
                s.clone()
            } else {
                "<non-string payload>".to_string()
            };
            LAST_PANIC.with(|l| *l.borrow_mut() = msg);
        }));
    });
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(_) => "no panic".to_string(),
        Err(_) => LAST_PANIC.with(|l| l.borrow().clone()),
    }
}

macro_rules! corpus {
    ($name:ident $(, $attr:meta)?) => {
        $(#[$attr])?
        #[allow(clippy::all, unused_unsafe, static_mut_refs)]
        mod $name {
            use super::*;
            use std::collections::BTreeMap;
            use std::fmt;
            use std::rc::Rc;

            const SMALL: usize = 16;
            const TABLE: usize = 100;

            thread_local! {
                static CLONES: Cell<usize> = const { Cell::new(0) };
                static DROPS: Cell<usize> = const { Cell::new(0) };
            }

            #[derive(Debug, PartialEq)]
            pub struct Tracked(pub u32);

            impl Clone for Tracked {
                fn clone(&self) -> Self {
                    CLONES.with(|c| c.set(c.get() + 1));
                    Tracked(self.0)
                }
            }

            impl Drop for Tracked {
                fn drop(&mut self) {
                    DROPS.with(|d| d.set(d.get() + 1));
                }
            }

            fn counts() -> (usize, usize) {
                (CLONES.with(Cell::get), DROPS.with(Cell::get))
            }

            pub trait Shape: fmt::Debug {
                fn area(&self) -> f64;
            }

            #[derive(Debug, Clone)]
            struct Rect {
                w: f64,
                h: f64,
            }

            impl Shape for Rect {
                fn area(&self) -> f64 {
                    self.w * self.h
                }
            }

            #[derive(Debug)]
            enum Tree {
                Leaf(i64),
                Node(Box<Tree>, Box<Tree>),
            }

            fn build_tree(depth: u32, next: &mut i64) -> Tree {
                if depth == 0 {
                    *next += 1;
                    return Tree::Leaf(*next);
                }
                let l = build_tree(depth - 1, next);
                let r = build_tree(depth - 1, next);
                Tree::Node(Box::new(l), Box::new(r))
            }

            fn sum(t: &Tree) -> i64 {
                match t {
                    Tree::Leaf(v) => *v,
                    Tree::Node(l, r) => sum(l) + sum(r),
                }
            }

            fn shapes() -> Vec<Box<dyn Shape>> {
                let mut v: Vec<Box<dyn Shape>> = Vec::with_capacity(4);
                v.push(Box::new(Rect { w: 2.0, h: 3.0 }));
                v.push(Box::new(Rect { w: 1.5, h: 1.5 }));
                v
            }

            fn words(text: &str) -> BTreeMap<String, usize> {
                let mut m = BTreeMap::new();
                for w in text.split_whitespace() {
                    *m.entry(w.to_string()).or_insert(0) += 1;
                }
                m.insert("total".to_string(), text.split_whitespace().count());
                m
            }

            fn line(out: &mut Vec<String>, what: &str, v: impl fmt::Debug) {
                out.push(format!("{what}: {v:?}"));
            }

            fn generic_pair<T: Clone + fmt::Debug>(x: T) -> (Box<T>, Vec<T>) {
                (Box::new(x.clone()), vec![x; 3])
            }

            fn big(big: bool) -> usize {
                if big {
                    let v = Vec::<u64>::with_capacity(usize::MAX);
                    return v.capacity();
                }
                0
            }

            fn with_static_len() -> Vec<u8> {
                // SAFETY: `BUF_LEN` is never written, so reading it from any thread is fine.
                unsafe {
                    Vec::with_capacity(BUF_LEN)
                }
            }

            fn pinned() -> std::pin::Pin<Box<[u16; 4]>> {
                Box::pin([1, 2, 3, 4])
            }

            fn on_small_stack() -> u8 {
                let t = std::thread::Builder::new().stack_size(2 << 20);
                t.spawn(|| {
                    let b = Box::new([1u8; 1 << 20]);
                    b[4321]
                })
                .unwrap()
                .join()
                .unwrap()
            }

            pub fn run() -> Vec<String> {
                let mut out = Vec::new();

                // Strings and their capacities (case 5).
                let s = "seventeen chars!!".to_string();
                line(&mut out, "to_string", (&s, s.capacity()));
                let o = "owned".to_owned();
                line(&mut out, "to_owned", (&o, o.capacity()));
                let f = String::from("from a literal");
                line(&mut out, "String::from", (&f, f.capacity()));
                let mut w = String::with_capacity(100);
                w.push_str("abc");
                line(&mut out, "with_capacity(100)", (&w, w.capacity()));
                let e = String::from("");
                line(&mut out, "empty", (&e, e.capacity()));

                // Vectors (cases 5, 6).
                let mut buf: Vec<u8> = Vec::with_capacity(100);
                buf.resize(buf.capacity(), 0);
                line(&mut out, "resize to capacity", buf.len());
                let z = vec![0u64; SMALL];
                line(&mut out, "vec![0; SMALL]", (z.len(), z.capacity()));
                let x = 7u8;
                let b = vec![x; 4096];
                line(&mut out, "vec![x; 4096]", (b.len(), b.capacity(), b.iter().map(|&v| v as usize).sum::<usize>()));
                let y = 3u64;
                let c = vec![y; TABLE];
                line(&mut out, "vec![y; TABLE]", (c.len(), c.capacity(), c[99]));
                let l = vec![1u32, 2, 3];
                line(&mut out, "vec![a, b, c]", (&l, l.capacity()));
                let mut grow = vec![1i32; 5];
                grow.extend([6, 7, 8]);
                line(&mut out, "grown", (&grow, grow.capacity()));
                let mut nested = Vec::with_capacity(3);
                for i in 0..3 {
                    nested.push(vec![i; 2]);
                }
                line(&mut out, "nested", &nested);

                // Clone and drop counts of vec![x; N] (std: N - 1 clones, the original moved in).
                let before = counts();
                let t = vec![Tracked(9); 5];
                let mid = counts();
                drop(t);
                let after = counts();
                line(&mut out, "vec![Tracked; 5] clones", mid.0 - before.0);
                line(&mut out, "vec![Tracked; 5] drops", (mid.1 - before.1, after.1 - mid.1));
                let before = counts();
                let none = vec![Tracked(1); 0];
                line(&mut out, "vec![Tracked; 0]", (none.len(), counts().0 - before.0, counts().1 - before.1));
                let rc = Rc::new(5);
                let rcs = vec![rc.clone(); 4];
                line(&mut out, "Rc strong", (Rc::strong_count(&rc), rcs.len()));

                // Boxes, trait objects, recursion, generics.
                let mut next = 0;
                let tree = build_tree(4, &mut next);
                line(&mut out, "tree sum", sum(&tree));
                line(&mut out, "small tree", build_tree(1, &mut 0));
                let sh = shapes();
                line(&mut out, "shapes", (&sh, sh.iter().map(|s| s.area()).sum::<f64>()));
                line(&mut out, "generic u8", generic_pair(5u8));
                line(&mut out, "generic string", generic_pair(String::from("g")));
                let boxes: Vec<Box<u16>> = (1..4).map(Box::new).collect();
                line(&mut out, "map(Box::new)", &boxes);
                line(&mut out, "pinned", &*pinned());
                let mut u = Box::<u64>::new_uninit();
                u.write(11);
                // SAFETY: written just above.
                line(&mut out, "new_uninit", unsafe { u.assume_init() });
                let words = words("a b a c b a");
                line(&mut out, "words", &words);
                let closure = |n: u32| Box::new(n * 2);
                line(&mut out, "closure", closure(21));
                line(&mut out, "static mut length", with_static_len().capacity());
                line(&mut out, "1 MiB box on a 2 MiB stack", on_small_stack());

                // Panic texts (cases 4, 7).
                let one = Box::new(1);
                line(&mut out, "assert!", panic_text(|| assert!(one == Box::new(2))));
                line(&mut out, "assert_eq!", panic_text(|| assert_eq!(vec![1, 2], vec![1, 3], "lists differ")));
                line(&mut out, "assert_ne!", panic_text(|| assert_ne!("x".to_string(), "x".to_string())));
                line(&mut out, "debug_assert!", panic_text(|| debug_assert!(Box::new(0u8) == Box::new(1u8))));
                line(&mut out, "panic!", panic_text(|| panic!("formatted {:?}", vec![1u8; 3])));
                line(&mut out, "capacity overflow", panic_text(|| big(true)));
                line(&mut out, "no overflow", big(false));
                line(&mut out, "stringify", stringify!(Box::new(1), vec![0; 3]));
                line(&mut out, "concat", concat!("a", 1, "b"));
                let d = dbg!(Box::new(5u8));
                line(&mut out, "dbg returns", d);
                out
            }
        }
    };
}

corpus!(plain);
corpus!(special, specalloc::specialize);
corpus!(reported, specalloc::specialize(report));

#[test]
fn annotated_code_behaves_exactly_like_plain_code() {
    let plain = plain::run();
    let special = special::run();
    let reported = reported::run();
    for ((p, s), r) in plain.iter().zip(&special).zip(&reported) {
        assert_eq!(p, s);
        assert_eq!(p, r);
    }
    assert_eq!(plain.len(), special.len());
    assert_eq!(plain, reported);
    // The transcript says what std does.
    let find = |what: &str| {
        plain
            .iter()
            .find(|l| l.starts_with(what))
            .unwrap_or_else(|| panic!("no {what}"))
            .clone()
    };
    assert_eq!(find("to_string"), "to_string: (\"seventeen chars!!\", 17)");
    assert_eq!(
        find("with_capacity(100)"),
        "with_capacity(100): (\"abc\", 100)"
    );
    assert_eq!(find("resize to capacity"), "resize to capacity: 100");
    assert_eq!(
        find("vec![Tracked; 5] clones"),
        "vec![Tracked; 5] clones: 4"
    );
    assert_eq!(
        find("vec![Tracked; 5] drops"),
        "vec![Tracked; 5] drops: (0, 5)"
    );
    assert_eq!(find("vec![Tracked; 0]"), "vec![Tracked; 0]: (0, 0, 1)");
    assert_eq!(
        find("capacity overflow"),
        "capacity overflow: \"capacity overflow\""
    );
    assert!(find("assert!").contains("assertion failed: one == Box::new(2)"));
    assert_eq!(find("static mut length"), "static mut length: 48");
    // The annotated copies were rewritten (the reported one counted its sites).
    assert!(
        specalloc::sites().len() >= 20,
        "{}",
        specalloc::sites().len()
    );
}

#[test]
fn the_annotated_copies_use_the_routines_when_installed() {
    assert!(specalloc::spec::installed());
    drop(reported::run());
    let sites = specalloc::sites();
    let routed = sites
        .iter()
        .filter(|s| {
            matches!(
                s.route,
                specalloc::SiteRoute::Class(_) | specalloc::SiteRoute::Tiny
            )
        })
        .count();
    if specalloc::spec::SIZE_SPECIALIZED {
        assert!(routed >= 10, "{sites:#?}");
    } else {
        assert_eq!(routed, 0);
    }
}
