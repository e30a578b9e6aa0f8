//! Go's size-class table, as `const` data with `const fn` lookups.
//!
//! The table is Go's (`runtime/sizeclasses.go`): 67 classes from 8 B to 32 KiB, each with the
//! number of 8 KiB pages in Go's span, which specalloc scales to at least 64 KiB, and to 16
//! blocks for the classes over 4 KiB ([`class_pages`]). Everything else (objects per span, tail waste, alignment of a class's
//! blocks) is derived from those two columns by `const fn`, so the compiler folds every
//! lookup whose input is a constant: the size-specialised routines and the macros rely on that.
//!
//! Class 0 is not a size class; [`class_of`] returns it for sizes that are not small.
//!
//! ```
//! use specalloc_runtime::size_class::{class_of, class_size, NUM_CLASSES, MAX_SMALL_SIZE};
//!
//! const C: usize = class_of(24, 8); // evaluated at compile time
//! assert_eq!(class_size(C), 24);
//! assert_eq!(class_size(class_of(25, 8)), 32);
//! assert_eq!(class_of(MAX_SMALL_SIZE + 1, 8), 0); // large
//! assert_eq!(NUM_CLASSES, 68);
//! ```

/// log2 of the span page size.
pub const PAGE_SHIFT: usize = 13;
/// The span page size: 8 KiB, as in Go.
pub const PAGE_SIZE: usize = 1 << PAGE_SHIFT;
/// log2 of the chunk size: the page heap maps memory in chunks of this size, aligned to it.
pub const CHUNK_SHIFT: usize = 22;
/// Bytes per chunk (4 MiB), also the chunk alignment.
pub const CHUNK_SIZE: usize = 1 << CHUNK_SHIFT;
/// The largest size served from a size class; larger requests are large objects.
pub const MAX_SMALL_SIZE: usize = 32768;
/// Number of entries in the table, counting the unused class 0 (so 67 real classes).
pub const NUM_CLASSES: usize = 68;

/// Bytes per object of each class (Go's `class_to_size`).
pub const CLASS_SIZE: [u32; NUM_CLASSES] = [
    0, 8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256, 288, 320,
    352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024, 1152, 1280, 1408, 1536, 1792,
    2048, 2304, 2688, 3072, 3200, 3456, 4096, 4864, 5376, 6144, 6528, 6784, 6912, 8192, 9472, 9728,
    10240, 10880, 12288, 13568, 14336, 16384, 18432, 19072, 20480, 21760, 24576, 27264, 28672,
    32768,
];

/// Pages per span of each class (Go's `class_to_allocnpages`).
pub const CLASS_PAGES: [u8; NUM_CLASSES] = [
    0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
    1, 1, 1, 2, 1, 2, 1, 2, 1, 3, 2, 3, 1, 3, 2, 3, 4, 5, 6, 1, 7, 6, 5, 4, 3, 5, 7, 2, 9, 7, 5, 8,
    3, 10, 7, 4,
];

/// Bytes per object of class `class`.
#[inline(always)]
pub const fn class_size(class: usize) -> usize {
    CLASS_SIZE[class] as usize
}

/// The least bytes a span of a class spans: 64 KiB, as mimalloc's small pages (more for the
/// classes over 4 KiB: [`span_min_bytes`]).
///
/// Go's spans are one 8 KiB page for most classes up to 1 KiB, which suits a collector that
/// sweeps spans; a thread that churns a class needs room in its span, or it moves to another
/// span every few dozen blocks, and each move starts on blocks that have gone cold. In C
/// `larson` (random sizes 16–516 B, a set of 4,000 blocks replaced at random) one-page spans
/// sent a tenth of the allocations to the refill path and took 1.8–1.9× the time of these.
pub const SPAN_MIN_BYTES: usize = 64 << 10;

/// The blocks a span holds at least, where that takes more than [`SPAN_MIN_BYTES`] (classes
/// over 4 KiB), up to [`SPAN_BLOCKS_CAP_BYTES`].
///
/// A span of a few blocks sends its thread to the refill path every few allocations, and its
/// blocks that other threads free go back a few at a time, each batch its own atomic push. In C
/// `medium` (blocks of 8 B to 16 KB, half of them freed by another thread, 2 threads) spans of
/// 64 KiB or a little more (four blocks of the 16 KiB class) took 1.09× the time of these, for
/// 0.95× the peak RSS. 32 blocks were 2 % faster still, but a Rust program that grows vectors through every
/// class (the suite's `grow`) then took 1.55× the page faults.
pub const SPAN_MIN_BLOCKS: usize = 16;

