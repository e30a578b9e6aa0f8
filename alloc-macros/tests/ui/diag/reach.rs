// Issue 22, item 7: type errors of the reach forms (see tests/ui.rs).
specalloc::install!(static GLOBAL);

struct NoDefault;

#[specalloc::specialize]
fn d() -> Box<NoDefault> {
    Box::<NoDefault>::default()
}

#[specalloc::specialize]
fn a() -> Box<[u8; 3]> {
    Box::<[u8; 3]>::from([1, 2])
}

fn main() {
    d();
    a();
}
