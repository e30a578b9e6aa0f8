//! Parsing: the arguments of `#[specialize(...)]` and the input of `alloc!(...)`.

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::parse::{Parse, ParseStream, Parser};
use syn::punctuated::Punctuated;
use syn::{Expr, LitStr, Path, Token, Type};

/// Options of `#[specialize(...)]`.
#[derive(Default)]
pub struct Args {
    /// The path expansions start from (`crate = path`); `None` means `::specalloc`.
    pub root: Option<TokenStream>,
    /// `report`: count each rewritten site at run time (see the facade's `sites()`).
    pub report: bool,
}

/// Parses the attribute's arguments: empty, or a comma-separated list of `crate = path`
/// (or `crate = "path"`) and `report`.
pub fn args(attr: TokenStream) -> syn::Result<Args> {
    let mut args = Args::default();
    if attr.is_empty() {
        return Ok(args);
    }
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("crate") {
            if args.root.is_some() {
                return Err(meta.error("duplicate `crate` option"));
            }
            let value = meta.value()?;
            let path: Path = if value.peek(LitStr) {
                value.parse::<LitStr>()?.parse()?
            } else {
                value.parse().map_err(|e| {
                    syn::Error::new(e.span(), "expected a path, as in `crate = my_specalloc`")
                })?
            };
            args.root = Some(path.into_token_stream());
            Ok(())
        } else if meta.path.is_ident("report") {
            if args.report {
                return Err(meta.error("duplicate `report` option"));
            }
            args.report = true;
            Ok(())
        } else {
            Err(meta
                .error("unknown option of `#[specialize]`: expected `crate = path` or `report`"))
        }
    });
    parser.parse2(attr)?;
    Ok(args)
}

/// The input of `alloc!`: an optional `crate = <tokens>;` prefix (the facade's wrapper passes
/// `$crate` there), then one operation.
pub struct AllocInput {
    /// The root path tokens, `None` for `::specalloc`.
    pub root: Option<TokenStream>,
    /// What to allocate.
    pub op: AllocOp,
}

/// One `alloc!` operation.
pub enum AllocOp {
    /// `uninit T`: one `T`, uninitialised.
    Uninit(Type),
    /// `zeroed T`: one `T`, all bytes zero.
    Zeroed(Type),
    /// `box expr` or `box expr: T`.
    Boxed(Expr, Option<Type>),
    /// `vec [elem; N]`.
    VecElem(Expr, Expr),
    /// `vec [a, b, c]`.
    VecList(Punctuated<Expr, Token![,]>),
}

mod kw {
    syn::custom_keyword!(uninit);
    syn::custom_keyword!(zeroed);
    syn::custom_keyword!(vec);
}

const EXPECTED: &str = "expected one of `uninit T`, `zeroed T`, `box expr`, `box expr: T`, \
                        `vec [elem; N]` or `vec [a, b, ...]`";

impl Parse for AllocInput {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut root = None;
        if input.peek(Token![crate]) && input.peek2(Token![=]) {
            input.parse::<Token![crate]>()?;
            input.parse::<Token![=]>()?;
            let mut tokens = TokenStream::new();
            while !input.peek(Token![;]) {
                if input.is_empty() {
                    return Err(input.error("expected `;` after `crate = path`"));
                }
                tokens.extend([input.parse::<TokenTree>()?]);
            }
            input.parse::<Token![;]>()?;
            if tokens.is_empty() {
                return Err(input.error("expected a path after `crate =`"));
            }
            root = Some(tokens);
        }
        let op = if input.is_empty() {
            return Err(input.error(EXPECTED));
        } else if input.peek(kw::uninit) {
            input.parse::<kw::uninit>()?;
            AllocOp::Uninit(ty_after(input, "uninit")?)
        } else if input.peek(kw::zeroed) {
            input.parse::<kw::zeroed>()?;
            AllocOp::Zeroed(ty_after(input, "zeroed")?)
        } else if input.peek(Token![box]) {
            input.parse::<Token![box]>()?;
            if input.is_empty() {
                return Err(input.error("expected an expression after `box`"));
            }
            let e: Expr = input.parse()?;
            let ty = if input.peek(Token![:]) && !input.peek(Token![::]) {
                input.parse::<Token![:]>()?;
                Some(input.parse()?)
            } else {
                None
            };
            AllocOp::Boxed(e, ty)
        } else if input.peek(kw::vec) {
            input.parse::<kw::vec>()?;
            let content;
            syn::bracketed!(content in input);
            vec_body(&content)?
        } else {
            return Err(input.error(EXPECTED));
        };
        if !input.is_empty() {
            return Err(input.error("unexpected tokens after the `alloc!` operation"));
        }
        Ok(AllocInput { root, op })
    }
}

/// The type after `uninit` or `zeroed`.
fn ty_after(input: ParseStream, kw: &str) -> syn::Result<Type> {
    if input.is_empty() {
        return Err(input.error(format!(
            "expected a type after `{kw}`, as in `alloc!({kw} T)`"
        )));
    }
    input.parse()
}

/// The inside of `[...]` in `alloc!(vec [...])`.
fn vec_body(content: ParseStream) -> syn::Result<AllocOp> {
    if content.is_empty() {
        return Err(content.error(
            "`alloc!(vec [])` allocates nothing: use `Vec::new()`; expected `[elem; N]` or `[a, b, ...]`",
        ));
    }
    let first: Expr = content.parse()?;
    if content.peek(Token![;]) {
        content.parse::<Token![;]>()?;
        let n: Expr = content.parse()?;
        if !content.is_empty() {
            return Err(content.error("unexpected tokens after the length"));
        }
        return Ok(AllocOp::VecElem(first, n));
    }
    let mut list = Punctuated::new();
    list.push_value(first);
    while !content.is_empty() {
        list.push_punct(content.parse::<Token![,]>()?);
        if content.is_empty() {
            break;
        }
        list.push_value(content.parse()?);
    }
    Ok(AllocOp::VecList(list))
}

/// The two forms of `vec!`'s input.
pub enum VecArgs {
    /// `vec![elem; n]`.
    Elem(Box<Expr>, Token![;], Box<Expr>),
    /// `vec![a, b, c]` (at least one element).
    List(Punctuated<Expr, Token![,]>),
}

/// Parses the tokens of a `vec!` invocation; `None` when empty or not parseable (left to
/// rustc).
pub fn vec_args(tokens: &TokenStream) -> Option<VecArgs> {
    let parser = |input: ParseStream| -> syn::Result<Option<VecArgs>> {
        if input.is_empty() {
            return Ok(None);
        }
        let fork = input.fork();
        let e: Expr = fork.parse()?;
        if fork.peek(Token![;]) {
            input.parse::<Expr>()?;
            let semi = input.parse()?;
            let n = Box::new(input.parse()?);
            return Ok(Some(VecArgs::Elem(Box::new(e), semi, n)));
        }
        Ok(Some(VecArgs::List(Punctuated::parse_terminated(input)?)))
    };
    parser.parse2(tokens.clone()).ok().flatten()
}

/// Parses a macro's tokens as comma-separated expressions (`println!`, `assert_eq!`, ...);
/// `None` when they do not parse so.
pub fn expr_list(tokens: &TokenStream) -> Option<Punctuated<Expr, Token![,]>> {
    Punctuated::<Expr, Token![,]>::parse_terminated
        .parse2(tokens.clone())
        .ok()
}
