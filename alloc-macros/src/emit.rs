//! Emission: the token streams each rewritten site and each `alloc!` becomes ([`Gen`]).
//!
//! Every generated call names `<root>::__private::NAME` (the facade's thin wrappers over
//! `spec`), spanned at the user's tokens, and passes, next to the site's arguments, the std
//! function the site called (`Box::new`, `String::from`, `<str>::to_string`, an empty
//! `vec![]`, ...) written as the user wrote it: the paths and imports the site used stay used.

use proc_macro2::{Delimiter, Group, Ident, Literal, Span, TokenStream, TokenTree};
use quote::{quote, quote_spanned, ToTokens};
use syn::punctuated::Punctuated;
use syn::{Expr, Lit, LitStr, Token, Type};

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
    pub fn root(&self, sp: Span) -> TokenStream {
        match &self.root {
            Some(root) => root.clone(),
            None => quote_spanned!(sp=> ::specalloc),
        }
    }

    /// Gives the last token tree of a generated call (its argument list) the span `end` of
    /// the original expression's last token tree (its argument list or the `vec!` delimiters):
    /// rustc spans an expression from its first token to its last, so the rewritten call then
    /// spans exactly the original expression, and underlines and suggestions (`.to_string()`
    /// appended, `let binding = …;`) cover it whole, as without the attribute. The report form,
    /// one block, is left as it is.
    pub fn ending_at(&self, out: TokenStream, end: Span) -> TokenStream {
        if self.report {
            return out;
        }
        let mut trees: Vec<TokenTree> = out.into_iter().collect();
        if let Some(TokenTree::Group(g)) = trees.last_mut() {
            g.set_span(end);
        }
        trees.into_iter().collect()
    }

    /// A call of the entry point `entry` of `__private` (or of `__private::report`, counting
    /// the site, when `report` is on): `generics` is its turbofish (possibly empty) and `args`
    /// its arguments; `what` names the original form and `user` is the span of the user's
    /// tokens.
    fn call(
        &self,
        user: Span,
        entry: &str,
        generics: TokenStream,
        args: TokenStream,
        what: &str,
    ) -> TokenStream {
        let sp = user;
        let root = self.root(sp);
        let name = Ident::new(entry, sp);
        if !self.report {
            return quote_spanned!(sp=> #root::__private::#name #generics (#args));
        }
        let wrap = located(user);
        let file = quote_spanned!(user=> file!());
        let line = quote_spanned!(user=> line!());
        let column = quote_spanned!(user=> column!());
        let site = Ident::new("__SPECALLOC_SITE", wrap);
        let f = quote_spanned!(sp=> #root::__private::report::#name);
        quote_spanned! {wrap=>
            ({
                static #site: #root::__private::Site =
                    #root::__private::Site::new(#file, #line, #column, #what);
                #f #generics (&#site, #args)
            })
        }
    }

    /// `Box::new(e)` / `Box::<T>::new(e)`, and `Box::<[T; N]>::from([…])` (`std` is the callee
    /// as written, `what` the form): `boxer(Box::new)(e)`, which calls `spec::boxed` or, for
    /// a type no routine serves, `Box::new` itself (no extra stack copy of a large value in a
    /// debug build).
    pub fn boxed(&self, user: Span, std: TokenStream, arg: &Expr, what: &str) -> TokenStream {
        self.chosen(user, "boxer", std, arg, what)
    }

    /// `Box::<[T]>::from([…])`: `box_slicer(Box::<[T]>::from)([…])`, as [`Gen::boxed`].
    pub fn box_slice(&self, user: Span, std: TokenStream, arg: &Expr) -> TokenStream {
        self.chosen(user, "box_slicer", std, arg, "Box::from")
    }

    /// `chooser(std)(arg)`: the function `chooser` picks at compile time, called on `arg`;
    /// under `report`, the counted chooser's, `({ static SITE; …; chooser(&SITE, std) })(arg)`.
    fn chosen(
        &self,
        user: Span,
        chooser: &str,
        std: TokenStream,
        arg: &Expr,
        what: &str,
    ) -> TokenStream {
        if self.report {
            // `({ static SITE; report::boxer(&SITE, Box::new) })(e)`: counted as the site starts
            // to run, the argument outside the block, passed straight to the function chosen.
            let chosen = self.call(user, chooser, TokenStream::new(), std, what);
            return quote_spanned!(user=> #chosen(#arg));
        }
        let root = self.root(user);
        let chooser = Ident::new(chooser, user);
        let std = spanning(std);
        quote_spanned!(user=> #root::__private::#chooser #std (#arg))
    }

    /// `Box::<str>::from("…")`: `box_str::<LEN, _>(Box::<str>::from, "…")`.
    pub fn box_str(&self, user: Span, std: TokenStream, lit: &LitStr) -> TokenStream {
        let len = Literal::usize_unsuffixed(lit.value().len());
        let generics = quote_spanned!(user=> ::<#len, _>);
        let args = quote_spanned!(user=> #std, #lit);
        self.call(user, "box_str", generics, args, "Box::from")
    }

    /// `Box::<T>::default()`: `box_default::<T, _>(Box::<T>::default).make()`, whose `make` is
    /// picked by method resolution at the site (`T: Default`, or std's function otherwise).
    ///
    /// Under `report` the site is a unit struct declared next to its static and passed as a
    /// type (`report::box_default::<T, _, SiteType>`), so that the probe, a temporary that
    /// lives to the end of the statement, stays zero-sized.
    pub fn box_default(&self, user: Span, std: TokenStream, ty: &Type) -> TokenStream {
        let make = Ident::new("make", located(user));
        if !self.report {
            let generics = quote_spanned!(user=> ::<#ty, _>);
            let probe = self.call(user, "box_default", generics, std, "Box::default");
            return quote_spanned!(located(user)=> #probe.#make());
        }
        let sp = user;
        let root = self.root(sp);
        let wrap = located(user);
        let file = quote_spanned!(user=> file!());
        let line = quote_spanned!(user=> line!());
        let column = quote_spanned!(user=> column!());
        let site = Ident::new("__SPECALLOC_SITE", wrap);
        let site_ty = Ident::new("__SpecallocSite", wrap);
        let f = quote_spanned!(sp=> #root::__private::report::box_default);
        quote_spanned! {wrap=>
            ({
                static #site: #root::__private::Site =
                    #root::__private::Site::new(#file, #line, #column, "Box::default");
                struct #site_ty;
                impl #root::__private::SiteOf for #site_ty {
                    #[inline(always)]
                    fn site() -> #root::__private::Option<&'static #root::__private::Site> {
                        #root::__private::Option::Some(&#site)
                    }
                }
                #f::<#ty, _, #site_ty>(#std)
            }).#make()
        }
    }

    /// `Box::pin(e)`: `pinner(Box::pin)(e)`, which calls the routine's `Box::into_pin` or,
    /// for a type no routine serves, std's `Box::pin` itself, as [`Gen::boxed`] chooses.
    pub fn pinned(&self, user: Span, std: TokenStream, arg: &Expr) -> TokenStream {
        self.chosen(user, "pinner", std, arg, "Box::pin")
    }

    /// `Box::new_uninit()` / `Box::new_zeroed()` (`std` is the callee as written).
    pub fn uninit(&self, user: Span, std: TokenStream, zeroed: bool) -> TokenStream {
        let (entry, what) = if zeroed {
            ("zeroed", "Box::new_zeroed")
        } else {
            ("uninit", "Box::new_uninit")
        };
        self.call(user, entry, TokenStream::new(), std, what)
    }

    /// `Box::new` (or `new_uninit`, `new_zeroed`) used as a value: the `spec` entry point as a
    /// function item (never counted by `report`: a function item has no site of its own).
    pub fn fn_value(&self, user: Span, entry: &str, ty: Option<&Type>) -> TokenStream {
        let sp = user;
        let root = self.root(sp);
        let name = Ident::new(entry, sp);
        let generics = turbofish(ty.map(ToTokens::to_token_stream));
        quote_spanned!(sp=> #root::__private::spec::#name #generics)
    }

    /// `vec![e; N]`: `vec_from_elem`, or `vec_zero` when `e` is a literal zero. `empty` is an
    /// empty vector built by the user's `vec!` (`vec![]`).
    pub fn vec_from_elem(
        &self,
        user: Span,
        empty: TokenStream,
        elem: &Expr,
        n: &TokenStream,
    ) -> TokenStream {
        let sp = user;
        let root = self.root(sp);
        if is_zero_literal(elem) {
            let generics = quote_spanned!(sp=> ::<_, #n>);
            let args = quote_spanned!(sp=> #empty, #elem);
            return self.call(user, "vec_zero", generics, args, "vec![e; N]");
        }
        if self.report {
            let generics = quote_spanned!(sp=> ::<_, #n, _>);
            let clone = quote_spanned!(sp=> #root::__private::Clone::clone);
            let args = quote_spanned!(sp=> #empty, #clone, #elem);
            return self.call(user, "vec_from_elem", generics, args, "vec![e; N]");
        }
        let generics = quote_spanned!(sp=> ::<_, #n>);
        let args = quote_spanned!(sp=> #empty, #elem);
        // Through a local `from_elem`, named and bounded as std's is (`T: Clone`), that forwards
        // to the entry point (a block that yields the function item, so the user's element is
        // outside the block and cannot name it): an element of the wrong type is then reported
        // on the element as std reports it, an element that is not `Clone` is "required by a
        // bound in `from_elem`" as in std, and the notes ("function defined here", the bound)
        // point at the user's `vec!` rather than into specalloc.
        quote_spanned! {sp=>
            ({
                #[inline]
                fn from_elem<T: #root::__private::Clone, const N: usize>(
                    empty: #root::__private::Vec<T>,
                    elem: T,
                ) -> #root::__private::Vec<T> {
                    #root::__private::vec_from_elem::<T, N, _>(empty, T::clone, elem)
                }
                from_elem #generics
            })(#args)
        }
    }

    /// `vec![a, b, c]`: the block first (`vec_list`, counted under `report`), then each
    /// element moved in as it is evaluated (`vec_list_putter`), as std's `vec!` does.
    pub fn vec_from_array(
        &self,
        user: Span,
        empty: TokenStream,
        list: &Punctuated<Expr, Token![,]>,
    ) -> TokenStream {
        let sp = user;
        let root = self.root(sp);
        let n = Literal::usize_unsuffixed(list.len());
        let generics = quote_spanned!(sp=> ::<_, #n>);
        let mut acc = self.call(user, "vec_list", generics, empty, "vec![a, b, ...]");
        // Each element the argument of a call through a function pointer (`vec_list_putter`):
        // written into the block where it is evaluated (no further copy in a debug build), and
        // a diagnostic on an element names no function of specalloc.
        for e in list {
            acc = quote_spanned!(sp=> (#root::__private::vec_list_putter())(#acc, #e));
        }
        quote_spanned!(sp=> #root::__private::vec_list_finish(#acc))
    }

    /// `String::from("lit")`, `"lit".to_string()`, `"lit".to_owned()` (`std` is the function
    /// the user called, as a value).
    pub fn string_from(
        &self,
        user: Span,
        std: TokenStream,
        lit: &LitStr,
        what: &str,
    ) -> TokenStream {
        let sp = user;
        let len = Literal::usize_unsuffixed(lit.value().len());
        let generics = quote_spanned!(sp=> ::<#len, _>);
        let args = quote_spanned!(sp=> #std, #lit);
        self.call(user, "string_from", generics, args, what)
    }
}

/// A span at the user's tokens with the macro's hygiene, for the tokens that only the per-site
/// report adds: lints (`unused_parens`) treat them as generated. The calls themselves carry the
/// user's spans, so type errors read as they would without the macro.
pub fn located(user: Span) -> Span {
    Span::call_site().located_at(user)
}

/// `::<T>`, or nothing.
pub fn turbofish(ty: Option<TokenStream>) -> TokenStream {
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

/// `(std)`, the argument list of a chooser (`boxer(Box::new)`), spanned at the last token of
/// `std`: the chooser's call, the callee of the generated call, then spans the user's path
/// from its first token (the root path is spanned there) to its last, and rustc underlines
/// `Box::new` whole under "arguments to this function are incorrect", as it does without the
/// macro.
fn spanning(std: TokenStream) -> Group {
    let end = std.clone().into_iter().last().map(|t| t.span());
    let mut group = Group::new(Delimiter::Parenthesis, std);
    if let Some(end) = end {
        group.set_span(end);
    }
    group
}
