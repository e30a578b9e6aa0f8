// Issue 29, item 2: clippy's lints on annotated code are its lints on the plain code
// (tests/cargo_fixtures.rs compiles this file under clippy as it is and with each attribute
// line replaced by a comment, and compares the two outputs). Default, pedantic and nursery
// lints, and `str_to_string`.
#![allow(dead_code)]

sa::install!();

fn takes_str(s: &str) -> usize {
    s.len()
}

#[derive(Default)]
struct Node {
    next: Option<Box<Node>>,
    value: u64,
}

#[sa::specialize(crate = sa)]
fn owned_strings() -> usize {
    let a = takes_str(&"abc".to_string()); // unnecessary_to_owned
    println!("{}", "abc".to_string()); // to_string_in_format_args
    let s = "x".to_string(); // str_to_string
    let o = "y".to_owned();
    let e = String::from(""); // manual_string_new
    a + s.len() + o.len() + e.len()
}

#[sa::specialize(crate = sa)]
fn vectors() -> i32 {
    let z = vec![1, 2, 3]; // useless_vec
    let total: i32 = z.iter().sum();
    let mut v = Vec::with_capacity(2); // vec_init_then_push
    v.push(1);
    v.push(2);
    let w = vec![0u8; 16];
    let big = vec![[0u8; 4]; 4];
    total + v.iter().sum::<i32>() + i32::from(w[0]) + i32::from(big[0][0])
}

#[sa::specialize(crate = sa)]
fn boxes() -> u64 {
    let n: Box<Node> = Box::new(Node::default()); // box_default
    let m = Box::new(Node { next: Some(n), value: 2 });
    let s = Box::new(String::from("boxed"));
    let c = String::with_capacity(16);
    m.value + m.next.as_ref().map_or(0, |n| n.value) + s.len() as u64 + c.capacity() as u64
}

#[sa::specialize(crate = sa)]
mod module {
    pub fn inside() -> Vec<String> {
        let v = vec!["a".to_string(), "b".to_owned()];
        let _unused = Box::new(1u8);
        v
    }
}

fn main() {
    println!(
        "{} {} {} {:?}",
        owned_strings(),
        vectors(),
        boxes(),
        module::inside()
    );
}
