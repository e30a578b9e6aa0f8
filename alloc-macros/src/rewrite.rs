//! The `syn::visit_mut` walker of `#[specialize]`: finds allocation sites in function bodies
//! and replaces each with a call of its size-specialised entry point (built by
//! [`crate::emit::Gen`]).
//!
//! Rewritten: `Box::new(e)`, `Box::<T>::new(e)`, `Box::new_uninit()`, `Box::new_zeroed()`,
//! `Box::pin(e)`, `Box::<T>::default()`, `Box::<[T]>::from([…])`, `Box::<[T; N]>::from([…])`,
//! `Box::<str>::from("…")`, `Box::new_uninit` and `Box::new_zeroed` used as values,
//! `String::from("…")`, `"…".to_string()` and `"…".to_owned()`. `vec!` is left to std in every
//! form (the elements of `std::vec!` and `alloc::vec!` are walked), and so are `Box::new` used
//! as a value and `Vec::with_capacity` and `String::with_capacity` (std's are inlined where
//! they are called; no call of an entry point is smaller). Closures, async blocks and the arguments of the
//! formatting macros (`format!`, `println!`, `write!`, `panic!`, ...) are walked; nested
//! items, const contexts, types, patterns, and the arguments of macros that show their input
//! (`assert!`, `dbg!`, `stringify!`, unknown macros, a bare `vec!`) are not. Left alone too,
//! so that the code behaves and warns as written: a site whose value is discarded
//! (`Box::new(x);`, `(Box::new(x));`, `{ Box::new(x) };`, for `#[must_use]`), a site with
//! attributes of its own (`#[cfg]` decides after the macro which elements there are), a site
//! whose operands `.await` (the future keeps its size), a bare `Box`, `Vec` or `String` in a
//! scope where an item of the annotated code or a type parameter shadows the name, and the
//! arguments of a formatting macro whose name the item defines or imports from elsewhere.

use std::collections::HashSet;

use proc_macro2::{Span, TokenStream};
use quote::{quote, ToTokens};
use syn::visit::Visit;
use syn::visit_mut::{self, VisitMut};
use syn::{
    Attribute, Block, Expr, ExprCall, ExprMethodCall, ExprPath, GenericArgument, Generics,
    ImplItem, Item, ItemFn, ItemImpl, ItemMod, ItemTrait, Lit, Macro, Pat, Path, PathArguments,
    Signature, Stmt, TraitItem, Type,
};

use crate::emit::Gen;
use crate::parse::{self, VecArgs};
use crate::validate::Target;

/// The standard-library type an associated function belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Family {
    Box,
    Vec,
    String,
}

/// A recognised `Ty::method` or `Ty::<T>::method` path.
struct Callee<'a> {
    family: Family,
    ty: Option<&'a Type>,
    method: String,
    span: Span,
    /// The path as the user wrote it (the std function, passed along in the expansion).
    path: TokenStream,
    /// Whether the type is named by itself (`Box::new`), not through `std::`/`alloc::`.
    bare: bool,
}

/// Macros whose arguments are walked (when they parse as comma-separated expressions): they
/// evaluate their arguments and never show their tokens. Any other macro (`assert!`,
/// `assert_eq!`, `debug_assert!`, `dbg!`, `stringify!`, `concat!`, user macros) is left
/// untouched: its panic or debug text shows the code as written.
const WALKED_MACROS: &[&str] = &[
    "format",
    "format_args",
    "print",
    "println",
    "eprint",
    "eprintln",
    "write",
    "writeln",
    "panic",
    "unreachable",
    "todo",
    "unimplemented",
];

