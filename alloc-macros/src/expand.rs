//! The two entry points over `proc_macro2` (which the unit tests call directly): parse the
//! input (`parse`), check the item (`validate`), walk it (`rewrite`) and build each site's
//! replacement (`emit`).

use proc_macro2::{Span, TokenStream};
use quote::{quote_spanned, ToTokens};

use crate::emit::Gen;
use crate::parse::{self, AllocInput, AllocOp};
use crate::rewrite::Rewriter;
use crate::validate::{self, Target};

/// `#[specialize(attr)] item`: the item with its allocation sites rewritten, or on error the
/// item unchanged followed by the error.
pub fn specialize(attr: TokenStream, item: TokenStream) -> TokenStream {
    match specialize_inner(attr, item.clone()) {
        Ok(tokens) => tokens,
        Err(e) => {
            let mut out = item;
            out.extend(e.to_compile_error());
            out
        }
    }
}

fn specialize_inner(attr: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    if starts_with_eq(&attr) {
        // `#[specialize = "x"]`: rustc already reports "key-value macro attributes are not
        // supported" on it; one error is enough, so the item is left as it is.
        return Ok(item);
    }
    let args = parse::args(attr)?;
    let target = validate::target(item.clone())?;
    validate::not_repeated(&target)?;
    let root = match args.root {
        Some(root) => Some(root),
        None => {
            validate::not_renamed(Span::call_site())?;
            None
        }
    };
    let gen = Gen {
        root,
        report: args.report,
    };
    let mut rw = Rewriter::new(&gen);
    rw.scan(&target);
    let rewritten = match target {
        Target::Fn(mut f) => {
            rw.item_fn(&mut f);
            f.into_token_stream()
        }
        Target::Impl(mut i) => {
            rw.item_impl(&mut i);
            i.into_token_stream()
        }
        Target::Trait(mut t) => {
            rw.item_trait(&mut t);
            t.into_token_stream()
        }
        Target::Mod(mut m) => {
            rw.item_mod(&mut m);
            m.into_token_stream()
        }
    };
    if rw.rewrites() == 0 {
        return Ok(item);
    }
    Ok(for_clippy_as_written(item, rewritten))
}

/// The item as written under `cfg(clippy)` and rewritten otherwise: clippy (which sets
/// `--cfg clippy`, a name rustc knows) lints the user's code, not the expansion, so its output
/// on an annotated crate is its output on the plain crate; rustc compiles, and warns on, the
/// rewritten item. The `cfg` comes first, so that the item's other attributes (`#[test]`,
/// `#[tokio::main]`, …) expand only on the copy kept.
fn for_clippy_as_written(item: TokenStream, rewritten: TokenStream) -> TokenStream {
    let sp = Span::call_site();
    quote_spanned! {sp=>
        #[cfg(clippy)]
        #item
        #[cfg(not(clippy))]
        #rewritten
    }
}

/// `alloc!(input)`: the allocation expression, or the error.
pub fn alloc(input: TokenStream) -> TokenStream {
    match syn::parse2::<AllocInput>(input) {
        Ok(AllocInput { root, op }) => {
            let gen = Gen {
                root,
                report: false,
            };
            let sp = Span::call_site();
            let root = gen.root(sp);
            let empty = quote_spanned!(sp=> #root::__private::Vec::new());
            match op {
                AllocOp::Uninit(ty) => {
                    let std = quote_spanned!(sp=> #root::__private::Box::<#ty>::new_uninit);
                    gen.uninit(sp, std, false)
                }
                AllocOp::Zeroed(ty) => {
                    let std = quote_spanned!(sp=> #root::__private::Box::<#ty>::new_zeroed);
                    gen.uninit(sp, std, true)
                }
                AllocOp::Boxed(e, ty) => {
                    let std = match ty {
                        Some(ty) => quote_spanned!(sp=> #root::__private::Box::<#ty>::new),
                        None => quote_spanned!(sp=> #root::__private::Box::new),
                    };
                    gen.boxed(sp, std, &e, "Box::new")
                }
                AllocOp::VecElem(e, n) => gen.vec_from_elem(sp, empty, &e, &n.into_token_stream()),
                AllocOp::VecList(list) => gen.vec_from_array(sp, empty, &list),
            }
        }
        Err(e) => e.to_compile_error(),
    }
}

/// Whether the attribute's input is `= value` (the key-value form).
fn starts_with_eq(attr: &TokenStream) -> bool {
    matches!(
        attr.clone().into_iter().next(),
        Some(proc_macro2::TokenTree::Punct(p)) if p.as_char() == '='
    )
}
