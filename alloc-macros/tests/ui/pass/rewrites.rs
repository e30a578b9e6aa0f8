// Every form `#[specialize]` and `alloc!` must accept, in one crate (trybuild builds are slow):
// generic functions, trait objects through unsize coercion, closures, async, nested macros,
// lifetimes, zero-sized types, `Box::<T>::default()` and `Box::<…>::from`, types larger than
// the small classes, over-aligned types, `no_std`-style paths, impl blocks, traits, inline
// modules, const contexts left alone, a renamed dependency, and the per-site report. It compiles with `deny(warnings)` (no lint fires
// on generated code) and checks its results when run.
#![deny(warnings)]

extern crate alloc;

specalloc::install!(static GLOBAL);

use core::fmt::Debug;
use core::future::Future;
use core::pin::Pin;
use specalloc::{alloc, specialize};

// Generic functions.
#[specialize]
fn generic<T: Clone + Debug>(x: T) -> (Box<T>, Vec<T>, Vec<T>, Box<T>) {
    (
        Box::new(x.clone()),
        vec![x.clone(); 3],
        vec![x.clone(), x.clone()],
        Box::<T>::new(x),
    )
}

// Trait objects through unsize coercion.
trait Shape {
    fn area(&self) -> u32;
}
struct Sq(u32);
impl Shape for Sq {
    fn area(&self) -> u32 {
        self.0 * self.0
    }
}

#[specialize]
fn shapes() -> (Box<dyn Shape>, Vec<Box<dyn Shape>>, Box<dyn Fn(u32) -> u32>) {
    let a: Box<dyn Shape> = Box::new(Sq(2));
    let v: Vec<Box<dyn Shape>> = vec![Box::new(Sq(1)), Box::new(Sq(3))];
    let f: Box<dyn Fn(u32) -> u32> = Box::new(|x| x + 1);
    (a, v, f)
}

#[specialize]
fn returns_dyn(early: bool) -> Box<dyn Debug> {
    if early {
        return Box::new("early");
    }
    Box::new(1u8)
}

#[specialize]
fn dyn_in_struct() -> Option<Box<dyn Shape + Send>> {
    Some(Box::new(Sq(5)))
}

// Closures, `Box::new` as a value, and async blocks.
#[specialize]
fn closures() -> Vec<Box<u16>> {
    let mk = |x: u16| Box::new(x);
    let mut v: Vec<Box<u16>> = (1..=3).map(Box::new).collect();
    let add = move |v: &mut Vec<Box<u16>>| v.push(mk(7));
    add(&mut v);
    v.extend(Some(9).map(Box::<u16>::new));
    v
}

#[specialize]
async fn async_fn() -> Box<u64> {
    let inner = async { Box::new(40u64) };
    let b = inner.await;
    Box::new(*b + 2)
}

#[specialize]
fn pinned_future() -> Pin<Box<dyn Future<Output = u8>>> {
    Box::pin(async { 8 })
}

fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = core::pin::pin!(f);
    let mut cx = core::task::Context::from_waker(core::task::Waker::noop());
    loop {
        if let core::task::Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

// Nested macros: arguments that parse as expressions are rewritten, format strings are not.
#[specialize]
fn macros() -> String {
    let v = vec![1, 2];
    assert_eq!(vec![1, 2], v, "{}", String::from("same"));
    assert!(matches!(Box::new(3).as_ref(), 3));
    let s = format!(
        "{}-{:?}-{x}",
        "x".to_string(),
        Box::new(1),
        x = "y".to_owned()
    );
    debug_assert_eq!(s.len(), 5);
    let name = stringify!(Box::new(1));
    assert_eq!(name, "Box::new(1)");
    s
}

// Lifetimes.
#[specialize]
fn lifetimes<'a, 'b: 'a>(s: &'a str, t: &'b [u8]) -> (Box<&'a str>, Vec<&'a [u8]>) {
    (Box::new(s), vec![t; 2])
}

// Zero-sized types.
#[derive(Clone, Debug, Default, PartialEq)]
struct Zst;

#[specialize]
fn zsts() -> (Box<Zst>, Vec<Zst>, Vec<()>, Box<[u8; 0]>, Vec<u8>) {
    (
        Box::new(Zst),
        vec![Zst; 1000],
        vec![(), ()],
        Box::new([]),
        vec![1; 0],
    )
}