/// The most bytes [`SPAN_MIN_BLOCKS`] asks a span for: 256 KiB (8 blocks of 32 KiB).
pub const SPAN_BLOCKS_CAP_BYTES: usize = 256 << 10;

/// The least bytes a span of class `class` spans: [`SPAN_MIN_BYTES`], or room for
/// [`SPAN_MIN_BLOCKS`] blocks where that is more, but no more than [`SPAN_BLOCKS_CAP_BYTES`].
#[inline(always)]
pub const fn span_min_bytes(class: usize) -> usize {
    let blocks = SPAN_MIN_BLOCKS * CLASS_SIZE[class] as usize;
    if blocks <= SPAN_MIN_BYTES {
        SPAN_MIN_BYTES
    } else if blocks >= SPAN_BLOCKS_CAP_BYTES {
        SPAN_BLOCKS_CAP_BYTES
    } else {
        blocks
    }
}

/// Pages per span of class `class`: Go's count ([`CLASS_PAGES`]) times the least whole factor
/// that makes the span at least [`span_min_bytes`], so the tail a span wastes stays Go's share.
/// (A table: one load, also in a build without optimisation, whose stack the slow paths share.)
#[inline(always)]
pub const fn class_pages(class: usize) -> usize {
    SPAN_PAGES[class] as usize
}

/// [`class_pages`] of every class.
const SPAN_PAGES: [u8; NUM_CLASSES] = {
    let mut t = [0u8; NUM_CLASSES];
    let mut c = 1;
    while c < NUM_CLASSES {
        let go = CLASS_PAGES[c] as usize;
        let min = span_min_bytes(c).div_ceil(PAGE_SIZE);
        let pages = go * min.div_ceil(go);
        assert!(pages <= u8::MAX as usize);
        t[c] = pages as u8;
        c += 1;
    }
    t
};

/// Bytes per span of class `class`.
#[inline(always)]
pub const fn span_bytes(class: usize) -> usize {
    class_pages(class) * PAGE_SIZE
}

/// Objects per span of class `class`.
#[inline(always)]
pub const fn class_objects(class: usize) -> usize {
    span_bytes(class) / class_size(class)
}

/// The alignment every block of `class` has: the largest power of two dividing its size, capped
/// at the page size (spans start on page boundaries).
#[inline(always)]
pub const fn class_align(class: usize) -> usize {
    let size = class_size(class);
    let low = size & size.wrapping_neg();
    if low > PAGE_SIZE {
        PAGE_SIZE
    } else {
        low
    }
}

const fn build_class8() -> [u8; MAX_SMALL_SIZE_DIV8_LEN] {
    let mut t = [0u8; MAX_SMALL_SIZE_DIV8_LEN];
    let mut i = 0;
    let mut c = 1;
    while i < MAX_SMALL_SIZE_DIV8_LEN {
        let size = i * 8;
        while class_size(c) < size {
            c += 1;
        }
        t[i] = c as u8;
        i += 1;
    }
    // A zero-byte request gets a 16-byte block, so every alignment up to 16 holds for it.
    t[0] = 2;
    t
}

const fn build_class128() -> [u8; CLASS128_LEN] {
    let mut t = [0u8; CLASS128_LEN];
    let mut i = 0;
    let mut c = 1;
    while i < CLASS128_LEN {
        let size = SMALL_SIZE_MAX + i * 128;
        while class_size(c) < size {
            c += 1;
        }
        t[i] = c as u8;
        i += 1;
    }
    t
}

/// Sizes up to this are looked up in the 8-byte-step table (Go's `smallSizeMax`).
const SMALL_SIZE_MAX: usize = 1024;
const MAX_SMALL_SIZE_DIV8_LEN: usize = SMALL_SIZE_MAX / 8 + 1;
const CLASS128_LEN: usize = (MAX_SMALL_SIZE - SMALL_SIZE_MAX) / 128 + 1;

