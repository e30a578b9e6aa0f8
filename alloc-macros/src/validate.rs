//! Validation: what `#[specialize]` may be put on.

use proc_macro2::{Span, TokenStream};
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::{Attribute, Item, ItemFn, ItemImpl, ItemMod, ItemTrait};

/// An item `#[specialize]` can rewrite.
pub enum Target {
    /// A function or method with a body (not `const fn`).
    Fn(ItemFn),
    /// An impl block: its methods are rewritten.
    Impl(ItemImpl),
    /// A trait: its provided (default) methods are rewritten.
    Trait(ItemTrait),
    /// An inline module: its functions, impls, traits and inline modules are rewritten.
    Mod(ItemMod),
}

const APPLIES_TO: &str =
    "`#[specialize]` applies to functions, methods, impl blocks, traits and inline modules";

/// Parses the annotated item and checks that it is one `#[specialize]` can rewrite. Errors
/// carry the span of the user's offending tokens.
pub fn target(item: TokenStream) -> syn::Result<Target> {
    let item: Item = match syn::parse2(item.clone()) {
        Ok(item) => item,
        Err(_) => {
            return Err(syn::Error::new_spanned(
                item,
                format!("{APPLIES_TO}; this is none of them"),
            ))
        }
    };
    match item {
        Item::Fn(f) => {
            if let Some(c) = &f.sig.constness {
                return Err(syn::Error::new(
                    c.span(),
                    "`#[specialize]` cannot be used on a `const fn`: its body may run at compile \
                     time, where the size-specialised routines cannot be called",
                ));
            }
            Ok(Target::Fn(f))
        }
        Item::Impl(i) => Ok(Target::Impl(i)),
        Item::Trait(t) => Ok(Target::Trait(t)),
        Item::Mod(m) => {
            if m.content.is_none() {
                return Err(syn::Error::new(
                    m.semi.span(),
                    "`#[specialize]` needs an inline module (`mod name { ... }`): the contents of \
                     a module in another file are not visible to it",
                ));
            }
            Ok(Target::Mod(m))
        }
        Item::Verbatim(tokens) => {
            let is_fn = tokens
                .clone()
                .into_iter()
                .any(|t| matches!(&t, proc_macro2::TokenTree::Ident(i) if i == "fn"));
            let what = if is_fn {
                format!("{APPLIES_TO}; a function without a body has nothing to rewrite")
            } else {
                APPLIES_TO.to_string()
            };
            Err(syn::Error::new_spanned(tokens, what))
        }
        other => {
            let (span, kind) = describe(&other);
            Err(syn::Error::new(
                span,
                format!("{APPLIES_TO}, not to {kind}"),
            ))
        }
    }
}

/// The span of an item's introducing keyword and what to call it in a message.
fn describe(item: &Item) -> (proc_macro2::Span, &'static str) {
    match item {
        Item::Struct(s) => (s.struct_token.span, "a struct"),
        Item::Enum(e) => (e.enum_token.span, "an enum"),
        Item::Union(u) => (u.union_token.span, "a union"),
        Item::Const(c) => (c.const_token.span, "a const item"),
        Item::Static(s) => (s.static_token.span, "a static"),
        Item::Type(t) => (t.type_token.span, "a type alias"),
        Item::Use(u) => (u.use_token.span, "a `use` declaration"),
        Item::ExternCrate(e) => (e.extern_token.span, "an `extern crate`"),
        Item::ForeignMod(f) => (f.abi.extern_token.span, "an `extern` block"),
        Item::Macro(m) => (m.mac.path.span(), "a macro invocation or definition"),
        Item::TraitAlias(t) => (t.trait_token.span, "a trait alias"),
        other => (other.span(), "this item"),
    }
}