// Types larger than the small classes (over 32 KiB): the generic path.
#[specialize]
fn large() -> (Box<[u8; 40000]>, Vec<u64>, Box<[u64; 8192]>, String) {
    (
        Box::new([7; 40000]),
        vec![1u64; 10000],
        Box::new([0; 8192]),
        String::with_capacity(100_000),
    )
}

// Over-aligned types: within a class's alignment, and beyond (the generic path).
#[repr(align(64))]
#[derive(Clone, Copy, Debug, PartialEq)]
struct A64(u8);

#[repr(align(16384))]
#[derive(Clone, Copy, Debug, PartialEq)]
struct A16k(u8);

#[specialize]
fn over_aligned() -> (Box<A64>, Vec<A64>, Box<A16k>, Vec<A16k>) {
    (
        Box::new(A64(1)),
        vec![A64(2); 3],
        Box::new(A16k(3)),
        vec![A16k(4), A16k(5)],
    )
}

// `no_std`-style and absolute paths.
#[specialize]
fn paths() -> (
    alloc::boxed::Box<u8>,
    alloc::vec::Vec<u8>,
    alloc::string::String,
    alloc::vec::Vec<u8>,
    Box<u8>,
    Vec<u8>,
    String,
) {
    (
        alloc::boxed::Box::new(1),
        alloc::vec![1, 2],
        alloc::string::String::from("x"),
        alloc::vec::Vec::with_capacity(8),
        ::std::boxed::Box::new(2),
        ::std::vec![3; 2],
        std::string::String::with_capacity(4),
    )
}

// Uninitialised, zeroed and pinned boxes.
#[specialize]
fn uninit_forms() -> (u64, [u32; 8], u8) {
    let mut u = Box::<u64>::new_uninit();
    u.write(5);
    let z = Box::<[u32; 8]>::new_zeroed();
    let p = Box::pin(6u8);
    // SAFETY: written above; all-zero is a valid `[u32; 8]`.
    unsafe { (*u.assume_init(), *z.assume_init(), *p) }
}

// `Box::<T>::default()` (`T: Default`, or std's function for `str`, slices, a `Box<dyn Trait>`
// of the program's own `Default`, an unbounded type parameter) and `Box::<…>::from` of an array
// or a string literal with the type written; left alone where std picks its impl from the type
// expected.
impl Default for Box<dyn Shape> {
    fn default() -> Self {
        Box::new(Sq(6))
    }
}

#[specialize]
fn unbounded<U: ?Sized>() -> Box<U>
where
    Box<U>: Default,
{
    Box::<U>::default()
}

#[specialize]
fn reach<T: Default + Debug>() -> (String, Box<T>, usize) {
    let a = Box::<u64>::default();
    let b = Box::<[u32; 4]>::default();
    let c = Box::<str>::default();
    let d = Box::<[u8]>::default();
    let e = Box::<dyn Shape>::default();
    let f = Box::<Zst>::default();
    let g = Box::<[u16]>::from([1, 2, 3]);
    let h = Box::<[String; 2]>::from([String::from("x"), "y".to_string()]);
    let i = Box::<str>::from("boxed");
    let j = alloc::boxed::Box::<[u8]>::from([7; 40000]);
    let k: Box<[u8]> = Box::from([4, 5]);
    let l: Box<dyn std::error::Error> = Box::from("error");
    let m: Box<Sq> = Box::default();
    let text = format!(
        "{a} {b:?} {c:?} {d:?} {} {f:?} {g:?} {h:?} {i} {} {k:?} {l} {}",
        e.area(),
        j.len(),
        m.0
    );
    (text, Box::<T>::default(), j.len())
}

impl Default for Sq {
    fn default() -> Self {
        Sq(1)
    }
}

// Impl blocks with const generics: `N` is a const parameter, `Self::EXTRA` is left alone.
struct Ring<T, const N: usize> {
    buf: Vec<T>,
}

#[specialize]
impl<T: Clone + Default, const N: usize> Ring<T, N> {
    const EXTRA: usize = 2;

    fn new() -> Self {
        Ring {
            buf: vec![T::default(); N],
        }
    }

