//! Procedural macros of [`specalloc`](../specalloc/index.html): `alloc!` and
//! `#[specialize]`, which send allocations whose size is known at compile time to the
//! runtime's size-specialised routines.
//!
//! Use them through the facade crate `specalloc`, which re-exports them and documents them
//! with runnable examples (`specalloc::alloc!`, `specalloc::specialize`); the code they
//! generate names `::specalloc::__private::...`, so the facade must be a dependency.
//!
//! The crate is laid out like `thiserror` and `async-trait`: thin entry points here, and the
//! logic over `proc_macro2` token streams in modules the unit tests call directly:
//!
//! - `parse`: the attribute's options and `alloc!`'s input;
//! - `validate`: what the attribute may be put on;
//! - `rewrite`: the `syn::visit_mut` walker that finds allocation sites;
//! - `emit`: the code each site becomes (`Gen`);
//! - `expand`: the two entry points, tying the others together.
//!
//! Errors are `syn::Error`s spanned at the user's tokens, emitted with
//! `to_compile_error()` after the unchanged item: no panics, no follow-on errors.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use proc_macro::TokenStream;

mod emit;
mod expand;
mod parse;
mod rewrite;
#[cfg(test)]
mod tests;
mod validate;

/// Rewrites the allocation sites of a function, method, impl block, trait or inline module
/// into calls of the size-specialised entry points. Documented, with examples, on the facade
/// re-export `specalloc::specialize`.
#[proc_macro_attribute]
pub fn specialize(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand::specialize(attr.into(), item.into()).into()
}

/// Allocates through the routine of a type's size class: `alloc!(uninit T)`,
/// `alloc!(zeroed T)`, `alloc!(box expr)`, `alloc!(box expr: T)`, `alloc!(vec [e; N])`,
/// `alloc!(vec [a, b])`. Use it as `specalloc::alloc!`, documented with examples there (the
/// facade's wrapper passes its own path as `crate = $crate;`, so a renamed dependency works).
#[proc_macro]
pub fn alloc(input: TokenStream) -> TokenStream {
    expand::alloc(input.into()).into()
}
