// Builds the C code of the override fixture (tests/override.rs) with the `cc` crate.
fn main() {
    println!("cargo:rerun-if-changed=overridden.c");
    cc::Build::new().file("overridden.c").compile("overridden");
}
