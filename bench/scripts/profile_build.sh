# Sourced by spec_cost.sh and suite_spec_cost.sh: `cargo build` in one of the four profiles the
# issue-22 tables compare (dev, release, thin LTO, fat LTO with one codegen unit).
cargo_build() { # profile target-dir cargo-args...
    local p=$1 dir=$2
    shift 2
    case $p in
        dev) cargo build -q --target-dir "$dir" "$@" ;;
        release) cargo build -q --release --target-dir "$dir" "$@" ;;
        thin) CARGO_PROFILE_RELEASE_LTO=thin cargo build -q --release --target-dir "$dir" "$@" ;;
        fat) CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
            cargo build -q --release --target-dir "$dir" "$@" ;;
        *) echo "unknown profile $p" >&2; exit 2 ;;
    esac
}
