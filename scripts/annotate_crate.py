#!/usr/bin/env python3
"""Annotates a whole Rust crate with `#[specalloc::specialize]`, for the real-crates trial.

Every `.rs` file under the crate directory (except `target/` and build scripts, which cannot
use the crate's normal dependencies) gets `#[specalloc::specialize]` in front of each item the
attribute may be put on:

  * a `fn` with a body that is not a `const fn` (free function, `async`, `unsafe`,
    `extern "C"`),
  * an `impl` block (`unsafe impl` too),
  * a `trait` (not a trait alias),
  * an inline `mod name { ... }` (not `mod name;`).

An annotated item is walked whole by the attribute (an impl's methods, a module's items,
recursively), and a second `#[specialize]` inside an annotated item is a compile error, so the
script annotates the outermost such items: the items of each file, and the items found where no
annotated item encloses them (in the body of a `const fn`, in a `const`/`static` initializer,
in a `const _: () = { ... };` block), at any depth. Left alone, because their tokens are not
items the attribute can see: everything inside a macro invocation or a `macro_rules!` body
(`cfg_if! { ... }`, `quickcheck! { ... }`), and `extern { ... }` blocks.

The attribute is inserted on the item's first line, after its attributes and doc comments and
just before its visibility/qualifiers, so that line numbers (panic locations, `line!()`,
snapshot files) do not move.

Usage:
  scripts/annotate_crate.py CRATE_DIR [--dry-run] [--install]

  --dry-run   count only, write nothing
  --install   also add `specalloc::install!();` to every test binary: at the end of the
              library root under `#[cfg(test)]`, and at the end of each integration test crate
              root given with --test-root (repeatable) or, by default, each `tests/*.rs` and
              `tests/*/main.rs`; with it, a test `specalloc_trial_installed` asserting that
              specalloc is the global allocator (`specalloc::spec::installed()`)
  --lib PATH  the library root (default src/lib.rs)

It prints one line per file with annotations and a total line:
  TOTAL annotations=N fn=.. impl=.. trait=.. mod=.. skipped_macro_bodies=.. skipped_extern=..
The crate's Cargo.toml must depend on specalloc (`cargo add specalloc --path PATH`).

The trial itself (plain, annotated and installed copies of each crate, each suite run with
`cargo test`, the counts compared) is scripts/trial_crates.sh, which calls this script.
"""

import argparse
import os
import re
import sys

ATTR = "#[specalloc::specialize] "
INSTALL_MARK = "// ---- added by specalloc's scripts/annotate_crate.py --install ----"


# --- tokens ---------------------------------------------------------------------------------

class Tok:
    __slots__ = ("kind", "text", "start", "match")

    def __init__(self, kind, text, start):
        self.kind = kind  # ident, lit, punct, open, close
        self.text = text
        self.start = start
        self.match = None  # for open/close: index of the matching delimiter

    def __repr__(self):
        return f"{self.kind}:{self.text}@{self.start}"


def is_ident_start(c):
    return c == "_" or c.isalpha()


def is_ident_char(c):
    return c == "_" or c.isalnum()


def skip_string(src, i):
    """i at the opening quote of a "..." string; returns the index after the closing quote."""
    i += 1
    n = len(src)
    while i < n:
        c = src[i]
        if c == "\\":
            i += 2
            continue
        if c == '"':
            return i + 1
        i += 1
    raise ValueError("unterminated string")


def skip_raw_string(src, i):
    """i at the `r` of r"..." / r#"..."#; returns the index after the closing delimiter."""
    j = i + 1
    hashes = 0
    while src[j] == "#":
        hashes += 1
        j += 1
    assert src[j] == '"'
    end = src.find('"' + "#" * hashes, j + 1)
    if end < 0:
        raise ValueError("unterminated raw string")
    return end + 1 + hashes