/// Rewrites the bodies of the items it is given.
pub struct Rewriter<'g> {
    gen: &'g Gen,
    /// Type parameters in scope (of the enclosing impl or trait, and of the function).
    type_params: Vec<String>,
    /// Sites rewritten so far (to tell whether a macro's arguments changed).
    rewrites: usize,
    /// The names of the `macro_rules!` macros the annotated item defines: a formatting macro's
    /// name among them (`macro_rules! println`) is the user's macro, whose arguments are left
    /// as written.
    local_macros: HashSet<String>,
    /// The names among `Box`, `Vec`, `String`, `vec` and the walked formatting macros that an
    /// item of an enclosing block or module inside the annotated item declares or imports
    /// (`use inner::Box;`, `struct Vec;`, `use log::format;`): sites naming them are left alone
    /// in that scope.
    shadowed: Vec<String>,
}

impl<'g> Rewriter<'g> {
    /// A rewriter generating code with `gen`.
    pub fn new(gen: &'g Gen) -> Self {
        Rewriter {
            gen,
            type_params: Vec::new(),
            rewrites: 0,
            local_macros: HashSet::new(),
            shadowed: Vec::new(),
        }
    }

    /// Looks over the whole annotated item before the walk: the macros it defines.
    pub fn scan(&mut self, target: &Target) {
        #[derive(Default)]
        struct Scan {
            macros: HashSet<String>,
        }
        impl<'ast> Visit<'ast> for Scan {
            fn visit_item_macro(&mut self, m: &'ast syn::ItemMacro) {
                if let (true, Some(name)) = (m.mac.path.is_ident("macro_rules"), &m.ident) {
                    self.macros.insert(name.to_string());
                }
                syn::visit::visit_item_macro(self, m);
            }
        }
        let mut scan = Scan::default();
        match target {
            Target::Fn(f) => scan.visit_item_fn(f),
            Target::Impl(i) => scan.visit_item_impl(i),
            Target::Trait(t) => scan.visit_item_trait(t),
            Target::Mod(m) => scan.visit_item_mod(m),
        }
        self.local_macros = scan.macros;
    }

    /// Whether the callee's type is named bare (`Box::new`) where an item of the annotated
    /// code shadows that name (`std::boxed::Box::new` is std's wherever it is written).
    fn is_shadowed(&self, c: &Callee) -> bool {
        let name = match c.family {
            Family::Box => "Box",
            Family::Vec => "Vec",
            Family::String => "String",
        };
        c.bare
            && (self.shadowed.iter().any(|s| s == name)
                || self.type_params.iter().any(|s| s == name))
    }

    /// How many sites were rewritten (0: the item is emitted as written).
    pub fn rewrites(&self) -> usize {
        self.rewrites
    }

    /// A free function or a method (the caller checked it is not `const`).
    pub fn item_fn(&mut self, f: &mut ItemFn) {
        self.body(&f.sig, &mut f.block);
    }

    /// An impl block: its non-const methods.
    pub fn item_impl(&mut self, i: &mut ItemImpl) {
        let mark = self.push_generics(&i.generics);
        for item in &mut i.items {
            if let ImplItem::Fn(f) = item {
                if f.sig.constness.is_none() {
                    self.body(&f.sig, &mut f.block);
                }
            }
        }
        self.type_params.truncate(mark);
    }

    /// A trait: the bodies of its provided methods.
    pub fn item_trait(&mut self, t: &mut ItemTrait) {
        let mark = self.push_generics(&t.generics);
        for item in &mut t.items {
            if let TraitItem::Fn(f) = item {
                if let (None, Some(block)) = (&f.sig.constness, &mut f.default) {
                    self.body(&f.sig, block);
                }
            }
        }
        self.type_params.truncate(mark);
    }

    /// An inline module: its functions, impls, traits and inline modules.
    pub fn item_mod(&mut self, m: &mut ItemMod) {
        let Some((_, items)) = &mut m.content else {
            return;
        };
        // A module is a new scope: the names of enclosing modules are not in it.
        let outer = std::mem::replace(&mut self.shadowed, shadows(items.iter()));
        for item in items.iter_mut() {
            match item {
                Item::Fn(f) if f.sig.constness.is_none() => self.item_fn(f),
                Item::Impl(i) => self.item_impl(i),
                Item::Trait(t) => self.item_trait(t),
                Item::Mod(m) => self.item_mod(m),
                _ => {}
            }
        }
        self.shadowed = outer;
    }

