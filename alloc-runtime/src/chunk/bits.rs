//! The page heap's bitmaps (one bit per page of a chunk): setting, counting and finding runs
//! of bits, a 64-bit word at a time.

use core::cell::Cell;

use super::{PAGES_PER_CHUNK, WORDS};

/// Whether bit `i` is set.
#[inline]
pub(super) fn bit(words: &[Cell<u64>; WORDS], i: usize) -> bool {
    words[i / 64].get() >> (i % 64) & 1 == 1
}

/// The bits of pages `[start, start + n)` that fall in word `w` of a bitmap.
#[inline]
fn word_mask(w: usize, start: usize, n: usize) -> u64 {
    let lo = start.max(w * 64);
    let hi = (start + n).min(w * 64 + 64);
    if lo >= hi {
        return 0;
    }
    let len = hi - lo;
    let ones = if len == 64 {
        u64::MAX
    } else {
        (1u64 << len) - 1
    };
    ones << (lo - w * 64)
}

/// The words of a bitmap that pages `[start, start + n)` touch.
#[inline]
fn words_of(start: usize, n: usize) -> core::ops::Range<usize> {
    start / 64..(start + n).div_ceil(64)
}

/// Sets (or clears) the bits of pages `[start, start + n)`.
pub(super) fn set_range(words: &[Cell<u64>; WORDS], start: usize, n: usize, value: bool) {
    for w in words_of(start, n) {
        let m = word_mask(w, start, n);
        let cell = &words[w];
        cell.set(if value {
            cell.get() | m
        } else {
            cell.get() & !m
        });
    }
}

/// Whether the bits of pages `[start, start + n)` are all clear.
pub(super) fn all_clear(words: &[Cell<u64>; WORDS], start: usize, n: usize) -> bool {
    words_of(start, n).all(|w| words[w].get() & word_mask(w, start, n) == 0)
}

/// How many of the bits of pages `[start, start + n)` are set.
pub(super) fn count_set(words: &[Cell<u64>; WORDS], start: usize, n: usize) -> usize {
    words_of(start, n)
        .map(|w| (words[w].get() & word_mask(w, start, n)).count_ones() as usize)
        .sum()
}

/// Clears every bit.
pub(super) fn clear_all(words: &[Cell<u64>; WORDS]) {
    for w in words {
        w.set(0);
    }
}

/// First run of `n` pages (`1..=PAGES_PER_CHUNK`) whose bits are set in the bitmap that
/// `usable` gives a word at a time, starting at a multiple of `align` pages (a power of two;
/// chunks are aligned to their size, so the run's address is then a multiple of `align` pages
/// too).
pub(super) fn find_run(usable: impl Fn(usize) -> u64, n: usize, align: usize) -> Option<usize> {
    if align > 1 {
        return find_aligned_run(usable, n, align);
    }
    // A word at a time: a run carried over from the words before, then runs inside the word,
    // then the run the word's top bits start. (The header's pages are never free.)
    let mut run = 0;
    let mut start = 0;
    for wi in 0..WORDS {
        let w = usable(wi);
        if w == u64::MAX {
            if run == 0 {
                start = wi * 64;
            }
            run += 64;
            if run >= n {
                return Some(start);
            }
            continue;
        }
        if run > 0 && run + w.trailing_ones() as usize >= n {
            return Some(start);
        }
        if n < 64 {
            let inside = runs_within(w, n);
            if inside != 0 {
                return Some(wi * 64 + inside.trailing_zeros() as usize);
            }
        }
        run = w.leading_ones() as usize;
        start = wi * 64 + 64 - run;
    }
    None
}

/// The run of `n` pages whose bits are set in `usable` (a bitmap given a word at a time) with
/// the most pages set in `held` too, and how many: the lowest such run among equals. `None`
/// when no run of `n` usable pages has a page set in `held`.
pub(super) fn most_held_run(
    usable: impl Fn(usize) -> u64,
    held: impl Fn(usize) -> u64,
    n: usize,
) -> Option<(usize, usize)> {
    let page = |w: &dyn Fn(usize) -> u64, i: usize| (w(i / 64) >> (i % 64) & 1) as usize;
    let mut best: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < PAGES_PER_CHUNK {
        // The maximal run of usable pages [a, b) from `i` on, found a word at a time.
        let w = usable(i / 64) >> (i % 64);
        if w == 0 {
            i = (i / 64 + 1) * 64;
            continue;
        }
        let a = i + w.trailing_zeros() as usize;
        let mut b = a;
        loop {
            let ones = (!(usable(b / 64) >> (b % 64))).trailing_zeros() as usize;
            b += ones.min(64 - b % 64);
            if ones == 0 || !b.is_multiple_of(64) || b == PAGES_PER_CHUNK {
                break;
            }
        }
        i = b;
        if b - a < n || words_of(a, b - a).all(|w| held(w) & word_mask(w, a, b - a) == 0) {
            continue;
        }
        // Each window of the run in turn, its count slid along a page at a time.
        let mut count: usize = (a..a + n).map(|p| page(&held, p)).sum();
        for s in a..=b - n {
            if s > a {
                count = count + page(&held, s + n - 1) - page(&held, s - 1);
            }
            if count > 0 && best.is_none_or(|(_, c)| count > c) {
                best = Some((s, count));
            }
        }
    }
    best
}