    fn spare(&self) -> Vec<T> {
        Vec::with_capacity(Self::EXTRA)
    }

    const fn cap() -> usize {
        N
    }
}

// The attribute on one method.
impl Sq {
    #[specialize]
    fn boxed(&self) -> Box<u32> {
        Box::new(self.0)
    }
}

// Traits: provided methods.
#[specialize]
trait Maker {
    fn make(&self) -> Box<u32> {
        Box::new(3)
    }
    fn label(&self) -> String;
}

impl Maker for Sq {
    fn label(&self) -> String {
        "sq".to_string()
    }
}

// Inline modules, nested ones included; const fns and consts inside are left alone.
#[specialize]
mod module {
    pub const CAP: usize = 64;

    pub fn m() -> Vec<String> {
        vec!["a".to_owned(); 2]
    }

    pub const fn c() -> u8 {
        1
    }

    pub mod inner {
        pub fn i() -> String {
            String::with_capacity(super::CAP)
        }
    }
}

// Const contexts are left alone; lengths from const items are specialised.
const LEN: usize = 4;

#[specialize]
fn consts() -> ([u8; LEN], Vec<u8>, usize, Vec<u8>) {
    const LOCAL: usize = 3;
    let a = [0u8; LEN];
    let v = vec![9u8; LOCAL];
    let n = const { LEN * 2 };
    let w = vec![0u8; LEN + 1];
    (a, v, n, w)
}

// A SCREAMING_CASE static is taken for a const item, which works: constants may read
// immutable statics.
static STATIC_LEN: usize = 5;

#[specialize]
fn static_len() -> Vec<u8> {
    vec![0; STATIC_LEN]
}

// A SCREAMING_CASE local is not a const item: left alone.
#[specialize]
#[allow(non_snake_case)]
fn shadowed(N: usize) -> (Vec<u8>, Vec<u8>) {
    let M = N + 1;
    (vec![0; N], Vec::with_capacity(M))
}

// Lengths known only at run time keep the generic path.
#[specialize]
fn runtime(n: usize) -> (Vec<u8>, Vec<u8>, String, String) {
    let s = "dyn";
    (
        vec![1; n],
        Vec::with_capacity(n),
        String::with_capacity(n),
        s.to_string(),
    )
}

// A renamed dependency: `crate = path`, and `alloc!` through an alias (`$crate`).
mod deps {
    pub use specalloc as sa;
}

#[specialize(crate = crate::deps::sa)]
fn renamed() -> Box<u8> {
    Box::new(1)
}

fn alloc_through_alias() -> Box<u8> {
    deps::sa::alloc!(box 2)
}

// The explicit macro.
fn explicit() {
    let mut u = alloc!(uninit [u64; 4]);
    u.write([1, 2, 3, 4]);
    // SAFETY: written above.
    assert_eq!(unsafe { u.assume_init() }.iter().sum::<u64>(), 10);
    let z = alloc!(zeroed [u32; 16]);
    // SAFETY: all-zero is a valid `[u32; 16]`.
    assert_eq!(unsafe { z.assume_init() }, Box::new([0u32; 16]));
    assert_eq!(*alloc!(box (1u8, 2u16)), (1, 2));
    let d: Box<dyn Debug> = alloc!(box 5u64: u64);
    assert_eq!(format!("{d:?}"), "5");
    let zst = alloc!(box Zst: Zst);
    assert_eq!(*zst, Zst);
    const N: usize = 3;
    assert_eq!(alloc!(vec [String::from("x"); N]), ["x", "x", "x"]);
    assert_eq!(alloc!(vec [1u16, 2, 3]), [1, 2, 3]);
    assert_eq!(alloc!(vec [0u8; 100]), [0u8; 100]);
}

// The per-site report.
#[specialize(report)]
fn reported(n: usize) -> usize {
    let mut total = 0;
    for _ in 0..n {
        let b = Box::new([1u64, 2, 3]);
        total += b.len();
    }
    total
}
const REPORTED_LINE: u32 = line!() - 5;