    fn push_generics(&mut self, g: &Generics) -> usize {
        let mark = self.type_params.len();
        self.type_params
            .extend(g.type_params().map(|p| p.ident.to_string()));
        mark
    }

    fn body(&mut self, sig: &Signature, block: &mut Block) {
        let mark = self.push_generics(&sig.generics);
        self.visit_block_mut(block);
        self.type_params.truncate(mark);
    }

    /// The replacement of a call of a recognised associated function, if it is one we rewrite
    /// (its arguments have been walked already).
    fn call(&mut self, c: &Callee, call: &ExprCall) -> Option<TokenStream> {
        if self.is_shadowed(c) {
            return None;
        }
        let args: Vec<&Expr> = call.args.iter().collect();
        let std = c.path.clone();
        let out = match (c.family, c.method.as_str(), args.as_slice()) {
            // `Box::new(T::default())`: left for clippy's `box_default`.
            (Family::Box, "new", [e]) if is_default_call(e) => return None,
            (Family::Box, "new", [e]) => self.gen.boxed(c.span, std, e, "Box::new"),
            (Family::Box, "from", [e]) => self.box_from(c.span, std, c.ty?, e)?,
            (Family::Box, "default", []) if c.ty.is_some_and(fully_written) => {
                self.gen.box_default(c.span, std, c.ty?)
            }
            (Family::Box, "pin", [e]) => self.gen.pinned(c.span, std, e),
            (Family::Box, "new_uninit", []) => self.gen.uninit(c.span, std, false),
            (Family::Box, "new_zeroed", []) => self.gen.uninit(c.span, std, true),
            // `Vec::with_capacity(N)`, `String::with_capacity(N)`: left to std. std's are
            // inlined into the caller (a check of the size and a call of the allocator); any
            // entry point called in their place is a call of its own where rustc would have
            // inlined std's, which changes what the compiler inlines around the site (and
            // where it splits the crate into codegen units), so it can cost more than it saves.
            (Family::String, "from", [e]) => {
                let lit = non_empty(str_lit(e)?)?;
                self.gen.string_from(c.span, std, lit, "String::from")
            }
            _ => return None,
        };
        Some(self.gen.ending_at(out, call.paren_token.span.join()))
    }

    /// `Box::<T>::from(e)`, where the impl std picks is known from the tokens: `T` is written
    /// as an array or slice type and `e` is an array expression (`From<T> for Box<T>` and
    /// `From<[T; N]> for Box<[T]>`: no other impl, std's or another crate's, converts an
    /// array into those), or `T` is `str` and `e` a string literal (`From<&str> for Box<str>`).
    /// `Box::from(e)` without the type is left alone: std picks its impl from the type
    /// expected, which the macro cannot see (`Box<[T; N]>` or `Box<[T]>` for an array,
    /// `Box<str>` or `Box<dyn Error>` for a literal, or another crate's impl).
    fn box_from(&self, user: Span, std: TokenStream, ty: &Type, e: &Expr) -> Option<TokenStream> {
        match (ungroup_type(ty), ungroup(e)) {
            (Type::Array(_), Expr::Array(_) | Expr::Repeat(_)) => {
                Some(self.gen.boxed(user, std, e, "Box::from"))
            }
            (Type::Slice(_), Expr::Array(_) | Expr::Repeat(_)) => {
                Some(self.gen.box_slice(user, std, e))
            }
            (Type::Path(p), _) if p.qself.is_none() && p.path.is_ident("str") => {
                Some(self.gen.box_str(user, std, str_lit(e)?))
            }
            _ => None,
        }
    }