/// Size → class for sizes up to 1024, in steps of 8 (Go's `size_to_class8`).
pub(crate) static SIZE_TO_CLASS8: [u8; MAX_SMALL_SIZE_DIV8_LEN] = build_class8();
/// Size → class for sizes from 1024 to 32 KiB, in steps of 128 (Go's `size_to_class128`).
static SIZE_TO_CLASS128: [u8; CLASS128_LEN] = build_class128();
const CONST_CLASS8: [u8; MAX_SMALL_SIZE_DIV8_LEN] = build_class8();
const CONST_CLASS128: [u8; CLASS128_LEN] = build_class128();

/// The class for `size` bytes at alignment `align` (a power of two), or 0 when no class serves
/// it (too large, or more aligned than any class of that size can guarantee).
///
/// A `const fn`: with constant arguments it folds to a constant, which is how the
/// size-specialised routines pick their class at compile time.
///
/// ```
/// use specalloc_runtime::size_class::{class_of, class_size, class_align};
/// const C: usize = class_of(40, 32);
/// assert_eq!(class_size(C), 64); // 48 is only 16-aligned
/// assert!(class_align(C) >= 32);
/// ```
pub const fn class_of(size: usize, align: usize) -> usize {
    if size > MAX_SMALL_SIZE || align > PAGE_SIZE {
        return 0;
    }
    let rounded = (size + align - 1) & !(align - 1);
    if rounded > MAX_SMALL_SIZE {
        return 0;
    }
    let mut c = if rounded <= SMALL_SIZE_MAX {
        CONST_CLASS8[rounded.div_ceil(8)] as usize
    } else {
        CONST_CLASS128[(rounded - SMALL_SIZE_MAX).div_ceil(128)] as usize
    };
    while c < NUM_CLASSES {
        if class_size(c).is_multiple_of(align) {
            return c;
        }
        c += 1;
    }
    0
}

/// The largest object of the tiny class, whose blocks are 4 bytes.
pub const TINY_MAX: usize = 4;

/// Which path serves an allocation of a given size and alignment. This is the one place that
/// decides it: the `GlobalAlloc` entry points, the size-specialised entry points, the checked
/// mode, [`crate::usable_size`] and the facade's site report all ask [`route`].
///
/// ```
/// use specalloc_runtime::size_class::{route, Route};
/// assert_eq!(route(3, 1), Route::Tiny);
/// assert_eq!(route(3, 8), Route::Small(1)); // over-aligned for a 4-byte block
/// assert_eq!(route(12, 4), Route::Small(2));
/// assert_eq!(route(24, 8), Route::Small(3));
/// assert_eq!(route(1 << 20, 8), Route::Large);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Route {
    /// The tiny class: a 4-byte block, for 1 to [`TINY_MAX`] bytes aligned to at most 4.
    Tiny,
    /// A size class of Go's table (its index).
    Small(usize),
    /// A large object: a page run of the page heap, or a run of the huge heap.
    Large,
}

/// Whether `size` bytes at alignment `align` are served by the tiny class (one comparison:
/// `size - 1 < 4` and `align - 1 < 4` together).
#[inline(always)]
pub const fn is_tiny(size: usize, align: usize) -> bool {
    (size.wrapping_sub(1) | align.wrapping_sub(1)) < TINY_MAX
}

/// The path serving `size` bytes at alignment `align` (see [`Route`]). Usable in constants.
#[inline]
pub const fn route(size: usize, align: usize) -> Route {
    if is_tiny(size, align) {
        return Route::Tiny;
    }
    match class_of(size, align) {
        0 => Route::Large,
        c => Route::Small(c),
    }
}

/// Run-time size → class for `size <= MAX_SMALL_SIZE` and `align <= 16` (the common case):
/// two table loads, no search. Returns the same class as [`class_of`].
#[inline(always)]
pub fn class_of_small16(size: usize, align: usize) -> usize {
    debug_assert!(size <= MAX_SMALL_SIZE && align <= 16);
    let rounded = (size + align - 1) & !(align - 1);
    if rounded <= SMALL_SIZE_MAX {
        SIZE_TO_CLASS8[rounded.div_ceil(8)] as usize
    } else {
        SIZE_TO_CLASS128[(rounded - SMALL_SIZE_MAX).div_ceil(128)] as usize
    }
}

/// The generic path's lookup key: `(size - 1) | (align - 1)`. One word answers both routing
/// questions of the common case: the layout is tiny when the key is below [`TINY_MAX`], and
/// when it is below [`KEY_SMALL_MAX`] its class is [`class_of_key`]. For an alignment of 8 or
/// more the key plus one is the size rounded up to the alignment; below 8 the alignment only
/// touches the three bits the lookup drops.
#[inline(always)]
pub const fn route_key(size: usize, align: usize) -> usize {
    size.wrapping_sub(1) | align.wrapping_sub(1)
}