fn main() {
    let (a, b, c, d) = generic(String::from("g"));
    assert_eq!((a.as_str(), b.len(), c.len(), d.as_str()), ("g", 3, 2, "g"));

    let (a, v, f) = shapes();
    assert_eq!(
        a.area() + v.iter().map(|s| s.area()).sum::<u32>() + f(1),
        4 + 1 + 9 + 2
    );
    assert_eq!(
        format!("{:?} {:?}", returns_dyn(true), returns_dyn(false)),
        "\"early\" 1"
    );
    assert_eq!(dyn_in_struct().unwrap().area(), 25);

    let v = closures();
    assert_eq!(v.iter().map(|b| **b).collect::<Vec<_>>(), [1, 2, 3, 7, 9]);
    assert_eq!(*block_on(async_fn()), 42);
    assert_eq!(block_on(pinned_future()), 8);

    assert_eq!(macros(), "x-1-y");

    let text = String::from("life");
    let bytes = [1u8, 2];
    let (s, v) = lifetimes(&text, &bytes);
    assert_eq!((*s, v), ("life", vec![&bytes[..], &bytes[..]]));

    let (z, zs, units, empty, none) = zsts();
    assert_eq!(
        (*z, zs.len(), units.len(), empty.len(), none.len()),
        (Zst, 1000, 2, 0, 0)
    );

    let (a, b, c, s) = large();
    assert!(a.iter().all(|&x| x == 7) && b.len() == 10000 && c.iter().all(|&x| x == 0));
    assert!(s.capacity() >= 100_000);

    let (a, b, c, d) = over_aligned();
    assert_eq!(&*a as *const A64 as usize % 64, 0);
    assert_eq!(b.as_ptr() as usize % 64, 0);
    assert_eq!(&*c as *const A16k as usize % 16384, 0);
    assert_eq!(d.as_ptr() as usize % 16384, 0);
    assert_eq!((a.0, b[2].0, c.0, d[1].0), (1, 2, 3, 5));

    let (a, b, c, d, e, f, g) = paths();
    assert_eq!(
        (*a, b, c.as_str(), d.capacity() >= 8, *e, f),
        (1, vec![1, 2], "x", true, 2, vec![3, 3])
    );
    assert!(g.capacity() >= 4);

    assert_eq!(uninit_forms(), (5, [0; 8], 6));

    let (text, t, n) = reach::<Vec<u8>>();
    let u = unbounded::<str>();
    assert_eq!(
        text,
        "0 [0, 0, 0, 0] \"\" [] 36 Zst [1, 2, 3] [\"x\", \"y\"] boxed 40000 [4, 5] error 1"
    );
    assert_eq!((t.len(), &*u, n), (0, "", 40000));

    let r = Ring::<u16, 5>::new();
    assert_eq!((r.spare().capacity() >= 2, Ring::<u8, 7>::cap()), (true, 7));
    assert_eq!(r.buf, [0; 5]);
    assert_eq!(
        (*Sq(4).boxed(), *Sq(0).make(), Sq(0).label()),
        (4, 3, "sq".to_string())
    );
    assert_eq!(
        (module::m(), module::c()),
        (vec!["a".to_string(), "a".to_string()], 1)
    );
    assert!(module::inner::i().capacity() >= 64);

    assert_eq!(consts(), ([0; 4], vec![9; 3], 8, vec![0; 5]));
    assert_eq!(static_len(), [0; 5]);
    let (a, b) = shadowed(2);
    assert_eq!((a.len(), b.capacity() >= 3), (2, true));
    let (a, b, c, d) = runtime(3);
    assert_eq!(
        (a, b.capacity() >= 3, c.capacity() >= 3, d),
        (vec![1; 3], true, true, "dyn".to_string())
    );

    assert_eq!((*renamed(), *alloc_through_alias()), (1, 2));
    explicit();

    assert_eq!(reported(10), 30);
    let site = specalloc::sites()
        .into_iter()
        .find(|s| s.line == REPORTED_LINE)
        .expect("the reported site is listed");
    assert_eq!(
        (site.what, site.hits, site.size, site.align),
        ("Box::new", 10, 24, 8)
    );
    let expected = if specalloc::spec::SIZE_SPECIALIZED {
        specalloc::SiteRoute::Class(3)
    } else {
        specalloc::SiteRoute::Generic
    };
    assert_eq!(site.route, expected);
    assert!(site.file.ends_with("rewrites.rs"), "{}", site.file);
    println!("{site}");
}