    /// `"lit".to_string()` / `"lit".to_owned()`.
    fn method_call(&mut self, m: &ExprMethodCall) -> Option<TokenStream> {
        if !m.attrs.is_empty() || m.turbofish.is_some() || !m.args.is_empty() {
            return None;
        }
        let what = match m.method.to_string().as_str() {
            "to_string" => "\"…\".to_string()",
            "to_owned" => "\"…\".to_owned()",
            _ => return None,
        };
        let lit = non_empty(str_lit(&m.receiver)?)?;
        // `<str>::to_string` resolves through the traits in scope, as the method call did
        // (an imported `ToString` or `ToOwned` stays used).
        let method = &m.method;
        let std = quote::quote_spanned!(method.span()=> <str>::#method);
        let out = self.gen.string_from(lit.span(), std, lit, what);
        Some(self.gen.ending_at(out, m.paren_token.span.join()))
    }

    /// `Box::new` (and `new_uninit`, `new_zeroed`) used as a value.
    fn fn_value(&mut self, p: &ExprPath) -> Option<TokenStream> {
        let c = callee_path(p)?;
        if self.is_shadowed(&c) {
            return None;
        }
        let entry = match (c.family, c.method.as_str()) {
            // `Box::new` as a value (`.map(Box::new)`) is left to std: any function item put in
            // its place would take the value as its own argument, one more copy of it on the
            // stack in a debug build, and a function pointer would not be zero-sized as
            // `Box::new` is (in a closure or a future that holds it).
            (Family::Box, "new_uninit") => "uninit",
            (Family::Box, "new_zeroed") => "zeroed",
            _ => return None,
        };
        Some(self.gen.fn_value(c.span, entry, c.ty))
    }

    /// A macro invocation in expression or statement position: never replaced; the sites in
    /// its arguments are rewritten in place when it is one of std's that evaluates them (the
    /// formatting macros, `std::vec!`) and they parse as expressions (its tokens are left
    /// untouched when nothing inside changed).
    fn mac(&mut self, mac: &mut Macro) {
        let _ = self.mac_args(mac);
    }

    fn mac_args(&mut self, mac: &mut Macro) -> Option<()> {
        let before = self.rewrites;
        if is_vec_macro(&mac.path) {
            // `vec!` is left to std, every form: its code is std's by construction (the
            // zeroed memory of a zero element of any type std knows, the drop order of a
            // panicking clone, zero-sized elements, the common type of the elements of a
            // list, its lints). A bare `vec!` may be a macro of the user's that the attribute
            // cannot see (one defined at the crate root), which may show its tokens: it is
            // left whole, its elements as written. `std::vec!` and `alloc::vec!` are std's:
            // their elements are walked, as a formatting macro's are.
            if mac.path.segments.len() == 1 {
                return None;
            }
            match parse::vec_args(&mac.tokens)? {
                VecArgs::Elem(mut e, semi, mut n) => {
                    self.visit_expr_mut(&mut e);
                    self.visit_expr_mut(&mut n);
                    if self.rewrites != before {
                        mac.tokens = quote!(#e #semi #n);
                    }
                }
                VecArgs::List(mut list) => {
                    for e in list.iter_mut() {
                        self.visit_expr_mut(e);
                    }
                    if self.rewrites != before {
                        mac.tokens = list.into_token_stream();
                    }
                }
            }
            Some(())
        } else {
            let name = mac.path.segments.last()?.ident.to_string();
            if !WALKED_MACROS.contains(&name.as_str())
                || (mac.path.segments.len() == 1
                    && (self.local_macros.contains(&name) || self.shadowed.contains(&name)))
            {
                // Not std's (or perhaps not): a macro of the user's may show its tokens.
                return None;
            }
            let mut list = parse::expr_list(&mac.tokens)?;
            for e in list.iter_mut() {
                self.visit_expr_mut(e);
            }
            if self.rewrites != before {
                mac.tokens = list.into_token_stream();
            }
            Some(())
        }
    }

    fn stmt(&mut self, s: &mut Stmt) {
        if let Stmt::Expr(e, Some(_)) = s {
            if discarded_site(e) {
                // `Box::new(x);`: the value is dropped at once, so `#[must_use]` warns; left
                // as written, it warns as it does without the attribute.
                return;
            }
        }
        if let Stmt::Macro(sm) = s {
            if sm.attrs.is_empty() && !(sm.semi_token.is_some() && is_vec_macro(&sm.mac.path)) {
                self.mac(&mut sm.mac);
            }
            return;
        }
        visit_mut::visit_stmt_mut(self, s);
    }
}

impl VisitMut for Rewriter<'_> {
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        let replacement = match e {
            // Already generated (a second pass over the same tokens): left as it is.
            Expr::Call(call) if is_generated(&call.func) => None,
            // `#[cfg(…)] Box::new(x)`, `#[allow(…)] String::from("x")`: a site with
            // attributes of its own is left as written, attributes and all, so that they mean
            // what they mean without the macro (a `cfg`'d-out element of a tuple, an array or a
            // call vanishes, unevaluated; a lint level covers the code written). Its arguments
            // are walked.
            Expr::Call(call) if !call.attrs.is_empty() && callee(&call.func).is_some() => {
                for arg in call.args.iter_mut() {
                    self.visit_expr_mut(arg);
                }
                None
            }
            Expr::Call(call) => match callee(&call.func) {
                Some(c) => {
                    let awaited = call.args.iter().any(awaits);
                    // Walk the arguments only: the callee is the path being rewritten.
                    for arg in call.args.iter_mut() {
                        self.visit_expr_mut(arg);
                    }
                    if awaited {
                        // `Box::new(f().await)`: left as written, so that the future holds
                        // across the `.await` what it holds without the macro (the expansion
                        // would hold its function pointer too).
                        None
                    } else {
                        self.call(&c, call)
                    }
                }
                None => {
                    visit_mut::visit_expr_call_mut(self, call);
                    None
                }
            },
            // `Box::new(x).len()`, `vec![1, 2].as_slice()`: a box or vector made only to call a
            // method on is left as written, so that rustc's `unused_allocation` and clippy's
            // `useless_vec` still fire (and any borrow error reads as without the attribute);
            // the box's argument is walked.
            Expr::MethodCall(m) if is_receiver_site(&m.receiver) => {
                let mut receiver = &mut *m.receiver;
                while let Expr::Paren(p) = receiver {
                    receiver = &mut *p.expr;
                }
                if let Expr::Call(call) = receiver {
                    for arg in call.args.iter_mut() {
                        self.visit_expr_mut(arg);
                    }
                }
                for arg in m.args.iter_mut() {
                    self.visit_expr_mut(arg);
                }
                None
            }
            Expr::MethodCall(m) => {
                visit_mut::visit_expr_method_call_mut(self, m);
                self.method_call(m)
            }
            Expr::Path(p) => self.fn_value(p),
            Expr::Macro(m) if m.attrs.is_empty() => {
                self.mac(&mut m.mac);
                None
            }
            Expr::Macro(_) => None,
            // Const contexts: evaluated at compile time.
            Expr::Const(_) => None,
            Expr::Repeat(r) => {
                // `[x; LEN]`: `x` runs, `LEN` is a const.
                self.visit_expr_mut(&mut r.expr);
                None
            }
            // `&vec![..]` and `for x in vec![..]`: left for clippy's `useless_vec`.
            Expr::Reference(r) if is_vec_expr(&r.expr) => None,
            Expr::ForLoop(f) if is_vec_expr(&f.expr) => {
                self.visit_block_mut(&mut f.body);
                None
            }
            _ => {
                visit_mut::visit_expr_mut(self, e);
                None
            }
        };
        if let Some(new) = replacement {
            self.rewrites += 1;
            *e = Expr::Verbatim(new);
        }
    }

