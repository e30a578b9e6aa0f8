// Malformed `alloc!` input: each error is on the offending token.
use specalloc::alloc;

fn main() {
    let _a = alloc!();
    let _b = alloc!(boxed 5);
    let _c = alloc!(uninit);
    let _d = alloc!(box 1 2);
    let _e = alloc!(vec []);
    let _f = alloc!(vec(1, 2));
    let _g = alloc!(zeroed u8 u16);
}
