//! Where a run's descriptor sits in its chunk's header: one slot per page, but not in page
//! order. Spans start [`GROUP`] pages apart or more (64 KiB at least), so in page order the
//! descriptors in use would sit a kilobyte apart, four to a 4 KiB page of the header, and each
//! new thread's few spans would write as many header pages. Slots group the pages by their
//! residue modulo [`GROUP`], so that spans that follow one another in a chunk have descriptors
//! that follow one another too: 32 to a page of the header. Spans taken from fresh pages lie a
//! page apart (`place.rs`), so their residues cycle through the eight groups: a thread's first
//! eight such spans in a chunk write eight pages of descriptors, and the next ones fill them.
//! Grouping by the residue modulo nine instead (neighbouring descriptors for spaced spans)
//! took the faults back to those of spans side by side, but C `larson` gained less from the
//! spacing, and `larsonpool` and `larsonsized` took more time than side by side
//! (`bench/RESULTS.md`).

use super::PAGES_PER_CHUNK;
use crate::size_class::{PAGE_SIZE, SPAN_MIN_BYTES};

/// Pages of the smallest span.
const GROUP: usize = SPAN_MIN_BYTES / PAGE_SIZE;

const _: () = assert!(PAGES_PER_CHUNK.is_multiple_of(GROUP));

/// Slots per group (one per residue).
pub(super) const GROUP_SLOTS: usize = PAGES_PER_CHUNK / GROUP;

/// The header slot of the descriptor of a run that starts at page `first` of its chunk: a
/// permutation of the pages.
#[inline]
pub(super) const fn slot(first: usize) -> usize {
    (first % GROUP) * GROUP_SLOTS + first / GROUP
}

/// The pages whose runs' descriptors lie in slots `[from, from + n)` of one group.
pub(super) fn slot_pages(from: usize, n: usize) -> impl Iterator<Item = usize> {
    debug_assert!(from % GROUP_SLOTS + n <= GROUP_SLOTS);
    let (g, q) = (from / GROUP_SLOTS, from % GROUP_SLOTS);
    (q..q + n).map(move |q| q * GROUP + g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_a_permutation_of_the_pages() {
        let mut seen = [false; PAGES_PER_CHUNK];
        for p in 0..PAGES_PER_CHUNK {
            let s = slot(p);
            assert!(s < PAGES_PER_CHUNK, "page {p}: slot {s}");
            assert!(!seen[s], "page {p}: slot {s} taken twice");
            seen[s] = true;
        }
    }

    #[test]
    fn slot_pages_are_the_pages_of_those_slots() {
        for from in (0..PAGES_PER_CHUNK).step_by(8) {
            let slots: Vec<usize> = slot_pages(from, 8).map(slot).collect();
            let want: Vec<usize> = (from..from + 8).collect();
            assert_eq!(slots, want, "slots from {from}");
        }
    }

    #[test]
    fn spans_that_follow_one_another_have_neighbouring_descriptors() {
        for start in 0..GROUP {
            for k in 1..PAGES_PER_CHUNK / GROUP {
                let (a, b) = (start + (k - 1) * GROUP, start + k * GROUP);
                if b < PAGES_PER_CHUNK {
                    assert_eq!(slot(b), slot(a) + 1, "pages {a} and {b}");
                }
            }
        }
    }
}