    fn visit_block_mut(&mut self, b: &mut Block) {
        // The items of a block are in scope in the whole block, before them too.
        let mark = self.shadowed.len();
        self.shadowed
            .extend(shadows(b.stmts.iter().filter_map(|s| match s {
                Stmt::Item(i) => Some(i),
                _ => None,
            })));
        for s in b.stmts.iter_mut() {
            self.stmt(s);
        }
        self.shadowed.truncate(mark);
    }

    fn visit_stmt_mut(&mut self, s: &mut Stmt) {
        self.stmt(s);
    }

    // Left alone: nested items, types (array lengths), patterns, attributes and generic
    // arguments (const generic arguments).
    fn visit_item_mut(&mut self, _: &mut Item) {}
    fn visit_type_mut(&mut self, _: &mut Type) {}
    fn visit_pat_mut(&mut self, _: &mut Pat) {}
    fn visit_attribute_mut(&mut self, _: &mut Attribute) {}
    fn visit_generic_argument_mut(&mut self, _: &mut GenericArgument) {}
}

/// A string literal expression (possibly in an invisible group from a `macro_rules!`).
fn str_lit(e: &Expr) -> Option<&syn::LitStr> {
    match e {
        Expr::Lit(l) if l.attrs.is_empty() => match &l.lit {
            Lit::Str(s) => Some(s),
            _ => None,
        },
        Expr::Group(g) if g.attrs.is_empty() => str_lit(&g.expr),
        _ => None,
    }
}

