#!/usr/bin/env bash
# Packages the five publishable crates as `cargo publish` would upload them, and verifies each
# package (builds it from the unpacked .crate), in dependency order:
#   1. specalloc-runtime and specalloc-macros: plain `cargo package` (their dependencies are all
#      on crates.io);
#   2. specalloc-malloc, then specalloc (the facade, whose optional `override` dependency is
#      specalloc-malloc) and specalloc-capi, whose dependencies among these are not on
#      crates.io yet: `cargo package` resolves them from a directory source holding every
#      crates.io dependency of the workspace (`cargo vendor`, from cargo's local cache) plus the
#      .crate files made before, so each verify build compiles against exactly what would be
#      published.
# Why not `cargo package --workspace`: for packages with `publish = false` cargo does not put the
# workspace's own packages in its local-registry overlay, so the facade's verify fails with "no
# matching package named `specalloc-macros`". `publish` stays false until a person decides to
# publish (then `cargo publish -p specalloc-runtime`, `-p specalloc-macros`, `-p specalloc-malloc`,
# `-p specalloc`, `-p specalloc-capi`, in that order, is the whole procedure).
#
#   scripts/package.sh [extra cargo package flags, e.g. --allow-dirty]
set -euo pipefail
cd "$(dirname "$0")/.."
target=${CARGO_TARGET_DIR:-$PWD/target}
cargo package -p specalloc-runtime -p specalloc-macros "$@"
vendor=$target/package-vendor
rm -rf "$vendor"
cargo vendor --versioned-dirs --quiet "$vendor" > /dev/null
# Adds the named crates' fresh .crate files to the directory source.
add() {
    for crate in "$@"; do
        file=$target/package/$crate-0.1.0.crate
        rm -rf "$vendor/$crate-0.1.0"
        tar -xzf "$file" -C "$vendor"
        sum=$(sha256sum "$file" | cut -d' ' -f1)
        printf '{"files":{},"package":"%s"}\n' "$sum" > "$vendor/$crate-0.1.0/.cargo-checksum.json"
    done
}
# Packages one crate against the directory source.
package() {
    local crate=$1
    shift
    cargo package -p "$crate" \
        --config 'source.crates-io.replace-with="package-vendor"' \
        --config "source.package-vendor.directory=\"$vendor\"" "$@"
}
add specalloc-runtime specalloc-macros
package specalloc-malloc "$@"
add specalloc-malloc
package specalloc "$@"
package specalloc-capi "$@"
ls -l "$target"/package/specalloc{,-runtime,-macros,-malloc,-capi}-0.1.0.crate