/// Refuses a second `#[specialize]` on the item or inside it (`#[specialize]
/// #[specialize(report)]`): one attribute takes all the options, and a site must be rewritten
/// once.
pub fn not_repeated(target: &Target) -> syn::Result<()> {
    struct Find(Option<Attribute>);
    impl<'ast> Visit<'ast> for Find {
        fn visit_attribute(&mut self, a: &'ast Attribute) {
            let named = a
                .path()
                .segments
                .last()
                .is_some_and(|s| s.ident == "specialize");
            if named && self.0.is_none() {
                self.0 = Some(a.clone());
            }
        }
    }
    let mut find = Find(None);
    match target {
        Target::Fn(f) => find.visit_item_fn(f),
        Target::Impl(i) => find.visit_item_impl(i),
        Target::Trait(t) => find.visit_item_trait(t),
        Target::Mod(m) => find.visit_item_mod(m),
    }
    match find.0 {
        Some(attr) => Err(syn::Error::new_spanned(
            attr,
            "`#[specialize]` is applied more than once to this item (here, or to an item \
             inside it): use one attribute with all the options, as in \
             `#[specialize(report)]`",
        )),
        None => Ok(()),
    }
}

/// Without `crate = path`, the generated code names `::specalloc`: when this crate depends on
/// specalloc under another name (`sa = { package = "specalloc" }`), that path would not
/// resolve, so say which option fixes it, on the attribute's span.
pub fn not_renamed(span: Span) -> syn::Result<()> {
    let Some(dir) = std::env::var_os("CARGO_MANIFEST_DIR") else {
        return Ok(());
    };
    let path = std::path::Path::new(&dir).join("Cargo.toml");
    let Ok(manifest) = std::fs::read_to_string(path) else {
        return Ok(());
    };
    match renamed_in(&manifest) {
        Some(name) => Err(renamed_error(span, &name)),
        None => Ok(()),
    }
}

/// The name under which a manifest depends on the package `specalloc`, when it is not
/// `specalloc`: a dependency line `name = { package = "specalloc", ... }` or a table
/// `[dependencies.name]` (also under `dev-`, `build-` and target dependencies) holding
/// `package = "specalloc"`. A line scan, not a TOML parser (the macros depend on `syn`,
/// `quote` and `proc-macro2` only): enough for the way manifests write dependencies; anything
/// it misses still fails to compile, with rustc's error on `::specalloc`.
pub fn renamed_in(manifest: &str) -> Option<String> {
    let is_package = |s: &str| {
        let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        s.contains("package=\"specalloc\"") || s.contains("package='specalloc'")
    };
    // The dependency a `[...dependencies.NAME]` table header names.
    let mut table_dep: Option<String> = None;
    let mut in_deps = false;
    for raw in manifest.lines() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.starts_with('[') {
            let header = line.trim_matches(|c| c == '[' || c == ']').trim();
            table_dep = None;
            in_deps = false;
            if let Some(i) = header.find("dependencies") {
                let rest = &header[i + "dependencies".len()..];
                if rest.is_empty() {
                    in_deps = true;
                } else if let Some(name) = rest.strip_prefix('.') {
                    table_dep = Some(name.trim().trim_matches('"').to_string());
                }
            }
            continue;
        }
        if let Some(name) = &table_dep {
            if line.starts_with("package") && is_package(line) && name != "specalloc" {
                return Some(name.clone());
            }
        } else if in_deps {
            if let Some((key, value)) = line.split_once('=') {
                let key = key.trim().trim_matches('"');
                if key != "specalloc" && is_package(value) {
                    return Some(key.to_string());
                }
            }
        }
    }
    None
}

/// The error for a dependency renamed to `name`.
pub fn renamed_error(span: Span, name: &str) -> syn::Error {
    syn::Error::new(
        span,
        format!(
            "specalloc is a dependency of this crate under the name `{name}`, but the code \
             `#[specialize]` generates names `::specalloc`: pass the name with the `crate` \
             option, as in `#[{name}::specialize(crate = {name})]`"
        ),
    )
}