fn callee(e: &Expr) -> Option<Callee<'_>> {
    match e {
        Expr::Path(p) => callee_path(p),
        _ => None,
    }
}

/// Recognises `Box::f`, `Box::<T>::f`, `std::boxed::Box::f`, `alloc::boxed::Box::f` (with or
/// without a leading `::`, or under a re-export of std, `crate::lib::std::boxed::Box::f`), and
/// likewise `Vec` (`std::vec`) and `String` (`std::string`).
fn callee_path(p: &ExprPath) -> Option<Callee<'_>> {
    if !p.attrs.is_empty() || p.qself.is_some() {
        return None;
    }
    let path = &p.path;
    let segs: Vec<_> = path.segments.iter().collect();
    let [prefix @ .., ty_seg, method] = segs.as_slice() else {
        return None;
    };
    if !method.arguments.is_none() {
        return None;
    }
    let (family, module) = match ty_seg.ident.to_string().as_str() {
        "Box" => (Family::Box, "boxed"),
        "Vec" => (Family::Vec, "vec"),
        "String" => (Family::String, "string"),
        _ => return None,
    };
    // `std::vec::Vec`, and a re-export of std's modules under it (`crate::lib::std::vec::Vec`,
    // as nom writes it): the path ends in `std::vec` or `alloc::vec`.
    let prefix_ok = match prefix {
        [] => path.leading_colon.is_none(),
        [outer @ .., krate, m] => {
            outer
                .iter()
                .chain([krate, m])
                .all(|s| s.arguments.is_none())
                && (krate.ident == "std" || krate.ident == "alloc")
                && m.ident == module
        }
        _ => false,
    };
    if !prefix_ok {
        return None;
    }
    let ty = match &ty_seg.arguments {
        PathArguments::None => None,
        PathArguments::AngleBracketed(a) if family != Family::String && a.args.len() == 1 => {
            match a.args.first() {
                Some(GenericArgument::Type(t)) => Some(t),
                _ => return None,
            }
        }
        _ => return None,
    };
    Some(Callee {
        family,
        ty,
        method: method.ident.to_string(),
        span: path.segments.first()?.ident.span(),
        path: p.to_token_stream(),
        bare: prefix.is_empty(),
    })
}

