//! Expansion: the token streams each rewritten site and each `alloc!` becomes, and the two
//! entry points over `proc_macro2` (which the unit tests call directly).

use proc_macro2::{Ident, Literal, Span, TokenStream};
use quote::{quote, quote_spanned, ToTokens};
use syn::punctuated::Punctuated;
use syn::{Expr, Lit, LitStr, Token, Type};

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
    let args = parse::args(attr)?;
    let target = validate::target(item)?;
    let gen = Gen {
        root: args.root,
        report: args.report,
    };
    let mut rw = Rewriter::new(&gen);
    Ok(match target {
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
    })
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
            match op {
                AllocOp::Uninit(ty) => gen.uninit(sp, Some(&ty), false),
                AllocOp::Zeroed(ty) => gen.uninit(sp, Some(&ty), true),
                AllocOp::Boxed(e, ty) => gen.boxed(sp, ty.as_ref(), &e),
                AllocOp::VecElem(e, n) => gen.vec_from_elem(sp, &e, &n.into_token_stream()),
                AllocOp::VecList(list) => gen.vec_from_array(sp, &list),
            }
        }
        Err(e) => e.to_compile_error(),
    }
}

/// Builds the replacement of each kind of site.
pub struct Gen {
    /// The path of the facade crate (`crate = path`); `None` for `::specalloc`.
    pub root: Option<TokenStream>,
    /// Whether sites count themselves (`#[specialize(report)]`).
    pub report: bool,
}

impl Gen {
    /// The facade's path: the one given, or `::specalloc` spanned at the user's site (so that a
    /// rewritten call's span is the user's, not the attribute's).
    fn root(&self, sp: Span) -> TokenStream {
        match &self.root {
            Some(root) => root.clone(),
            None => quote_spanned!(sp=> ::specalloc),
        }
    }

