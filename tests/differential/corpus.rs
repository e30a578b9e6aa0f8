//! The differential corpus of `tests/differential.rs` (installed) and
//! `tests/differential_not_installed.rs` (a counting wrapper around the system allocator):
//! `corpus!(name)` or `corpus!(name, attribute)` defines a module whose `run()` returns the
//! transcript. The including file provides `panic_text`, `BUF_LEN`, `FRAMES_COMPARED` (whether
//! the build is unoptimised, where frame sizes are compared), `allocs()` (allocations so
//! far on this thread, or 0 where nothing counts them) and `zeroed_allocs()`.

/// `corpus_bind!(NAME = expr)`: `let NAME = expr;`, a local the corpus's tokens do not show.
#[macro_export]
macro_rules! corpus_bind {
    ($name:ident = $e:expr) => {
        let $name = $e;
    };
}

#[macro_export]
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

            #[derive(Debug, Clone, Default)]
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

            /// Issue 29: a const generic parameter as a capacity.
            fn capacity_of<const N: usize>() -> (usize, usize) {
                (String::with_capacity(N).capacity(), Vec::<u16>::with_capacity(N).capacity())
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

            /// Issue 22: `?` in an element of `vec![a, b, c]` (std allocates first).
            pub fn early(x: Option<u32>) -> Option<Vec<u32>> {
                Some(vec![1, x?, 3])
            }

            fn boom() -> Tracked {
                panic!("element 2 panics")
            }

            /// Issue 22: an element that panics after one was built.
            pub fn panicking_element() -> Vec<Tracked> {
                vec![Tracked(1), boom(), Tracked(3)]
            }

            /// Issue 22: the allocation counter read inside the elements.
            fn counter_inside() -> Vec<usize> {
                vec![allocs(), allocs()]
            }

            const HUGE: usize = 256 << 20;

            /// Issue 22: a large zero-filled vector takes zeroed memory, as std's does.
            pub fn huge_zero() -> Vec<u8> {
                vec![0u8; HUGE]
            }

            /// Issue 22: a 1 MiB element on a 2 MiB stack (issue 29: and two of 512 KiB; in a
            /// debug build too, `alloc-macros/tests/cargo_fixtures.rs`).
            fn big_element_on_small_stack() -> ((usize, u8), (usize, u8)) {
                let t = std::thread::Builder::new().stack_size(2 << 20);
                let one = t.spawn(|| {
                    let v = vec![[1u8; 1 << 20]];
                    (v.len(), v[0][4321])
                });
                let one = one.unwrap().join().unwrap();
                let t = std::thread::Builder::new().stack_size(2 << 20);
                let two = t.spawn(|| {
                    let w = vec![[1u8; 1 << 19], [2u8; 1 << 19]];
                    (w.len(), w[1][4321])
                });
                (one, two.unwrap().join().unwrap())
            }

            /// Issue 22, item 7: `Box::<T>::default()` allocates first, then runs
            /// `T::default()`, which sees the block in the allocation counter.
            #[derive(Debug)]
            pub struct SeesCounter(usize);

            impl Default for SeesCounter {
                fn default() -> Self {
                    SeesCounter(allocs())
                }
            }

            #[derive(Debug)]
            struct PanicsInDefault;

            impl Default for PanicsInDefault {
                fn default() -> Self {
                    panic!("default panics")
                }
            }

            /// A `Default` of the program's own for a boxed trait object (std's `Box::default`
            /// is then this impl).
            impl Default for Box<dyn Shape> {
                fn default() -> Self {
                    Box::new(Rect { w: 1.0, h: 4.0 })
                }
            }

            fn generic_default<T: Default>() -> Box<T> {
                Box::<T>::default()
            }

            fn unbounded_default<T: ?Sized>() -> Box<T>
            where
                Box<T>: Default,
            {
                Box::<T>::default()
            }

            /// Issue 22, item 7: the reach forms, each with the allocations it made (the
            /// results go through `black_box`: an optimised build may leave out an allocation
            /// whose block nothing reads, plain code's as well).
            fn reach(out: &mut Vec<String>) {
                use std::hint::black_box;
                let before = allocs();
                let b = black_box(Box::<SeesCounter>::default());
                line(out, "Box::<T>::default() order", (b.0 - before, allocs() - before));
                let before = allocs();
                let d = black_box((Box::<u64>::default(), Box::<[u16; 12]>::default(), Box::<String>::default()));
                line(out, "Box::<T>::default() values", (&d, allocs() - before));
                let before = allocs();
                let u = black_box((Box::<str>::default(), Box::<[u8]>::default(), Box::<()>::default()));
                line(out, "Box::<unsized>::default()", (&u, allocs() - before));
                let before = allocs();
                let own = black_box(Box::<dyn Shape>::default());
                line(out, "Box::<dyn Shape>::default()", (own.area(), allocs() - before));
                let before = allocs();
                let g = black_box((generic_default::<(u8, u32)>(), unbounded_default::<u32>(), unbounded_default::<str>()));
                line(out, "generic Box::<T>::default()", (&g, allocs() - before));
                let drops = counts().1;
                line(out, "Box::<T>::default() panicking", (panic_text(|| Box::<PanicsInDefault>::default()), counts().1 - drops));
                let before = allocs();
                let s = black_box(Box::<[u32]>::from([1, 2, 3]));
                let t = black_box(Box::<[Tracked]>::from([Tracked(1), Tracked(2)]));
                let z = black_box(Box::<[u8]>::from([0u8; 0]));
                line(out, "Box::<[T]>::from([..])", (&s, &t, &z, allocs() - before));
                let before = allocs();
                let a = black_box(Box::<[u8; 4]>::from([9; 4]));
                let big = black_box(Box::<[u64]>::from([5u64; 5000]));
                line(out, "Box::<[T; N]>::from([..])", (&a, big.len(), big[4999], allocs() - before));
                let before = allocs();
                let bs = black_box((Box::<str>::from("boxed str"), Box::<str>::from("")));
                line(out, "Box::<str>::from(\"..\")", (&bs, bs.0.len(), allocs() - before));
                // Left alone: std picks the impl from the type expected.
                let before = allocs();
                let slice: Box<[u8]> = black_box(Box::from([1, 2]));
                let array: Box<[u8; 2]> = black_box(Box::from([3, 4]));
                let text: Box<str> = black_box(Box::from("text"));
                let error: Box<dyn std::error::Error> = black_box(Box::from("an error"));
                let inferred: Box<Rect> = black_box(Box::default());
                let made = allocs() - before;
                line(out, "Box::from and Box::default() left alone", (&slice, &array, &text, error.to_string(), inferred, made));
            }

            /// Issue 29: attributes on sites and elements keep their meaning (a `cfg`'d-out
            /// element vanishes, unevaluated and uncounted, as with std).
            #[rustfmt::skip]
            fn attributes(out: &mut Vec<String>) {
                let before = allocs();
                let t = (1, #[cfg(any())] Box::new(5), 2);
                line(out, "cfg'd-out tuple element", (t, allocs() - before));
                let before = allocs();
                let a = [Box::new(1), #[cfg(any())] Box::new(2)];
                line(out, "cfg'd-out array element", (&a, allocs() - before));
                let before = allocs();
                let v = vec![String::from("a"), #[cfg(any())] String::from("b")];
                line(out, "cfg'd-out vec! element", (&v, v.capacity(), allocs() - before));
                let before = allocs();
                let l = vec![1, #[cfg(any())] 2, 3];
                line(out, "vec![1, cfg'd-out 2, 3]", (&l, l.capacity(), allocs() - before));
                let before = allocs();
                #[cfg(any())]
                Vec::<u8>::with_capacity(4);
                #[cfg(any())]
                let _gone = "x".to_string();
                line(out, "cfg'd-out statements", allocs() - before);
                let before = allocs();
                let kept = (#[cfg(all())] Box::new(7u8), #[allow(unused_parens)] (String::from("kept")));
                let called = Some(#[cfg(all())] vec![Box::new(1u8), #[cfg(any())] Box::new(2u8)]);
                line(out, "attributes that keep their site", (&kept, &called, allocs() - before));
            }

            /// Issue 29: a `use` or item inside the annotated code that shadows `Box` or `vec!`.
            mod shadow {
                pub struct Box<T>(pub T, pub &'static str);
                impl<T> Box<T> {
                    pub fn new(x: T) -> Self {
                        Box(x, "the module's own Box")
                    }
                }
            }

            fn shadowed() -> (u8, &'static str, usize, Vec<u8>, &'static str) {
                use self::shadow::Box;
                let b = Box::new(7u8);
                // (A `macro_rules! vec` of the code's own: `tests/user_vec_macro.rs`.)
                let n = [1, 2, 3].len();
                let shown = {
                    macro_rules! format {
                        ($a:expr, $b:expr) => { stringify!($b) };
                    }
                    format!("{}", String::from("shown"))
                };
                (b.0, b.1, n, std::vec![1, 2], shown)
            }

            async fn one() -> u8 {
                1
            }

            /// Polls a future that never waits (the corpus's own) to its end.
            fn ready<F: std::future::Future>(f: F) -> F::Output {
                let mut f = std::pin::pin!(f);
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                match f.as_mut().poll(&mut cx) {
                    std::task::Poll::Ready(v) => v,
                    std::task::Poll::Pending => unreachable!("the corpus's futures never wait"),
                }
            }

            /// Issue 29: a future is as large annotated as plain, whether a site awaits in its
            /// operands (left as written) or holds its result across an `.await`.
            fn futures(out: &mut Vec<String>) {
                use std::mem::size_of_val;
                let a = async { vec![one().await, one().await, one().await] };
                let b = async { Box::new(one().await) };
                let c = async { vec![[0u8; 256], [one().await; 256]] };
                let d = async {
                    let held = vec![1u8, 2];
                    let s = String::from("held");
                    (held, one().await, s)
                };
                let e = async {
                    let b = Box::new([7u8; 64]);
                    b.len() + one().await as usize
                };
                let f = async { drop((Box::<u64>::default(), one().await)) };
                let sizes = (size_of_val(&a), size_of_val(&b), size_of_val(&c), size_of_val(&d), size_of_val(&e), size_of_val(&f));
                line(out, "future sizes", sizes);
                ready(f);
                let c = ready(c);
                line(out, "futures' values", (ready(a), ready(b), c[1][255], ready(d), ready(e)));
            }

            #[allow(dead_code)]
            const HALF: usize = usize::MAX / 2;

            /// Issue 29: a capacity too large to allocate aborts in std's `String::with_capacity`,
            /// called from here (not called by `run`, it aborts the process: the debug-build
            /// run of the corpus, `alloc-macros/tests/cargo_fixtures.rs`, reads its backtrace).
            #[allow(dead_code)]
            pub fn huge_capacity() -> String {
                String::with_capacity(HALF)
            }

            /// Issue 29: likewise, a capacity overflow panics in std's `Vec::with_capacity`,
            /// called from here (not called by `run`).
            #[allow(dead_code)]
            pub fn overflowing_capacity() -> Vec<u64> {
                Vec::<u64>::with_capacity(usize::MAX)
            }

            /// Likewise `vec![x; n]` whose size overflows panics in std's `from_elem`, called
            /// from here (not called by `run`).
            #[allow(dead_code)]
            pub fn overflowing_elem() -> Vec<u64> {
                vec![7u64; UNITS]
            }

            /// Zero values of the types std knows (its `IsZero`) take zeroed memory in
            /// `vec![x; n]`, not only a literal `0` (the count of zeroed allocations is read by
            /// the not-installed test).
            fn zero_values(out: &mut Vec<String>) {
                const ZERO: u8 = 0;
                let (before, zeroed) = (allocs(), zeroed_allocs());
                let a = vec![false; 64];
                let b = vec![ZERO; 64];
                let c = vec![0.0f64; 64];
                let d = vec![None::<Box<u8>>; 64];
                let e = vec![[0u8; 4]; 64];
                let f = vec!['\0'; 64];
                let made = (allocs() - before, zeroed_allocs() - zeroed);
                line(out, "zero values", (a.len(), b[63], c[1], d[0].is_none(), e[2], f[3], made));
            }

            thread_local! {
                static DROP_ORDER: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
                static NOISY_CLONES: Cell<u32> = const { Cell::new(0) };
            }

            /// A value whose third clone panics, and which records the order of the drops.
            struct Noisy(u32);

            impl Clone for Noisy {
                fn clone(&self) -> Self {
                    let n = NOISY_CLONES.with(|c| { c.set(c.get() + 1); c.get() });
                    if n == 3 {
                        panic!("third clone");
                    }
                    Noisy(n)
                }
            }

            impl Drop for Noisy {
                fn drop(&mut self) {
                    DROP_ORDER.with(|d| d.borrow_mut().push(self.0));
                }
            }

            fn noisy_vec<T: Clone>(x: T) -> Vec<T> {
                vec![x; 5]
            }

            /// The drop order when a clone panics in `vec![v; n]`: std drops the original value
            /// first, then the clones made.
            fn clone_panics(out: &mut Vec<String>) {
                for generic in [false, true] {
                    NOISY_CLONES.with(|c| c.set(0));
                    DROP_ORDER.with(|d| d.borrow_mut().clear());
                    let text = if generic {
                        panic_text(|| noisy_vec(Noisy(0)))
                    } else {
                        panic_text(|| vec![Noisy(0); 5])
                    };
                    let order = DROP_ORDER.with(|d| d.borrow().clone());
                    line(out, "drop order of a panicking clone", (generic, text, order));
                }
            }

            const UNITS: usize = usize::MAX;

            unsafe extern "C" {
                safe static SPECALLOC_CORPUS_LEN: usize;
            }

            /// An extern static as a length (a const argument cannot read it).
            fn extern_static_len() -> (usize, usize) {
                (Vec::<u8>::with_capacity(SPECALLOC_CORPUS_LEN).capacity(), String::with_capacity(SPECALLOC_CORPUS_LEN).capacity())
            }

            /// An extern static declared outside the annotated module, as a length.
            fn outer_extern_static_len() -> (usize, usize, usize) {
                let v = Vec::<u8>::with_capacity(super::harness::SPECALLOC_OUTER_LEN);
                let s = String::with_capacity(super::harness::SPECALLOC_OUTER_LEN);
                let z = vec![0u8; super::harness::SPECALLOC_OUTER_LEN];
                (v.capacity(), s.capacity(), z.len())
            }

            /// A SCREAMING_CASE local that a macro binds, as a length: a local, not a const.
            #[allow(non_snake_case)]
            fn macro_bound_len(n: usize) -> (usize, usize, usize) {
                corpus_bind!(LEN = n * 2);
                (Vec::<u16>::with_capacity(LEN).capacity(), String::with_capacity(LEN).capacity(), vec![0u8; LEN].len())
            }

            /// Fn items and closures in `vec![a, b]`: the array finds their common type.
            fn one_u8() -> u8 {
                1
            }

            fn two_u8() -> u8 {
                2
            }

            fn common_types(out: &mut Vec<String>) {
                let fns = vec![one_u8, two_u8];
                let closures = vec![|| 3u8, || 4u8];
                let units = vec![(); UNITS];
                let values: Vec<u8> = fns.iter().map(|f| f()).chain(closures.iter().map(|f| f())).collect();
                line(out, "fn items and closures in vec!", (values, units.len()));
            }

            /// A type parameter named like a std type is the caller's type.
            fn type_param_named_string<String: From<&'static str>>() -> String {
                String::from("x")
            }

            /// `Box::pin` of a large value and `Box::new` as a value: no more stack than std's
            /// (in a debug build each goes through as many copies of the value as std's).
            fn big_values_on_small_stacks() -> (u8, u8) {
                let t = std::thread::Builder::new().stack_size(3 << 20);
                let pinned = t.spawn(|| {
                    let p = Box::pin([5u8; 1 << 20]);
                    p[4321]
                });
                let pinned = pinned.unwrap().join().unwrap();
                let t = std::thread::Builder::new().stack_size(13 << 19);
                let mapped = t.spawn(|| {
                    let b = Some([6u8; 1 << 20]).map(Box::new).unwrap();
                    b[4321]
                });
                (pinned, mapped.unwrap().join().unwrap())
            }

            /// A recursion whose every level makes owned strings and a default box: in a debug
            /// build each level's frame is no larger annotated than plain (2,000 levels on a
            /// 1 MiB thread stack).
            fn deep(depth: u32) -> usize {
                if depth == 0 {
                    return 0;
                }
                let s = String::from("level");
                let t = "level".to_string();
                let d = Box::<u64>::default();
                deep(depth - 1) + s.len() + t.len() + *d as usize
            }

            /// A recursion whose every level makes a vector and a string of constant
            /// capacity: the address of its vector at this level and at the deepest.
            #[inline(never)]
            fn capacity_levels(depth: u32) -> (usize, usize) {
                let v: Vec<u64> = Vec::with_capacity(4);
                let s = String::with_capacity(8);
                let here = std::hint::black_box(&v) as *const Vec<u64> as usize;
                let deepest = if depth == 0 { here } else { capacity_levels(depth - 1).1 };
                drop((v, s));
                (here, deepest)
            }

            /// The stack bytes one level of [`capacity_levels`] takes in an unoptimised build,
            /// where a rewritten site must make no frame larger (`FRAMES_COMPARED`, from the
            /// including file; an optimised build lays frames out as its inlining goes).
            fn capacity_frame() -> Option<usize> {
                let (top, deepest) = capacity_levels(1);
                FRAMES_COMPARED.then(|| top - deepest)
            }

            fn deep_on_small_stack() -> usize {
                let t = std::thread::Builder::new().stack_size(1 << 20);
                t.spawn(|| deep(2000)).unwrap().join().unwrap()
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

                // Issue 22: the divergences from std that a new trial found.
                // `?` and a panic in an element: the results and drops (std allocates first,
                // but an optimised plain build may drop an allocation nothing used: the counts
                // are checked against std's debug-build order in the not-installed test).
                line(&mut out, "vec![1, x?, 3] with None", early(None));
                line(&mut out, "vec![1, x?, 3] with Some", early(Some(2)));
                let drops = counts().1;
                let text = panic_text(panicking_element);
                line(&mut out, "panicking element", (text, counts().1 - drops));
                let before = allocs();
                let seen: Vec<usize> = counter_inside().iter().map(|a| a - before).collect();
                line(&mut out, "counter read inside vec![a, b]", seen);
                let (before, zeroed) = (allocs(), zeroed_allocs());
                let h = huge_zero();
                line(&mut out, "vec![0u8; 256 MiB]", (h.len(), h.capacity(), h[0], h[HUGE - 1], allocs() - before, zeroed_allocs() - zeroed));
                drop(h);
                line(&mut out, "vec![[1u8; 1 MiB]] on a 2 MiB stack", big_element_on_small_stack());
                reach(&mut out);
                line(&mut out, "const generic capacity", (capacity_of::<0>(), capacity_of::<24>(), capacity_of::<5000>()));
                attributes(&mut out);
                line(&mut out, "shadowed Box and vec!", shadowed());
                futures(&mut out);
                zero_values(&mut out);
                clone_panics(&mut out);
                common_types(&mut out);
                line(&mut out, "type parameter named String", type_param_named_string::<Box<str>>());
                line(&mut out, "extern static length", extern_static_len());
                line(&mut out, "outer extern static length", outer_extern_static_len());
                line(&mut out, "macro-bound SCREAMING_CASE length", macro_bound_len(5));
                line(&mut out, "2,000 levels of owned strings on a 1 MiB stack", deep_on_small_stack());
                line(&mut out, "stack per level with Vec/String::with_capacity (unoptimised)", capacity_frame());
                line(&mut out, "Box::pin and map(Box::new) of 1 MiB on small stacks", big_values_on_small_stacks());
                out
            }
        }
    };
}