/// The names among `Box`, `Vec`, `String`, `vec` and the walked formatting macros that `items`
/// declare or import (other than std's own, `use std::boxed::Box;`, `use alloc::vec;`,
/// `use std::println;`): `use inner::Box;`, `use inner::Thing as Vec;`, `struct String;`,
/// `type Box<T> = …;`, `use log::format;`. A glob import (`use inner::*;`) names nothing the
/// tokens show (see `docs/macros.md`, "Known limits").
fn shadows<'a>(items: impl Iterator<Item = &'a Item>) -> Vec<String> {
    fn shadowable(name: &str) -> bool {
        ["Box", "Vec", "String", "vec"].contains(&name) || WALKED_MACROS.contains(&name)
    }
    fn std_path(path: &[String], name: &str, imported: &str) -> bool {
        let module = match imported {
            "Box" => "boxed",
            "Vec" => "vec",
            "String" => "string",
            _ => "",
        };
        let macro_name = imported == "vec" || WALKED_MACROS.contains(&imported);
        name == imported
            && match path {
                [krate] => macro_name && (krate == "std" || krate == "alloc" || krate == "core"),
                [krate, m] => (krate == "std" || krate == "alloc") && m == module,
                _ => false,
            }
    }
    fn walk(tree: &syn::UseTree, path: &mut Vec<String>, out: &mut Vec<String>) {
        match tree {
            syn::UseTree::Path(p) => {
                path.push(p.ident.to_string());
                walk(&p.tree, path, out);
                path.pop();
            }
            syn::UseTree::Name(n) => {
                let name = n.ident.to_string();
                if shadowable(&name) && !std_path(path, &name, &name) {
                    out.push(name);
                }
            }
            syn::UseTree::Rename(r) => {
                let (from, to) = (r.ident.to_string(), r.rename.to_string());
                if shadowable(&to) && !std_path(path, &to, &from) {
                    out.push(to);
                }
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    walk(t, path, out);
                }
            }
            syn::UseTree::Glob(_) => {}
        }
    }
    let mut out = Vec::new();
    for item in items {
        let ident = match item {
            Item::Use(u) => {
                walk(&u.tree, &mut Vec::new(), &mut out);
                continue;
            }
            Item::Struct(i) => &i.ident,
            Item::Enum(i) => &i.ident,
            Item::Union(i) => &i.ident,
            Item::Type(i) => &i.ident,
            Item::Trait(i) => &i.ident,
            Item::Macro(m) => match &m.ident {
                Some(i) => i,
                None => continue,
            },
            _ => continue,
        };
        if shadowable(&ident.to_string()) {
            out.push(ident.to_string());
        }
    }
    out
}