    /// `::specalloc::__private::spec::NAME`.
    fn spec(&self, sp: Span, name: &str) -> TokenStream {
        let root = self.root(sp);
        let name = Ident::new(name, sp);
        quote_spanned!(sp=> #root::__private::spec::#name)
    }

    /// Wraps a call of an entry point in the per-site counter when `report` is on: `entry` is
    /// the entry point's name, `generics` its turbofish (possibly empty) and `args` its
    /// arguments; `what` names the original form and `user` is the span of the user's tokens.
    fn call(
        &self,
        user: Span,
        entry: &str,
        generics: TokenStream,
        args: TokenStream,
        what: &str,
    ) -> TokenStream {
        let sp = user;
        if !self.report {
            let f = self.spec(sp, entry);
            return quote_spanned!(sp=> #f #generics (#args));
        }
        let root = self.root(sp);
        let name = Ident::new(entry, sp);
        let wrap = located(user);
        let file = quote_spanned!(user=> file!());
        let line = quote_spanned!(user=> line!());
        let column = quote_spanned!(user=> column!());
        let site = Ident::new("__SPECALLOC_SITE", wrap);
        let comma = if args.is_empty() { quote!() } else { quote!(,) };
        let f = quote_spanned!(sp=> #root::__private::report::#name);
        quote_spanned! {wrap=>
            ({
                static #site: #root::__private::Site =
                    #root::__private::Site::new(#file, #line, #column, #what);
                #f #generics (&#site #comma #args)
            })
        }
    }

    /// `Box::new(e)` / `Box::<T>::new(e)` / `alloc!(box e)`.
    pub fn boxed(&self, user: Span, ty: Option<&Type>, arg: &Expr) -> TokenStream {
        let generics = turbofish(ty.map(ToTokens::to_token_stream));
        self.call(user, "boxed", generics, arg.to_token_stream(), "Box::new")
    }

    /// `Box::pin(e)`: the box made by `boxed`, pinned (`Box::into_pin`).
    pub fn pinned(&self, user: Span, ty: Option<&Type>, arg: &Expr) -> TokenStream {
        let sp = user;
        let root = self.root(sp);
        let generics = turbofish(ty.map(ToTokens::to_token_stream));
        let boxed = self.call(user, "boxed", generics, arg.to_token_stream(), "Box::pin");
        quote_spanned!(sp=> #root::__private::Box::into_pin(#boxed))
    }

    /// `Box::new_uninit()` / `Box::new_zeroed()` / `alloc!(uninit T)` / `alloc!(zeroed T)`.
    pub fn uninit(&self, user: Span, ty: Option<&Type>, zeroed: bool) -> TokenStream {
        let generics = turbofish(ty.map(ToTokens::to_token_stream));
        let (entry, what) = if zeroed {
            ("zeroed", "Box::new_zeroed")
        } else {
            ("uninit", "Box::new_uninit")
        };
        self.call(user, entry, generics, TokenStream::new(), what)
    }

    /// `Box::new` (or `new_uninit`, `new_zeroed`) used as a value: the entry point as a
    /// function item (never counted by `report`: a function item has no site of its own).
    pub fn fn_value(&self, user: Span, entry: &str, ty: Option<&Type>) -> TokenStream {
        let sp = user;
        let f = self.spec(sp, entry);
        let generics = turbofish(ty.map(ToTokens::to_token_stream));
        quote_spanned!(sp=> #f #generics)
    }

    /// `vec![e; N]`: `vec_from_elem`, or `vec_zero` when `e` is a literal zero.
    pub fn vec_from_elem(&self, user: Span, elem: &Expr, n: &TokenStream) -> TokenStream {
        let sp = user;
        let generics = quote_spanned!(sp=> ::<_, #n>);
        let zero = is_zero_literal(elem);
        if zero && !self.report {
            let root = self.root(sp);
            return quote_spanned!(sp=> #root::__private::vec_zero #generics (#elem));
        }
        let entry = if zero { "vec_zero" } else { "vec_from_elem" };
        self.call(user, entry, generics, elem.to_token_stream(), "vec![e; N]")
    }

    /// `vec![a, b, c]`.
    pub fn vec_from_array(&self, user: Span, list: &Punctuated<Expr, Token![,]>) -> TokenStream {
        let sp = user;
        let arr = quote_spanned!(sp=> [#list]);
        self.call(
            user,
            "vec_from_array",
            TokenStream::new(),
            arr,
            "vec![a, b, ...]",
        )
    }

    /// `Vec::with_capacity(N)` / `Vec::<T>::with_capacity(N)`.
    pub fn vec_with_capacity(&self, user: Span, ty: Option<&Type>, n: &TokenStream) -> TokenStream {
        let sp = user;
        let ty = match ty {
            Some(t) => t.to_token_stream(),
            None => quote_spanned!(sp=> _),
        };
        let generics = quote_spanned!(sp=> ::<#ty, #n>);
        self.call(
            user,
            "vec_with_capacity",
            generics,
            TokenStream::new(),
            "Vec::with_capacity",
        )
    }

    /// `String::with_capacity(N)`.
    pub fn string_with_capacity(&self, user: Span, n: &TokenStream) -> TokenStream {
        let sp = user;
        let generics = quote_spanned!(sp=> ::<#n>);
        self.call(
            user,
            "string_with_capacity",
            generics,
            TokenStream::new(),
            "String::with_capacity",
        )
    }

    /// `String::from("lit")`, `"lit".to_string()`, `"lit".to_owned()`.
    pub fn string_from(&self, user: Span, lit: &LitStr, what: &str) -> TokenStream {
        let sp = user;
        let len = Literal::usize_unsuffixed(lit.value().len());
        let generics = quote_spanned!(sp=> ::<#len>);
        self.call(user, "string_from", generics, lit.to_token_stream(), what)
    }
}

/// A span at the user's tokens with the macro's hygiene, for the tokens that only the per-site
/// report adds: lints (`unused_parens`) treat them as generated. The calls themselves carry the
/// user's spans, so type errors read as they would without the macro.
pub fn located(user: Span) -> Span {
    Span::call_site().located_at(user)
}

fn turbofish(ty: Option<TokenStream>) -> TokenStream {
    match ty {
        Some(t) => quote!(::<#t>),
        None => TokenStream::new(),
    }
}

/// Whether `e` is an integer or float literal of value zero (`0`, `0u8`, `0.0`, `0x0`, ...),
/// whose all-zero bytes are the value: `vec![0; N]` then takes zeroed memory instead of
/// writing each element, like std's `vec!`.
pub fn is_zero_literal(e: &Expr) -> bool {
    match e {
        Expr::Lit(l) if l.attrs.is_empty() => match &l.lit {
            Lit::Int(i) => i.base10_digits().bytes().all(|b| b == b'0'),
            Lit::Float(f) => f.base10_parse::<f64>().is_ok_and(|v| v == 0.0),
            _ => false,
        },
        _ => false,
    }
}