/// The bits `j` of `w` where bits `j..j + n` are all set (`1 <= n <= 64`), runs not crossing
/// the word's end.
#[inline]
fn runs_within(w: u64, n: usize) -> u64 {
    let mut x = w;
    let mut have = 1;
    while have < n {
        // `x` has bit `j` set when bits `j..j + have` of `w` are; doubling `have` at most.
        let s = have.min(n - have);
        x &= x >> s;
        have += s;
    }
    x
}

/// [`find_run`] for runs aligned to more than a page.
fn find_aligned_run(usable: impl Fn(usize) -> u64, n: usize, align: usize) -> Option<usize> {
    if align <= 64 && n <= align {
        // A run of at most `align` pages from a multiple of `align` stays inside one bitmap
        // word: a word at a time, the aligned starts whose `n` pages are all usable.
        let starts = aligned_starts(align);
        for w in 0..WORDS {
            let cand = starts & runs_within(usable(w), n);
            if cand != 0 {
                // The header's pages are never free, so no start found is inside it.
                return Some(w * 64 + cand.trailing_zeros() as usize);
            }
        }
        return None;
    }
    // Otherwise each aligned start in turn, moving past the first page that is not usable.
    let page = |i: usize| usable(i / 64) >> (i % 64) & 1 == 1;
    let mut start = 0;
    while start + n <= PAGES_PER_CHUNK {
        match (start..start + n).find(|&i| !page(i)) {
            None => return Some(start),
            Some(taken) => start = (taken + 1).next_multiple_of(align),
        }
    }
    None
}

/// The bits of a bitmap word at multiples of `align` (a power of two up to 64).
fn aligned_starts(align: usize) -> u64 {
    (0..64).step_by(align).fold(0, |m, i| m | 1 << i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_find(map: &[u64; WORDS], n: usize, align: usize) -> Option<usize> {
        let page = |i: usize| map[i / 64] >> (i % 64) & 1 == 1;
        (0..=PAGES_PER_CHUNK - n)
            .step_by(align)
            .find(|&s| (s..s + n).all(page))
    }

    /// Bitmaps of long and short runs: each page set with a probability that changes by region.
    fn bitmap(x: &mut u64) -> [u64; WORDS] {
        let mut next = || {
            *x ^= *x << 13;
            *x ^= *x >> 7;
            *x ^= *x << 17;
            *x
        };
        let mut map = [0u64; WORDS];
        let mut i = 0;
        while i < PAGES_PER_CHUNK {
            let len = (next() % 150) as usize + 1;
            let density = next() % 4;
            for p in i..(i + len).min(PAGES_PER_CHUNK) {
                if density == 3 || next() % 4 < density {
                    map[p / 64] |= 1 << (p % 64);
                }
            }
            i += len;
        }
        map
    }

    #[test]
    fn find_run_is_the_first_fit() {
        let mut x = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..400 {
            let map = bitmap(&mut x);
            for n in [1, 2, 3, 7, 8, 31, 63, 64, 65, 100, 128, 200, 300] {
                for align in [1, 2, 8, 16, 64, 128] {
                    if align > 1 && n > PAGES_PER_CHUNK / 4 {
                        continue;
                    }
                    assert_eq!(
                        find_run(|w| map[w], n, align),
                        naive_find(&map, n, align),
                        "n {n} align {align} map {map:x?}"
                    );
                }
            }
        }
    }

    #[test]
    fn most_held_run_has_the_most_held_pages() {
        let mut x = 0x2545_f491_4f6c_dd1d;
        for _ in 0..300 {
            let (free, held) = (bitmap(&mut x), bitmap(&mut x));
            for n in [1, 5, 64, 70, 128] {
                let count = |s: usize| {
                    (s..s + n)
                        .filter(|&p| held[p / 64] >> (p % 64) & 1 == 1)
                        .count()
                };
                let mut expect: Option<(usize, usize)> = None;
                for s in 0..=PAGES_PER_CHUNK - n {
                    let all_free = (s..s + n).all(|p| free[p / 64] >> (p % 64) & 1 == 1);
                    let c = count(s);
                    if all_free && c > 0 && expect.is_none_or(|(_, e)| c > e) {
                        expect = Some((s, c));
                    }
                }
                assert_eq!(most_held_run(|w| free[w], |w| held[w], n), expect);
            }
        }
    }

    #[test]
    fn ranges_set_count_and_clear() {
        let words: [Cell<u64>; WORDS] = Default::default();
        for (start, n) in [
            (0, 1),
            (3, 61),
            (5, 64),
            (63, 2),
            (64, 64),
            (70, 300),
            (0, 512),
        ] {
            clear_all(&words);
            set_range(&words, start, n, true);
            assert_eq!(count_set(&words, 0, PAGES_PER_CHUNK), n);
            assert_eq!(count_set(&words, start, n), n);
            assert!((start..start + n).all(|i| bit(&words, i)));
            assert!(start == 0 || !bit(&words, start - 1));
            assert!(start + n == PAGES_PER_CHUNK || !bit(&words, start + n));
            set_range(&words, start + 1, n - 1, false);
            assert_eq!(count_set(&words, 0, PAGES_PER_CHUNK), 1);
            assert!(all_clear(&words, start + 1, n - 1));
            assert!(!all_clear(&words, start, n));
        }
    }
}
