// Issue 22, item 4: type errors read as without the attribute (see tests/ui.rs).
specalloc::install!(static GLOBAL);

const K: u32 = 4;

// (plain: the same code without the attribute)
fn g() -> Vec<u8> {
    vec![1u16; 3]
}

// (plain: the same code without the attribute)
fn h() -> Vec<u8> {
    Vec::with_capacity(u8::MAX)
}

// (plain: the same code without the attribute)
fn k() -> Vec<u8> {
    vec![0u8; K]
}

// (plain: the same code without the attribute)
fn l() -> Vec<u8> {
    vec![1u8, 2u16, 3]
}

// (plain: the same code without the attribute)
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