/// Keys below this have their class in [`class_of_key`]'s table (sizes up to 1 KiB).
pub const KEY_SMALL_MAX: usize = SMALL_SIZE_MAX;

/// Size class of a layout whose [`route_key`] is `key`, for `TINY_MAX <= key < KEY_SMALL_MAX`:
/// one shift and one table load. The same class as [`class_of`] (a test checks every size and
/// alignment), because every size class up to 1 KiB that is at least a rounded size is a
/// multiple of the alignment it was rounded to.
#[inline(always)]
pub fn class_of_key(key: usize) -> usize {
    // No `debug_assert!` of the range: this is on every generic allocation's path, also in
    // builds without optimisation, and the index below is bounds-checked there anyway.
    // `SIZE_TO_CLASS8[n]` is the class of `8 * n` bytes; `key / 8 + 1` eighths is the size
    // rounded up to a multiple of 8 (and of the alignment).
    SIZE_TO_CLASS8[(key >> 3) + 1] as usize
}

/// Size class of a layout whose [`route_key`] is `key`, for `KEY_SMALL_MAX <= key <
/// MAX_SMALL_SIZE` at an alignment of at most 16 (a request of 1,025 bytes to 32 KiB): one
/// shift and one table load, in steps of 128 bytes. The alignment only touches the key's low
/// four bits, which the step drops, and every class above 1 KiB is a multiple of 128. The same
/// class as [`class_of`] (a test checks every size and alignment).
///
/// ```
/// use specalloc_runtime::size_class::{class_of, class_of_key_medium, class_size, route_key};
/// assert_eq!(class_of_key_medium(route_key(1500, 8)), class_of(1500, 8));
/// assert_eq!(class_size(class_of_key_medium(route_key(1025, 16))), 1152);
/// assert_eq!(class_size(class_of_key_medium(route_key(32768, 1))), 32768);
/// ```
#[inline(always)]
pub fn class_of_key_medium(key: usize) -> usize {
    // `SIZE_TO_CLASS128[n]` is the class of `1024 + 128 * n` bytes; `key / 128 - 7` steps is
    // the size above 1 KiB rounded up to a multiple of 128.
    SIZE_TO_CLASS128[(key >> 7) - (SMALL_SIZE_MAX >> 7) + 1] as usize
}

/// Size → class for `size <= MAX_SMALL_SIZE` and `align <= 16` from `const` tables: each call
/// site gets its own copy of the lookup, which the compiler folds away when the size is a
/// constant (the fully inlined generic path). Returns the same class as [`class_of`].
#[inline(always)]
pub fn class_of_inline(size: usize, align: usize) -> usize {
    debug_assert!(size <= MAX_SMALL_SIZE && align <= 16);
    let rounded = (size + align - 1) & !(align - 1);
    if rounded <= SMALL_SIZE_MAX {
        CONST_CLASS8[rounded.div_ceil(8)] as usize
    } else {
        CONST_CLASS128[(rounded - SMALL_SIZE_MAX).div_ceil(128)] as usize
    }
}