def tokenize(src):
    toks = []
    i, n = 0, len(src)
    stack = []
    while i < n:
        c = src[i]
        if c.isspace():
            i += 1
            continue
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j + 1
            continue
        if src.startswith("/*", i):
            depth, j = 1, i + 2
            while depth and j < n:
                if src.startswith("/*", j):
                    depth += 1
                    j += 2
                elif src.startswith("*/", j):
                    depth -= 1
                    j += 2
                else:
                    j += 1
            i = j
            continue
        start = i
        # String-like literals with prefixes: r"", r#""#, b"", br"", c"", cr"", b''.
        m = re.match(r'(br|cr|r)(#*)"', src[i:i + 260])
        if m:
            i = skip_raw_string(src, i + len(m.group(1)) - 1)
            toks.append(Tok("lit", src[start:i], start))
            continue
        if src.startswith('b"', i) or src.startswith('c"', i):
            i = skip_string(src, i + 1)
            toks.append(Tok("lit", src[start:i], start))
            continue
        if src.startswith("b'", i):
            j = i + 2
            if src[j] == "\\":
                j += 2
            j = src.find("'", j)
            i = j + 1
            toks.append(Tok("lit", src[start:i], start))
            continue
        if src.startswith("r#", i) and i + 2 < n and is_ident_start(src[i + 2]):
            j = i + 2
            while j < n and is_ident_char(src[j]):
                j += 1
            toks.append(Tok("ident", src[start:j], start))
            i = j
            continue
        if is_ident_start(c):
            j = i + 1
            while j < n and is_ident_char(src[j]):
                j += 1
            toks.append(Tok("ident", src[start:j], start))
            i = j
            continue
        if c.isdigit():
            j = i + 1
            while j < n and (is_ident_char(src[j]) or (src[j] == "." and j + 1 < n
                                                         and src[j + 1].isdigit()
                                                         and src[j - 1] != ".")):
                j += 1
            toks.append(Tok("lit", src[start:j], start))
            i = j
            continue
        if c == '"':
            i = skip_string(src, i)
            toks.append(Tok("lit", src[start:i], start))
            continue
        if c == "'":
            # A char literal ('a', '\n', '\u{1F600}') or a lifetime/label ('a, 'static).
            if i + 1 < n and src[i + 1] == "\\":
                j = i + 2
                if src[j] == "u":
                    j = src.find("}", j) + 1
                else:
                    j += 1
                # Past the escape: the closing quote.
                j = src.find("'", j)
                i = j + 1
                toks.append(Tok("lit", src[start:i], start))
                continue
            if i + 2 < n and src[i + 2] == "'":
                i += 3
                toks.append(Tok("lit", src[start:i], start))
                continue
            j = i + 1
            while j < n and is_ident_char(src[j]):
                j += 1
            toks.append(Tok("lifetime", src[start:j], start))
            i = j
            continue
        if c in "([{":
            stack.append(len(toks))
            toks.append(Tok("open", c, start))
            i += 1
            continue
        if c in ")]}":
            t = Tok("close", c, start)
            if stack:
                o = stack.pop()
                toks[o].match = len(toks)
                t.match = o
            toks.append(t)
            i += 1
            continue
        toks.append(Tok("punct", c, start))
        i += 1
    if stack:
        raise ValueError("unbalanced delimiters")
    return toks


# --- items ----------------------------------------------------------------------------------

class Counts:
    def __init__(self):
        self.by_kind = {"fn": 0, "impl": 0, "trait": 0, "mod": 0}
        self.skipped_macro_bodies = 0
        self.skipped_extern = 0
        self.const_fn_bodies = 0

    def total(self):
        return sum(self.by_kind.values())

    def add(self, other):
        for k, v in other.by_kind.items():
            self.by_kind[k] += v
        self.skipped_macro_bodies += other.skipped_macro_bodies
        self.skipped_extern += other.skipped_extern
        self.const_fn_bodies += other.const_fn_bodies

    def line(self):
        k = self.by_kind
        return (f"annotations={self.total()} fn={k['fn']} impl={k['impl']} trait={k['trait']} "
                f"mod={k['mod']} skipped_macro_bodies={self.skipped_macro_bodies} "
                f"skipped_extern={self.skipped_extern} const_fn_bodies={self.const_fn_bodies}")