/// Whether evaluating `e` may suspend the enclosing `async` body: an `.await` in it, outside
/// the closures, `async` blocks and items nested in it (in a macro's tokens, any `await`).
fn awaits(e: &Expr) -> bool {
    struct Awaits(bool);
    impl<'ast> Visit<'ast> for Awaits {
        fn visit_expr_await(&mut self, _: &'ast syn::ExprAwait) {
            self.0 = true;
        }
        fn visit_expr_closure(&mut self, _: &'ast syn::ExprClosure) {}
        fn visit_expr_async(&mut self, _: &'ast syn::ExprAsync) {}
        fn visit_item(&mut self, _: &'ast Item) {}
        fn visit_macro(&mut self, m: &'ast Macro) {
            fn any_await(tokens: TokenStream) -> bool {
                tokens.into_iter().any(|t| match t {
                    proc_macro2::TokenTree::Ident(i) => i == "await",
                    proc_macro2::TokenTree::Group(g) => any_await(g.stream()),
                    _ => false,
                })
            }
            self.0 |= any_await(m.tokens.clone());
        }
    }
    let mut a = Awaits(false);
    a.visit_expr(e);
    a.0
}

/// `e` without the invisible groups a `macro_rules!` wraps around its fragments.
fn ungroup(e: &Expr) -> &Expr {
    match e {
        Expr::Group(g) if g.attrs.is_empty() => ungroup(&g.expr),
        _ => e,
    }
}

/// `t` without parentheses and invisible groups.
fn ungroup_type(t: &Type) -> &Type {
    match t {
        Type::Group(g) => ungroup_type(&g.elem),
        Type::Paren(p) => ungroup_type(&p.elem),
        _ => t,
    }
}

/// Whether a type is written out whole: no `_`, `impl Trait` or macro anywhere in it, so that
/// the compiler knows it where the site is (`Box::<T>::default()` picks its `make` there).
fn fully_written(t: &Type) -> bool {
    struct Holes(bool);
    impl<'ast> Visit<'ast> for Holes {
        fn visit_type(&mut self, t: &'ast Type) {
            match t {
                Type::Infer(_) | Type::ImplTrait(_) | Type::Macro(_) | Type::Verbatim(_) => {
                    self.0 = true;
                }
                _ => syn::visit::visit_type(self, t),
            }
        }
    }
    let mut holes = Holes(false);
    holes.visit_type(t);
    !holes.0
}

/// `""` is left for clippy's `manual_string_new` (`String::new()` allocates nothing anyway).
fn non_empty(lit: &syn::LitStr) -> Option<&syn::LitStr> {
    (!lit.value().is_empty()).then_some(lit)
}

/// `Default::default()`, `T::default()`, `<T as Default>::default()`: no arguments, a path
/// ending in `default`.
fn is_default_call(e: &Expr) -> bool {
    match e {
        Expr::Call(c) if c.args.is_empty() => match &*c.func {
            Expr::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "default"),
            _ => false,
        },
        _ => false,
    }
}

/// A `Box::new(..)` call or a `vec!` invocation (the receivers left alone), in parentheses
/// too (`(Box::new([1, 2])).len()`: `unused_allocation` looks through them).
fn is_receiver_site(e: &Expr) -> bool {
    match e {
        Expr::Paren(p) => is_receiver_site(&p.expr),
        Expr::Call(call) => callee(&call.func)
            .is_some_and(|c| c.family == Family::Box && c.method == "new" && call.args.len() == 1),
        _ => is_vec_expr(e),
    }
}

/// A `vec!` invocation.
fn is_vec_expr(e: &Expr) -> bool {
    matches!(e, Expr::Macro(m) if is_vec_macro(&m.mac.path))
}

/// Whether a callee is one of the facade's `__private` entry points (code this macro made).
fn is_generated(f: &Expr) -> bool {
    match f {
        Expr::Path(p) => p.path.segments.iter().any(|s| s.ident == "__private"),
        _ => false,
    }
}

/// Whether a statement's expression (its value discarded) is itself an allocation site, or
/// yields one through parentheses or a block's value (`(Box::new(1));`,
/// `{ Box::new(2) };`, `unsafe { Box::new(3) };`): rustc's `unused_must_use` looks through
/// those to the site.
fn discarded_site(e: &Expr) -> bool {
    fn tail(b: &Block) -> bool {
        matches!(b.stmts.last(), Some(Stmt::Expr(e, None)) if discarded_site(e))
            || matches!(b.stmts.last(), Some(Stmt::Macro(m)) if m.semi_token.is_none() && is_vec_macro(&m.mac.path))
    }
    match e {
        Expr::Paren(p) => discarded_site(&p.expr),
        Expr::Group(g) => discarded_site(&g.expr),
        Expr::Block(b) if b.label.is_none() => tail(&b.block),
        Expr::Unsafe(u) => tail(&u.block),
        Expr::Call(call) => callee(&call.func).is_some(),
        Expr::MethodCall(m) => {
            matches!(m.method.to_string().as_str(), "to_string" | "to_owned")
                && str_lit(&m.receiver).is_some()
        }
        Expr::Macro(m) => is_vec_macro(&m.mac.path),
        _ => false,
    }
}

/// `vec`, `std::vec`, `alloc::vec` (with or without a leading `::` on the two-segment forms).
fn is_vec_macro(path: &Path) -> bool {
    let segs: Vec<_> = path.segments.iter().collect();
    if segs.iter().any(|s| !s.arguments.is_none()) {
        return false;
    }
    match segs.as_slice() {
        [v] => path.leading_colon.is_none() && v.ident == "vec",
        [krate, v] => (krate.ident == "std" || krate.ident == "alloc") && v.ident == "vec",
        _ => false,
    }
}
