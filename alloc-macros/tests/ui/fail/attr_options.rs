// Malformed options: each error is on the offending tokens; the functions are still emitted.
use specalloc::specialize;

#[specialize(fast)]
fn a() {}

#[specialize(crate = 5)]
fn b() {}

#[specialize(crate = specalloc, crate = specalloc)]
fn c() {}

#[specialize(report, report)]
fn d() {}

fn main() {
    a();
    b();
    c();
    d();
}
