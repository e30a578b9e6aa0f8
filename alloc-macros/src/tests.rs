//! Expansion snapshots (`insta` over `prettyplease`) of representative inputs, taken from the
//! `proc_macro2` entry points, so every change to the generated code shows up in review.
//! The snapshots live in `alloc-macros/tests/snapshots/`; after an intended change, run
//! `INSTA_UPDATE=always cargo test -p specalloc-macros --lib` (or `cargo insta review`) and review
//! the diff.

use proc_macro2::TokenStream;
use quote::quote;

use crate::expand;

/// The pretty-printed expansion of `#[specialize(attr)] item`: the rewritten item alone, once
/// checked that the expansion is the item as written under `cfg(clippy)`, then the rewritten
/// one under `cfg(not(clippy))` (or only the item as written, when no site was rewritten).
fn specialize(attr: TokenStream, item: TokenStream) -> String {
    let out = pretty(expand::specialize(attr, item.clone()));
    let as_written = pretty(item);
    match out.strip_prefix(&format!("#[cfg(clippy)]\n{as_written}")) {
        Some(rewritten) => rewritten
            .strip_prefix("#[cfg(not(clippy))]\n")
            .expect("the rewritten item under cfg(not(clippy))")
            .to_string(),
        None => {
            assert_eq!(out, as_written, "neither the pair nor the item as written");
            out
        }
    }
}