def is_ident(t, text=None):
    return t is not None and t.kind == "ident" and (text is None or t.text == text)


def is_punct(t, ch):
    return t is not None and t.kind == "punct" and t.text == ch


def is_open(t, ch=None):
    return t is not None and t.kind == "open" and (ch is None or t.text == ch)


def find_body(toks, j):
    """From the item keyword at j, the index of the body's `{` or of the ending `;` (groups in
    parentheses and brackets skipped), or None."""
    n = len(toks)
    while j < n:
        t = toks[j]
        if t.kind == "open":
            if t.text == "{":
                return j
            j = t.match + 1
            continue
        if t.kind == "close":
            return None
        if is_punct(t, ";"):
            return j
        j += 1
    return None


def annotate_tokens(toks):
    """Returns (insertion offsets, Counts)."""
    counts = Counts()
    inserts = []
    n = len(toks)

    def at(k):
        return toks[k] if 0 <= k < n else None

    i = 0
    boundary = True  # the previous token ends an item/statement (or starts a block/file)
    while i < n:
        t = toks[i]
        # Macro invocations and macro_rules!: the tokens are the macro's, not items.
        if t.kind == "ident" and is_punct(at(i + 1), "!"):
            k = i + 2
            if is_ident(at(k)) and t.text == "macro_rules":
                k += 1
            if is_open(at(k)):
                counts.skipped_macro_bodies += 1
                i = toks[k].match + 1
                boundary = True
                continue
        if boundary:
            if is_punct(t, "#"):
                k = i + 1
                if is_punct(at(k), "!"):
                    k += 1
                if is_open(at(k), "["):
                    i = toks[k].match + 1
                    continue  # still at an item's start
            # Visibility and qualifiers.
            j = i
            if is_ident(at(j), "pub"):
                j += 1
                if is_open(at(j), "("):
                    j = toks[j].match + 1
            quals = set()
            skipped_extern = False
            while True:
                u = at(j)
                if is_ident(u) and u.text in ("default", "const", "async", "unsafe", "safe",
                                              "auto"):
                    # `const NAME` / `unsafe {` / `async move {` are not qualifiers of an item:
                    # the keyword check below leaves them to the plain scan.
                    quals.add(u.text)
                    j += 1
                    continue
                if is_ident(u, "extern"):
                    k = j + 1
                    if at(k) is not None and at(k).kind == "lit":
                        k += 1
                    if is_open(at(k), "{"):
                        counts.skipped_extern += 1
                        i = toks[k].match + 1
                        skipped_extern = True
                        break
                    quals.add("extern")
                    j = k
                    continue
                break
            if skipped_extern:
                continue  # at an item's start again
            kw = at(j)
            if is_ident(kw) and kw.text in ("fn", "impl", "trait", "mod"):
                end = find_body(toks, j + 1)
                annotate = False
                if end is not None and is_open(toks[end], "{"):
                    if kw.text == "fn":
                        if "const" in quals:
                            counts.const_fn_bodies += 1  # its body is scanned for items
                        else:
                            annotate = True
                    elif kw.text == "trait":
                        annotate = not any(is_punct(toks[k], "=") for k in range(j, end))
                    elif kw.text == "mod":
                        annotate = is_ident(at(j + 1)) and end == j + 2
                    else:
                        annotate = True
                if annotate:
                    inserts.append(toks[i].start)
                    counts.by_kind[kw.text] += 1
                    i = toks[end].match + 1
                    boundary = True
                    continue
                # Not annotated: scan on (a const fn's body may hold items).
                i = j + 1
                boundary = False
                continue
        # Plain scan.
        if t.kind == "open":
            boundary = t.text == "{"
        elif t.kind == "close":
            boundary = t.text == "}"
        else:
            boundary = is_punct(t, ";")
        i += 1
    return inserts, counts


