// Issue 22, item 4: type errors read as without the attribute (see tests/ui.rs).
specalloc::install!(static GLOBAL);

const K: u32 = 4;

#[specalloc::specialize]
fn g() -> Vec<u8> {
    vec![1u16; 3]
}

#[specalloc::specialize]
fn h() -> Vec<u8> {
    Vec::with_capacity(u8::MAX)
}

#[specalloc::specialize]
fn k() -> Vec<u8> {
    vec![0u8; K]
}

#[specalloc::specialize]
fn l() -> Vec<u8> {
    vec![1u8, 2u16, 3]
}

#[specalloc::specialize]
fn m() -> String {
    String::with_capacity(u8::MAX)
}

fn main() {
    m();
    g();
    h();
    k();
    l();
}