/// Run-time size → class for any size and alignment; 0 when not small.
#[inline]
pub fn class_of_runtime(size: usize, align: usize) -> usize {
    if align <= 16 && size <= MAX_SMALL_SIZE {
        // Every class of 16 bytes or more is a multiple of 16, so rounding the size up to the
        // alignment lands on a class that honours it (and 32 KiB is itself a multiple of 16).
        return class_of_small16(size, align);
    }
    class_of(size, align)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_key_agrees_with_route() {
        for size in 0..=MAX_SMALL_SIZE + 8 {
            let mut align = 1;
            while align <= 2 * PAGE_SIZE {
                let key = route_key(size, align);
                if key < TINY_MAX {
                    assert_eq!(route(size, align), Route::Tiny, "size {size} align {align}");
                } else if key < KEY_SMALL_MAX {
                    assert_eq!(
                        Route::Small(class_of_key(key)),
                        route(size, align),
                        "size {size} align {align}"
                    );
                } else if key < MAX_SMALL_SIZE && align <= 16 {
                    assert_eq!(
                        Route::Small(class_of_key_medium(key)),
                        route(size, align),
                        "size {size} align {align}"
                    );
                }
                align *= 2;
            }
        }
    }

    #[test]
    fn table_is_increasing_and_8_byte_multiples() {
        assert_eq!(CLASS_SIZE[0], 0);
        for c in 1..NUM_CLASSES {
            assert_eq!(class_size(c) % 8, 0, "class {c}");
            if c > 1 {
                assert!(class_size(c) > class_size(c - 1), "class {c}");
            }
            assert!(class_pages(c) >= 1);
            assert!(class_objects(c) >= 1);
        }
        assert_eq!(class_size(1), 8);
        assert_eq!(class_size(NUM_CLASSES - 1), MAX_SMALL_SIZE);
    }

    #[test]
    fn tail_waste_within_go_bound() {
        // Go sizes spans so that the unusable tail of a span is at most 1/8 of it.
        for c in 1..NUM_CLASSES {
            let tail = span_bytes(c) % class_size(c);
            assert!(tail <= span_bytes(c) / 8, "class {c}: tail {tail}");
        }
    }

    #[test]
    fn spans_are_gos_times_a_whole_factor_of_at_least_the_minimum() {
        for (c, &go) in CLASS_PAGES.iter().enumerate().skip(1) {
            let go = go as usize;
            let min = span_min_bytes(c);
            assert_eq!(class_pages(c) % go, 0, "class {c}");
            assert!(span_bytes(c) >= min, "class {c}");
            // The least such multiple: one factor fewer is under the minimum.
            assert!(span_bytes(c) - go * PAGE_SIZE < min, "class {c}");
            // The minimum: 64 KiB, or 16 blocks up to 256 KiB.
            assert!(
                (SPAN_MIN_BYTES..=SPAN_BLOCKS_CAP_BYTES).contains(&min),
                "class {c}"
            );
            assert!(
                min == SPAN_MIN_BYTES
                    || min == SPAN_BLOCKS_CAP_BYTES
                    || min == SPAN_MIN_BLOCKS * class_size(c),
                "class {c}"
            );
            assert!(class_objects(c) >= SPAN_MIN_BLOCKS.min(SPAN_BLOCKS_CAP_BYTES / class_size(c)));
        }
        // Spot checks.
        assert_eq!(class_objects(1), 1024 * 8);
        assert_eq!(class_objects(3), (64 << 10) / 24);
        assert_eq!(class_objects(class_of(1408, 8)), (64 << 10) / 1408);
        assert_eq!(span_bytes(class_of(4096, 8)), 64 << 10);
        assert_eq!(span_bytes(class_of(8192, 8)), 128 << 10);
        // 16 blocks of 6,912 B are 14 pages; Go's span of the class is 6 pages.
        assert_eq!(span_bytes(class_of(6912, 8)), 18 * PAGE_SIZE);
        // Capped at 256 KiB (32 pages); Go's span is 10 pages.
        assert_eq!(span_bytes(class_of(27264, 8)), 40 * PAGE_SIZE);
        assert_eq!(class_objects(class_of(27264, 8)), 12);
        assert_eq!(class_objects(class_of(MAX_SMALL_SIZE, 8)), 8);
    }

    #[test]
    fn every_size_maps_to_smallest_fitting_class() {
        for align in [1usize, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 8192] {
            for size in 0..=MAX_SMALL_SIZE + 1 {
                let c = class_of(size, align);
                let want = if size == 0 { 16 } else { size };
                let expect = (1..NUM_CLASSES)
                    .find(|&c| class_size(c) >= want && class_size(c).is_multiple_of(align))
                    .unwrap_or(0);
                assert_eq!(c, expect, "size {size} align {align}");
                if align <= 16 {
                    assert_eq!(class_of_runtime(size, align), c, "runtime {size} {align}");
                    if size <= MAX_SMALL_SIZE {
                        assert_eq!(class_of_inline(size, align), c, "inline {size} {align}");
                    }
                }
                if c != 0 {
                    assert!(class_align(c) >= align);
                }
            }
        }
        assert_eq!(class_of(8, 16384), 0);
    }

    #[test]
    fn lookup_is_const() {
        const C: usize = class_of(80, 8);
        assert_eq!(class_size(C), 80);
        const D: usize = class_of(81, 8);
        assert_eq!(class_size(D), 96);
    }
}