def annotate_source(src):
    toks = tokenize(src)
    inserts, counts = annotate_tokens(toks)
    out = []
    last = 0
    for off in inserts:
        out.append(src[last:off])
        out.append(ATTR)
        last = off
    out.append(src[last:])
    return "".join(out), counts


# --- install --------------------------------------------------------------------------------

def install_code(cfg):
    c = f"{cfg}\n" if cfg else ""
    return f"""
{INSTALL_MARK}
{c}specalloc::install!();
{c}#[test]
fn specalloc_trial_installed() {{
    assert!(specalloc::spec::installed(), "specalloc is not the global allocator");
}}
"""


def append_install(path, cfg):
    with open(path, encoding="utf-8") as f:
        src = f.read()
    if INSTALL_MARK in src:
        return False
    with open(path, "a", encoding="utf-8") as f:
        f.write(install_code(cfg))
    return True


def included_modules(root, rel):
    """The files (relative to root) of the out-of-line modules `mod NAME;` (with or without
    `#[path = "..."]`) declared at the start of a line in the crate root file rel."""
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        src = f.read()
    base = os.path.dirname(rel)
    out = []
    for m in re.finditer(r'(?m)^(?:\s*#\[path\s*=\s*"([^"]+)"\]\s*)?\s*'
                         r'(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', src):
        if m.group(1):
            cands = [os.path.join(base, m.group(1))]
        else:
            cands = [os.path.join(base, m.group(2) + ".rs"),
                     os.path.join(base, m.group(2), "mod.rs")]
        out += [os.path.normpath(c) for c in cands if os.path.exists(os.path.join(root, c))]
    return out


# --- driver ---------------------------------------------------------------------------------

def rust_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in ("target", ".git"))
        for name in sorted(filenames):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)
            if rel == "build.rs":
                continue
            yield path, rel


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("crate_dir")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument("--install", action="store_true")
    ap.add_argument("--lib", default="src/lib.rs")
    ap.add_argument("--test-root", action="append", default=[])
    ap.add_argument("--exclude", action="append", default=[],
                    help="a file (relative path) to leave as it is, e.g. a custom build script")
    args = ap.parse_args()
    root = args.crate_dir

    total = Counts()
    files = 0
    for path, rel in rust_files(root):
        if rel in args.exclude:
            continue
        with open(path, encoding="utf-8") as f:
            src = f.read()
        try:
            new, counts = annotate_source(src)
        except (ValueError, IndexError, AssertionError) as e:
            print(f"{rel}: could not scan ({e}); left as it is", file=sys.stderr)
            continue
        total.add(counts)
        if counts.total():
            files += 1
            print(f"{rel}: {counts.line()}")
            if not args.dry_run:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(new)

    installed = []
    if args.install and not args.dry_run:
        lib = os.path.join(root, args.lib)
        if os.path.exists(lib) and append_install(lib, "#[cfg(test)]"):
            installed.append(args.lib)
        roots = args.test_root
        if not roots:
            tdir = os.path.join(root, "tests")
            if os.path.isdir(tdir):
                for name in sorted(os.listdir(tdir)):
                    p = os.path.join("tests", name)
                    if name.endswith(".rs"):
                        roots.append(p)
                    elif os.path.exists(os.path.join(root, p, "main.rs")):
                        roots.append(os.path.join(p, "main.rs"))
        root_set = {os.path.normpath(r) for r in roots}
        for rel in roots:
            p = os.path.join(root, rel)
            included = [m for m in included_modules(root, rel) if m in root_set]
            if included:
                # Another test crate's root, declared here as a module (`mod iter;`), installs:
                # a second install!() would be a second global allocator.
                print(f"{rel}: not installed: its module {included[0]} installs")
                continue
            with open(p, encoding="utf-8") as f:
                if "global_allocator" in f.read():
                    print(f"{rel}: has its own #[global_allocator]; not installed")
                    continue
            if append_install(p, ""):
                installed.append(rel)
        for rel in installed:
            print(f"installed: {rel}")

    print(f"TOTAL files={files} {total.line()} installed={len(installed)}")


if __name__ == "__main__":
    main()