/// The pretty-printed expansion of `alloc!(input)` (wrapped in a function to print it).
fn alloc(input: TokenStream) -> String {
    let e = expand::alloc(input);
    pretty(quote!(fn expansion() { #e }))
}

/// The expansion of `#[specialize(attr)] item` as raw tokens (for errors, whose item may not
/// pretty-print): the unchanged item, then `compile_error!`.
fn specialize_raw(attr: TokenStream, item: TokenStream) -> String {
    expand::specialize(attr, item).to_string()
}

fn pretty(tokens: TokenStream) -> String {
    match syn::parse2::<syn::File>(tokens.clone()) {
        Ok(file) => prettyplease::unparse(&file),
        Err(e) => panic!("expansion does not parse ({e}):\n{tokens}"),
    }
}

macro_rules! snapshot {
    ($name:ident, $text:expr) => {
        #[test]
        fn $name() {
            insta::with_settings!({
                snapshot_path => "../tests/snapshots",
                prepend_module_to_snapshot => false,
                omit_expression => true,
            }, {
                insta::assert_snapshot!(stringify!($name), $text);
            });
        }
    };
}

snapshot!(
    box_forms,
    specialize(
        quote!(),
        quote! {
            fn boxes<T: Default>(x: T) -> usize {
                let a = Box::new(1u64);
                let b = Box::<[u8; 3]>::new([1, 2, 3]);
                let c = std::boxed::Box::new(T::default());
                let d = alloc::boxed::Box::new(2u8);
                let e = ::std::boxed::Box::new(x);
                let mut f = Box::new_uninit();
                f.write(1u32);
                let g = Box::<u64>::new_uninit();
                let h = Box::<[u32; 4]>::new_zeroed();
                let i = Box::pin(async { 1 });
                let j: Vec<Box<u16>> = [1, 2].into_iter().map(Box::new).collect();
                let k = Some(3u8).map(Box::<u8>::new);
                let l: Box<dyn Fn() -> u8> = Box::new(|| 1);
                let not_ours = crate::Box::new(1);
                let not_ours_either = Box::<u8, Global>::new_in(1, Global);
                0
            }
        }
    )
);

snapshot!(
    box_reach_forms,
    specialize(
        quote!(),
        quote! {
            fn reach<T: Default>() -> usize {
                // Rewritten: the impl std picks is known from the tokens.
                let a = Box::<Node>::default();
                let b = std::boxed::Box::<T>::default();
                let c = Box::<[u8]>::from([1, 2, 3]);
                let d = Box::<[u16; 2]>::from([7; 2]);
                let e = Box::<str>::from("boxed");
                // Left alone: std picks the impl from the type expected.
                let f: Box<Node> = Box::default();
                let g: Box<[u8]> = Box::from([1, 2]);
                let h: Box<str> = Box::from("text");
                let i: Box<dyn Error> = Box::from("error");
                let j = Box::<Vec<_>>::default();
                let k = Box::<[u8]>::from(array);
                let l = Box::<str>::from(text);
                let m = Box::<Node>::from(node);
                let n: Vec<Box<str>> = names.map(Box::from).collect();
                Box::<u8>::default();
                0
            }
        }
    )
);

snapshot!(
    vec_forms,
    specialize(
        quote!(),
        quote! {
            fn vecs(n: usize, x: String) {
                let a = vec![x.clone(); 4];
                let b = vec![x.clone(); LEN];
                let c = vec![Box::new(1); consts::LEN];
                let d = vec![x.clone(); n];
                let e = vec![Box::new(1); n * 2];
                let f = vec![1u8, 2, 3];
                let g = vec![Box::new(1), Box::new(2),];
                let h: Vec<u8> = vec![];
                let i = std::vec![0u32; 64];
                let j = alloc::vec![0.0; 8];
                let k = ::std::vec![1; 2];
                let l = vec![1u8; 16usize];
                let m = vec![1u8; 16u32];
                let N = 3;
                let o = vec![1u8; N];
                let p = Vec::with_capacity(16);
                let q = Vec::<u8>::with_capacity(CAP);
                let r = Vec::<u8>::with_capacity(n);
                let s = std::vec::Vec::with_capacity(0);
                let t = Vec::with_capacity(m::CAP);
                let u = vec![x; (LEN)];
            }
        }
    )
);

snapshot!(
    string_forms,
    specialize(
        quote!(),
        quote! {
            fn strings(x: &str) {
                let a = String::from("héllo");
                let b = "abc".to_string();
                let c = "abc".to_owned();
                let d = r"raw\n".to_string();
                let e = "esc\n".to_owned();
                let f = String::with_capacity(32);
                let g = std::string::String::with_capacity(CAP);
                let h = String::from(x);
                let i = "x".to_uppercase();
                let j = x.to_string();
                let k = String::with_capacity(x.len());
                let l = "chain".to_string().len();
                let m = String::new();
            }
        }
    )
);

snapshot!(
    closures_async_and_macros,
    specialize(
        quote!(),
        quote! {
            async fn walk(v: &[u8]) -> usize {
                let f = |x: u8| Box::new(x);
                let g = move || vec![f(1); 2];
                let fut = async { Box::new(5) };
                let inner = async move { String::from("in async") };
                println!("{} {:?}", "fmt string untouched", Box::new(1));
                println!("{:?}", vec![Box::new(1)]);
                assert_eq!(vec![1, 2], [1, 2], "message {}", String::from("x"));
                let s = format!("{a}", a = "named".to_string());
                let name = stringify!(Box::new(1));
                let unparsed = custom!(struct S { f: Box<u8> });
                let unchanged = dbg!(v.len() + 1);
                let q = quote!(Box::new(1));
                v.len()
            }
        }
    )
);

snapshot!(
    left_for_lints,
    specialize(
        quote!(),
        quote! {
            fn lints<T: Default>() -> usize {
                // Left as written so that clippy's lints still fire on them.
                let a: Box<T> = Box::new(T::default()); // box_default
                let b: Box<u8> = Box::new(Default::default()); // box_default
                let c = String::from(""); // manual_string_new
                let d = "".to_string(); // manual_string_new
                let e = &vec![1, 2, 3]; // useless_vec
                for x in vec![1, 2] {
                    let f = Box::new(x); // the body is still rewritten
                }
                Box::new(5u8); // unused_must_use
                Vec::<u8>::with_capacity(8); // unused_must_use
                assert!(Box::new(1) == Box::new(1)); // assert! shows its tokens
                dbg!(vec![1u8; 3]);
                0
            }
        }
    )
);

snapshot!(
    left_alone,
    specialize(
        quote!(),
        quote! {
            fn outer() -> [u8; LEN] {
                fn nested() -> Box<u8> {
                    Box::new(1)
                }
                const C: usize = { let b = Box::new(1); 1 };
                static S: Option<Box<u8>> = None;
                struct Local(Box<u8>);
                impl Local {
                    fn new() -> Self {
                        Local(Box::new(1))
                    }
                }
                let k = const { 1 + 1 };
                let arr = [0u8; LEN];
                let arr2: [u8; { 2 + 2 }] = [0; 4];
                let rep = [Some(Box::new(1)); 0];
                let g = generic::<{ LEN }>();
                let t: Vec<Box<u8>> = Vec::new();
                let m = match t.first() {
                    Some(b) => 1,
                    None => 0,
                };
                arr
            }
        }
    )
);

snapshot!(
    attributes_kept,
    specialize(
        quote!(),
        quote! {
            fn attributes(n: u8) -> usize {
                // A site with attributes of its own stays as written, its arguments walked.
                let t = (1, #[cfg(any())] Box::new(5), 2);
                let a = [Box::new(1), #[cfg(any())] Box::new(2)];
                let c = f(#[cfg(all())] Box::new(vec![3u8; 4]), String::from("c"));
                let s = (#[cfg(any())] "x".to_string(), "y".to_string());
                #[cfg(any())]
                let w = Vec::<u8>::with_capacity(4);
                // A `vec!` with an attribute on an element stays std's `vec!`.
                let v = vec![String::from("a"), #[cfg(any())] String::from("b")];
                let l = vec![1, #[cfg(any())] 2, 3];
                let r = vec![#[allow(unused_parens)] (Box::new(n)); 2];
                let inner = vec![1, 2, #[rustfmt::skip] 3];
                #[cfg(any())]
                Vec::<u8>::with_capacity(4)
            }
        }
    )
);

snapshot!(
    shadowed_names,
    specialize(
        quote!(),
        quote! {
            fn shadowing() {
                let a = Box::new(1);
                {
                    // This block's `Box` and `vec!` are not std's: left alone here.
                    use inner::Box;
                    use macros::vec;
                    let b = Box::new(7u8);
                    let c = std::boxed::Box::new(2);
                    let d = vec![1, 2];
                    let e = String::from("std's");
                    let f = [1u8].map(Box::new);
                }
                {
                    use other::Thing as Vec;
                    struct String;
                    type Box = u8;
                    let g = Vec::with_capacity(4);
                    let h = String::from("x");
                    let i = alloc::vec::Vec::<u8>::with_capacity(4);
                }
                {
                    // std's own, imported: still rewritten.
                    use std::boxed::Box;
                    use alloc::{vec, string::String as String};
                    let j = Box::new(3);
                    let k = vec![4; 2];
                    let l = String::from("l");
                }
                let m = Box::new(5);
                {
                    // A formatting macro of the user's: its arguments are left as written.
                    use log::format;
                    let n = format!("{}", String::from("n"));
                }
                macro_rules! println {
                    ($($t:tt)*) => { stringify!($($t)*) };
                }
                let o = println!("{}", String::from("o"));
                let p = std::println!("{}", String::from("p"));
            }
        }
    )
);

snapshot!(
    awaiting_sites,
    specialize(
        quote!(),
        quote! {
            async fn awaiting() {
                // An operand that awaits: left as written (the future stays std's size).
                let a = Box::new(one().await);
                let b = vec![one().await, 2, 3];
                let c = vec![[0u8; 256], [one().await; 256]];
                let d = vec![one().await; 4];
                let e = Box::new(format!("{}", one().await));
                let f = Box::new(Node { next: Box::new(one().await) });
                // Awaits only inside a nested async block or closure: rewritten.
                let g = Box::new(async { one().await });
                let h = vec![1, 2];
                let i = Box::pin(async move { Box::new(one().await) });
            }
        }
    )
);

snapshot!(
    impl_block,
    specialize(
        quote!(),
        quote! {
            impl<T: Clone, const K: usize> Stack<T, K> {
                const CAP: usize = K * 2;
                const fn empty() -> usize {
                    0
                }
                fn with(x: T) -> Self {
                    let items = vec![x; K];
                    let spare = Vec::<T>::with_capacity(Self::CAP);
                    let by_type = Vec::<T>::with_capacity(T::CAP);
                    let fixed = Vec::<T>::with_capacity(crate::CAP);
                    Stack { items, head: Box::new(0) }
                }
                pub async fn lifetimes<'a>(&'a self, s: &'a str) -> Box<&'a str> {
                    Box::new(s)
                }
            }
        }
    )
);

snapshot!(
    trait_defaults,
    specialize(
        quote!(),
        quote! {
            pub trait Make {
                const N: usize;
                fn required(&self) -> Box<u8>;
                fn provided(&self) -> Box<u64> {
                    Box::new(7)
                }
                fn names() -> Vec<String> {
                    vec!["a".to_string(), "b".to_owned()]
                }
            }
        }
    )
);

snapshot!(
    inline_module,
    specialize(
        quote!(),
        quote! {
            mod m {
                use super::*;
                pub fn a() -> Box<u8> {
                    Box::new(1)
                }
                const fn c() -> u8 {
                    1
                }
                static S: u8 = 1;
                struct Skip(Box<u8>);
                impl Skip {
                    fn new() -> Self {
                        Skip(Box::new(2))
                    }
                }
                mod inner {
                    fn b() -> Vec<u8> {
                        vec![1, 2, 3]
                    }
                }
            }
        }
    )
);

snapshot!(
    statement_macros,
    specialize(
        quote!(),
        quote! {
            fn tails() -> Vec<u8> {
                vec! { 9 }
                vec![0u8; 3];
                println!("{}", "x".to_string());
                vec![1, 2]
            }
        }
    )
);

snapshot!(
    crate_option,
    specialize(
        quote!(crate = my_alloc),
        quote! {
            fn f() -> Box<u8> {
                Box::new(1)
            }
        }
    ) + &specialize(
        quote!(crate = "::deps::specalloc"),
        quote! {
            fn g() -> Vec<u8> {
                vec![1]
            }
        }
    )
);

snapshot!(
    report_option,
    specialize(
        quote!(report),
        quote! {
            fn reported(n: usize) -> usize {
                let a = Box::new(1u64);
                let b = vec![0u8; 32];
                let c = vec!['x'; 4];
                let d = vec![1, 2];
                let e = Vec::<u8>::with_capacity(8);
                let f = String::with_capacity(8);
                let g = "lit".to_string();
                let h = Box::<u8>::new_uninit();
                let i: Vec<Box<u8>> = (0..n as u8).map(Box::new).collect();
                let j = Box::<u16>::default();
                let k = Box::<[u8]>::from([1, 2]);
                let l = Box::<[u8; 2]>::from([1, 2]);
                let m = Box::<str>::from("lit");
                Box::new(2).method();
                0
            }
        }
    )
);

snapshot!(
    errors,
    [
        specialize_raw(
            quote!(),
            quote!(
                struct S(Box<u8>);
            )
        ),
        specialize_raw(
            quote!(),
            quote!(
                enum E {
                    A,
                }
            )
        ),
        specialize_raw(
            quote!(),
            quote!(
                pub const fn c() -> u8 {
                    1
                }
            )
        ),
        specialize_raw(
            quote!(),
            quote!(
                const C: u8 = 1;
            )
        ),
        specialize_raw(
            quote!(),
            quote!(
                mod external;
            )
        ),
        specialize_raw(
            quote!(),
            quote!(
                fn declared(&self);
            )
        ),
        specialize_raw(
            quote!(),
            quote!(
                use std::vec::Vec;
            )
        ),
        specialize_raw(
            quote!(fast),
            quote!(
                fn f() {}
            )
        ),
        specialize_raw(
            quote!(crate = a, crate = b),
            quote!(
                fn f() {}
            )
        ),
        specialize_raw(
            quote!(crate = 5),
            quote!(
                fn f() {}
            )
        ),
        specialize_raw(
            quote!(report, report),
            quote!(
                fn f() {}
            )
        ),
    ]
    .join("\n// ----\n")
);

snapshot!(
    alloc_forms,
    [
        alloc(quote!(uninit [u64; 4])),
        alloc(quote!(zeroed Node<'static, T>)),
        alloc(quote!(box (1u8, 2u16))),
        alloc(quote!(box Node::new(): Node)),
        alloc(quote!(box ::std::default::Default::default(): u32)),
        alloc(quote!(vec [String::new(); N])),
        alloc(quote!(vec [0u32; 64])),
        alloc(quote!(vec [1, 2, 3,])),
        alloc(quote!(crate = my_alias; box 1)),
    ]
    .join("\n// ----\n")
);

snapshot!(
    alloc_errors,
    [
        alloc(quote!()),
        alloc(quote!(boxed 5)),
        alloc(quote!(box)),
        alloc(quote!(uninit)),
        alloc(quote!(uninit u8 u16)),
        alloc(quote!(vec [])),
        alloc(quote!(vec [1; 2; 3])),
        alloc(quote!(vec(1, 2))),
        alloc(quote!(crate = ::x box 1)),
    ]
    .join("\n// ----\n")
);

#[test]
fn zero_literals() {
    use crate::emit::is_zero_literal;
    for yes in [
        quote!(0),
        quote!(0u8),
        quote!(0x0),
        quote!(0.0),
        quote!(0f32),
        quote!(0_0),
    ] {
        assert!(is_zero_literal(&syn::parse2(yes.clone()).unwrap()), "{yes}");
    }
    for no in [
        quote!(1),
        quote!(0.5),
        quote!(-0),
        quote!(x),
        quote!('\0'),
        quote!(false),
    ] {
        assert!(!is_zero_literal(&syn::parse2(no.clone()).unwrap()), "{no}");
    }
}

#[test]
fn idempotent() {
    // Rewriting rewritten code changes nothing (an annotated method inside an annotated impl
    // is walked twice).
    let once = specialize(
        quote!(),
        quote!(
            fn f() -> Vec<Box<u8>> {
                std::vec![Box::new(1); 2]
            }
        ),
    );
    assert!(once.contains("__private"), "{once}");
    let twice = specialize(quote!(), once.parse().expect("the expansion parses"));
    assert_eq!(once, twice);
}

/// Issue 22: the renamed-dependency check reads the manifest without a TOML crate.
#[test]
fn renamed_dependency_is_found_by_the_line_scan() {
    use crate::validate::renamed_in;
    assert_eq!(
        renamed_in("[dependencies]\nspecalloc = { path = \"..\" }\n"),
        None
    );
    assert_eq!(
        renamed_in("[dependencies]\nsa = { package = \"specalloc\", path = \"..\" }\n"),
        Some("sa".to_string())
    );
    assert_eq!(
        renamed_in("[dev-dependencies.sa2]\npath = \"..\"\npackage = \"specalloc\"\n"),
        Some("sa2".to_string())
    );
    assert_eq!(
        renamed_in("[target.'cfg(unix)'.dependencies]\nx = { package = \"specalloc\" }\n"),
        Some("x".to_string())
    );
    // Another package of the project, a comment, or another table: not the facade renamed.
    assert_eq!(
        renamed_in("[dependencies]\nrt = { package = \"specalloc-runtime\" }\n# y = { package = \"specalloc\" }\n[features]\nz = { package = \"specalloc\" }\n"),
        None
    );
}

/// The expansion is the item as written under `cfg(clippy)` (clippy lints the user's code),
/// then the rewritten item under `cfg(not(clippy))`; an item with nothing to rewrite is emitted
/// once, as written.
#[test]
fn clippy_sees_the_item_as_written() {
    let item = quote! {
        /// Documented.
        #[inline]
        fn f() -> Box<u8> { Box::new(1) }
    };
    let out = expand::specialize(TokenStream::new(), item.clone()).to_string();
    let rewritten =
        "# [cfg (not (clippy))] # [doc = r\" Documented.\"] # [inline] fn f () -> Box < u8 > \
                     { :: specalloc :: __private :: boxer (Box :: new) (1) }";
    assert_eq!(out, format!("# [cfg (clippy)] {item} {rewritten}"));
    let nothing = quote!(
        fn g(n: usize) -> Vec<u8> {
            vec![0; n]
        }
    );
    assert_eq!(
        expand::specialize(TokenStream::new(), nothing.clone()).to_string(),
        nothing.to_string()
    );
}

/// The text between the line `start` (first match) and the next closing fence.
fn fenced_after<'a>(doc: &'a str, start: &str) -> &'a str {
    let at = doc
        .find(start)
        .unwrap_or_else(|| panic!("docs/macros.md: no {start:?}"));
    let body = &doc[at + start.len()..];
    let body = &body[body.find('\n').map_or(0, |i| i + 1)..];
    &body[..body.find("```").expect("closing fence")]
}

/// Issue 22, items 6 and 7: each expansion `docs/macros.md` shows (for its `build` example,
/// and for `reach` in "Reach") is what the attribute emits for the example, pretty-printed.
#[test]
fn documented_expansion_is_what_the_macro_emits() {
    let doc = include_str!("../../docs/macros.md");
    for (example, name) in [
        (
            "```rust\nuse specalloc::specialize;\n\nstruct Point",
            "build",
        ),
        (
            "```rust\nuse specalloc::specialize;\n\n#[derive(Default)]\nstruct Node",
            "reach",
        ),
    ] {
        let example = fenced_after(doc, example);
        let item = &example
            [example.find("#[specialize]").expect("the attribute") + "#[specialize]".len()..];
        let item: TokenStream = item.parse().expect("the example parses");
        let emitted = specialize(TokenStream::new(), item);
        let marker = format!(
            "<!-- expansion of {name}: checked by alloc-macros/src/tests.rs -->\n```rust,ignore"
        );
        let documented = fenced_after(doc, &marker);
        assert_eq!(
            documented, emitted,
            "update docs/macros.md's expansion of {name} with the one on the right"
        );
    }
}

/// A path through a re-export of std (`crate::lib::std::boxed::Box`, as nom writes it) is std's
/// `Box::new`, and `crate::lib::std::string::String::from` std's; a bare `vec!`, which may be
/// the crate's own macro, is left whole; `Vec::with_capacity` is left to std under any path.
#[test]
fn re_exported_std_paths_and_vec() {
    let out = specialize(
        quote!(),
        quote!(
            fn f() -> (Box<u8>, String, Vec<u8>, Vec<u8>, Vec<u8>) {
                (
                    crate::lib::std::boxed::Box::new(4u8),
                    crate::lib::std::string::String::from("x"),
                    crate::lib::std::vec::Vec::with_capacity(4),
                    vec![Box::new(1u8); 2].len(),
                    std::vec![Box::new(2u8)],
                )
            }
        ),
    );
    assert!(
        out.contains("::specalloc::__private::boxer(crate::lib::std::boxed::Box::new)(4u8)"),
        "{out}"
    );
    assert!(
        out.contains(">(crate::lib::std::string::String::from, \"x\")"),
        "{out}"
    );
    assert!(
        out.contains("        crate::lib::std::vec::Vec::with_capacity(4),\n"),
        "{out}"
    );
    assert!(out.contains("vec![Box::new(1u8); 2]"), "{out}");
    assert!(
        out.contains("std::vec![::specalloc::__private::boxer(Box::new) (2u8)]"),
        "{out}"
    );
    // A path whose module is not std's is not std's.
    let out = specialize(
        quote!(),
        quote!(
            fn g() -> Box<u8> {
                crate::lib::boxed::Box::new(4)
            }
        ),
    );
    assert!(!out.contains("__private"), "{out}");
}

/// `Vec::with_capacity(N)` and `String::with_capacity(N)` are left to std whatever `N` and
/// however the type is named: std's functions are inlined where they are called, and a call of
/// an entry point in their place is never faster there (it changes what the compiler inlines
/// around the site). An item with nothing else to rewrite is emitted exactly as written, under
/// `report` too.
#[test]
fn with_capacity_is_left_to_std() {
    let item = quote!(
        fn f() -> (Vec<u8>, Vec<u32>, String, String, Vec<u16>) {
            (
                Vec::with_capacity(16),
                std::vec::Vec::<u32>::with_capacity(LEN),
                String::with_capacity(32),
                ::alloc::string::String::with_capacity(consts::CAP),
                crate::lib::std::vec::Vec::with_capacity(4),
            )
        }
    );
    for attr in [quote!(), quote!(report)] {
        assert_eq!(
            expand::specialize(attr, item.clone()).to_string(),
            item.to_string()
        );
    }
}
