//! The slow paths, out of line: refilling a class (current span, then partial spans, then spans
//! adopted from the central pool, then fresh pages), collecting remote frees, parking full spans
//! and taking them back, freeing into spans the thread does not own, and giving empty spans back
//! to the page heap.

use core::ptr;
use core::sync::atomic::Ordering;

use super::outbox::{hand_over_on_refill, publish_outboxes, request_handover};
use super::owned::{clear_block, collect_remote, release_span};
use super::tls::current_heap;
use super::{central, empty_heap, inc, Heap, EMPTY_KEEP};
use crate::remote;
use crate::span::STATE_SMALL;
use crate::span::{
    empty_span, span_block_size, span_blocks, span_pages, ListTag, Span, OWNER_FULL, SPAN_CLASSES,
};
use crate::stats;

/// Refills `class` on `h` and allocates a block from it. `h` is this thread's heap, or the
/// shared heap with its lock held (what "owning" `h`'s spans means below).
pub(super) fn alloc_from(h: &Heap, class: usize, size: usize, zeroed: bool) -> *mut u8 {
    // Here rather than in the callers, so that they call this in tail position.
    let _inside = h.enter();
    if super::retire::due(h) {
        super::retire::retire_unused(h);
    }
    hand_over_on_refill(h, class);
    process_delayed(h, false);
    #[cfg(feature = "profiling")]
    super::sampled::arm(h);
    let Some(s) = refill(h, class) else {
        return ptr::null_mut();
    };
    take_current(h, class, s, size, zeroed, _inside)
}

/// [`alloc_from`] for the shared heap (whose lock the caller holds): a block of its current span
/// of `class` when that has one, as the fast path takes it, without a refill's work (each
/// thread takes a few blocks, one call at a time); otherwise [`alloc_from`].
pub(super) fn alloc_shared_from(h: &Heap, class: usize, size: usize, zeroed: bool) -> *mut u8 {
    // SAFETY: the current span is a live descriptor owned by `h`, or the sentinel span, whose
    // free list is empty.
    let s = unsafe { &*h.classes[class].current.get() };
    if s.free.get().is_null() {
        // A refill, which takes what other threads freed into its spans.
        return alloc_from(h, class, size, zeroed);
    }
    take_current(h, class, s, size, zeroed, ())
}

/// Takes a block off `s`, `h`'s current span of `class`, which has one on its free list, and
/// counts it; clears its first `size` bytes when `zeroed`. `inside` is what the caller holds of
/// the trim lock (its guard, or nothing), left before the heap profiler's sampled allocation
/// and otherwise on return. Inlined, so that the sampled allocation (`sampled::fire_in`) walks
/// the same frames from either caller.
#[inline(always)]
fn take_current<G>(
    h: &Heap,
    class: usize,
    s: &Span,
    size: usize,
    zeroed: bool,
    inside: G,
) -> *mut u8 {
    let fresh = s.free_zero.get();
    // SAFETY: `s` is current, owned by `h`, with a block on its free list.
    let b = unsafe { s.pop_local() };
    debug_assert!(!b.is_null());
    s.used.set(s.used.get() + 1);
    #[cfg(not(feature = "profiling"))]
    inc(&h.classes[class].allocs);
    #[cfg(feature = "profiling")]
    if super::count_fires_at(h as *const Heap as *const u8, class * super::CACHE_SIZE) {
        drop(inside);
        // SAFETY: `b` was just popped from `s`, `h`'s current span, and counted.
        return unsafe { super::sampled::fire_in(h, class, size, zeroed, s, b) };
    }
    #[cfg(feature = "checked")]
    crate::checked::on_alloc(b.cast());
    if zeroed {
        // SAFETY: a block of `class`, now ours, at least `size` bytes long.
        unsafe { clear_block(b.cast(), size, fresh) };
    }
    drop(inside);
    b.cast()
}

/// Makes sure `class` has a current span with a free block, and returns it.
fn refill(h: &Heap, class: usize) -> Option<&Span> {
    let cc = &h.classes[class];
    let cur = cc.current.get();
    if cur != empty_span() {
        // SAFETY: the current span is a live descriptor owned by `h`.
        let s = unsafe { &*cur };
        if refresh(s) {
            return Some(s);
        }
        retire_current(h, class, s);
    }
    // Owned partial spans first.
    while let Some(s) = cc.partial.pop_front() {
        if s.used.get() == 0 {
            let bytes = s.npages.get() as usize * crate::size_class::PAGE_SIZE;
            h.empty_kept.set(h.empty_kept.get().saturating_sub(bytes));
        }
        make_current(h, class, s);
        if refresh(s) {
            return Some(s);
        }
        retire_current(h, class, s);
    }
    // Spans abandoned by exited threads.
    for _ in 0..8 {
        let Some(s) = central::central_pop(class) else {
            break;
        };
        // Popped from the central pool, the span is now ours alone.
        s.owner.store(h.addr(), Ordering::Relaxed);
        collect_remote(s);
        make_current(h, class, s);
        if s.has_local_free() {
            if s.free.get().is_null() {
                // SAFETY: we own `s` and its free list is empty.
                unsafe { s.extend() };
            }
            return Some(s);
        }
        retire_current(h, class, s);
    }
    // A new span, from this thread's reserve or the page heap; first, a few spans that exited
    // threads left behind and that may have emptied since go back there.
    central::sweep_next();
    let run = super::reserve::take(h, span_pages(class))?;
    // SAFETY: the page heap gave us this descriptor and its pages.
    let s = unsafe { &*run.span };
    setup_small(s, class, run.zero);
    make_current(h, class, s);
    // SAFETY: a fresh span has an empty free list and a non-empty bump region.
    let ok = unsafe { s.extend() };
    debug_assert!(ok);
    Some(s)
}

/// Gives an owned span a free block if it can: its remote frees, else never-used blocks.
fn refresh(s: &Span) -> bool {
    if s.free.get().is_null() {
        collect_remote(s);
    }
    // SAFETY: we own `s`; `extend` runs only with an empty free list.
    !s.free.get().is_null() || unsafe { s.extend() }
}

/// Initialises a descriptor for a fresh span of `class`.
fn setup_small(s: &Span, class: usize, zero: bool) {
    let size = span_block_size(class);
    let start = s.start.get();
    let n = s.npages.get() as usize * crate::size_class::PAGE_SIZE / size;
    s.free.set(ptr::null_mut());
    s.used.set(0);
    s.free_zero.set(false);
    s.class.set(class as u8);
    s.set_tag(ListTag::None);
    s.bump_zero.set(zero);
    s.remote.store(0, Ordering::Relaxed);
    s.bump.set(start);
    // SAFETY: `n` whole blocks fit in the span.
    s.end.set(unsafe { start.add(n * size) });
    s.next.set(ptr::null_mut());
    s.prev.set(ptr::null_mut());
    s.large_size.set(0);
    s.state.store(STATE_SMALL, Ordering::Relaxed);
    stats::SPANS[class].fetch_add(1, Ordering::Relaxed);
}

fn make_current(h: &Heap, class: usize, s: &Span) {
    debug_assert_eq!(s.class.get() as usize, class);
    s.owner.store(h.addr(), Ordering::Relaxed);
    s.set_tag(ListTag::Current);
    s.used.set(s.used.get() + 1); // pin
    h.classes[class].current.set(s as *const Span as *mut Span);
}

/// Stops allocating from `h`'s current span of `class` (`s`), which has no free block.
fn retire_current(h: &Heap, class: usize, s: &Span) {
    h.classes[class].current.set(empty_span());
    s.set_tag(ListTag::None);
    let used = s.used.get() - 1; // unpin
    s.used.set(used);
    if used == 0 {
        // SAFETY: no live block, on no list, owned.
        unsafe { release_span(s) };
        return;
    }
    park_full(h, s);
}

/// Puts an owned span with no free block on the full list and asks for a remote-free
/// notification (armed once per span: unparking leaves it armed, see [`remote::arm`]).
fn park_full(h: &Heap, s: &Span) {
    debug_assert!(s.free.get().is_null());
    s.owner.store(h.addr() | OWNER_FULL, Ordering::Relaxed);
    s.set_tag(ListTag::Full);
    h.full.push_front(s);
    watch_full(h, s);
}

/// Asks to hear of the next remote free into `s`, parked on `h`'s full list (unless the span is
/// already on the delayed list, which comes to the same; a delivery still on its way is waited
/// out); takes it back at once if blocks came meanwhile, since the request would otherwise wait
/// for the next free.
fn watch_full(h: &Heap, s: &Span) {
    remote::arm(&s.remote);
    if remote::has_remote(&s.remote) {
        take_back(h, s);
    }
}

/// Takes a parked span whose remote list has blocks back onto the partial list, with them.
fn take_back(h: &Heap, s: &Span) {
    unpark(h, s);
    collect_remote(s);
    if s.used.get() == 0 {
        span_emptied(s, h);
    }
}

/// Moves a span from the full list to the back of the partial list: refills take the spans that
/// had longest to gather frees first. At the front, random frees into full spans had refills move
/// on a block or two at a time (C `churn`: 7 % more instructions, 19 % more peak RSS; the Rust
/// suite the same either way; `bench/RESULTS.md`).
fn unpark(h: &Heap, s: &Span) {
    debug_assert_eq!(s.tag(), ListTag::Full);
    h.full.unlink(s);
    s.owner.store(h.addr(), Ordering::Relaxed);
    s.set_tag(ListTag::Partial);
    h.classes[s.class.get() as usize].partial.push_back(s);
}

/// Takes the spans other threads delivered to `h` (see `remote`). `exiting`: `h`'s thread is
/// abandoning it, so parked spans are left for `give_away` instead of being watched again.
///
/// `h` must be this thread's heap or the shared heap under its lock.
pub(super) fn process_delayed(h: &Heap, exiting: bool) {
    let mut p = remote::take_delayed(&h.delayed);
    while p != 0 {
        // SAFETY: a delivered span stays allocated, owned by `h`, until `h` takes it off this
        // list (its release is deferred, `release_span`); published Release, taken Acquire.
        let s = unsafe { &*(p as *const Span) };
        p = s.delayed_next.load(Ordering::Relaxed);
        remote::take_delivered(&s.remote);
        match s.tag() {
            ListTag::Releasing => {
                s.set_tag(ListTag::None);
                // SAFETY: an empty span on no list, owned by `h`, no longer on the delayed list.
                unsafe { release_span(s) };
            }
            ListTag::Full if !exiting => {
                if remote::has_remote(&s.remote) {
                    take_back(h, s);
                } else {
                    // Its blocks were collected while it was taken back and parked again.
                    watch_full(h, s);
                }
            }
            // Current or partial: its remote list is collected when the class needs blocks.
            // When exiting, `give_away` collects it.
            _ => {}
        }
    }
}

/// A free brought an owned, non-current span's count of used blocks to zero.
///
/// `extern "C"` (it cannot unwind), so that the C `free` calls it in tail position. The heap is
/// the second argument: the frees that call it keep the freed block in the first argument's
/// register from their entry and the heap in the second's, so neither moves on their hit.
#[cold]
#[inline(never)]
pub(crate) extern "C" fn span_emptied(s: &Span, h: &Heap) {
    let _inside = h.enter();
    // As in `wake_parked`: the trimmer may have given the span back since the free.
    if s.owner_word() & !OWNER_FULL != h.addr()
        || s.used.get() != 0
        || !matches!(s.tag(), ListTag::Partial | ListTag::Full)
    {
        return;
    }
    let bytes = s.npages.get() as usize * crate::size_class::PAGE_SIZE;
    if s.tag() == ListTag::Partial && h.empty_kept.get() + bytes <= EMPTY_KEEP {
        // Kept on the partial list for the next refill of its class: a program that frees a
        // batch and allocates it again does not go through the page heap each time.
        h.empty_kept.set(h.empty_kept.get() + bytes);
        return;
    }
    if s.tag() == ListTag::Partial {
        h.classes[s.class.get() as usize].partial.unlink(s);
    } else {
        h.full.unlink(s);
    }
    s.set_tag(ListTag::None);
    // SAFETY: no live block, and we just took it off its list.
    unsafe { release_span(s) };
}

/// A local free into a span the heap parked as full: back to the partial list, at the front, so
/// that the next refill of its class reuses the block just freed (see [`unpark`]).
///
/// # Safety
/// `h` owns `span`, which is parked full; `p` is a live block of `span`.
///
/// Out of line in builds without optimisation (`dev`), where inlining does not shorten the
/// code but adds this body's locals to the frame of every free path that inlines it.
#[cfg_attr(not(specalloc_out_of_line), inline(always))]
#[cfg_attr(specalloc_out_of_line, inline(never))]
pub(super) unsafe fn free_to_parked(h: &Heap, span: &Span, p: *mut u8) {
    let class = span.class.get() as usize;
    // SAFETY: we own the span; `p` is one of its blocks. A span's class is below `SPAN_CLASSES`
    // (unchecked: a bounds check's panic call would give the inlining free path a frame).
    unsafe {
        span.push_local(p.cast());
        let used = span.used.get() - 1;
        span.used.set(used);
        inc(h.frees.get_unchecked(class));
        if used <= *WAKE_AT_USED.get_unchecked(class) {
            wake_parked(h, span, used);
        }
    }
}

/// A parked span got enough blocks back: to the partial list (and, if empty, on as any
/// emptied partial span goes: kept for reuse up to the heap's bound, else to the page heap, so
/// that a class of one block per span does not go to the page heap on every free).
///
/// `extern "C"` (it cannot unwind), so that the C `free`, which inlines the parked case, calls
/// it in tail position.
#[cold]
#[inline(never)]
extern "C" fn wake_parked(h: &Heap, span: &Span, used: u32) {
    let _inside = h.enter();
    // The free that called this happened before the trim lock was taken: meanwhile the trimmer
    // may have given the span back (it had no live block left), and it is no longer ours.
    if span.owner_word() != h.addr() | OWNER_FULL || span.tag() != ListTag::Full {
        return;
    }
    unpark(h, span);
    if used == 0 {
        span_emptied(span, h);
    }
}

/// A span parked full goes back to the partial list once this many of its blocks (or a
/// quarter of them, if fewer) came back to it: until then the blocks wait on its free list and
/// refills take other spans, so that a program that frees one block and allocates one does not
/// move the span between the lists on every pair (snmalloc waits for a quarter of a slab, up to
/// 32 blocks). A free before the wake-up is a push and a count, inline in the free path
/// (`fast.rs`).
///
/// Small, because blocks that wait go cold: at 32, a refill took a parked span whose free list
/// had gathered over thousands of frees, and C `larson` on one thread took 1.15x the wall time
/// it takes at 4 (C `churn` 1.12x; interleaved pairs), for 0.5 % fewer instructions on an
/// insert-only BTreeMap churn (callgrind: 439.4 M at 32, 441.7 M at 4, 448.4 M at 1; mimalloc
/// 439.6 M). The Rust suite's programs execute the same instructions at 4 as at 32 (within
/// 0.06 %), its `btree` 404.1 M against mimalloc's 412.9 M.
const WAKE_BLOCKS_MAX: usize = 4;

/// For each span class, the `used` count at which a parked span wakes (see
/// [`WAKE_BLOCKS_MAX`]).
static WAKE_AT_USED: [u32; SPAN_CLASSES] = {
    let mut t = [0u32; SPAN_CLASSES];
    let mut c = 1;
    while c < SPAN_CLASSES {
        let blocks = span_blocks(c);
        let wake = if blocks / 4 < WAKE_BLOCKS_MAX {
            blocks / 4
        } else {
            WAKE_BLOCKS_MAX
        };
        t[c] = (blocks - wake) as u32;
        c += 1;
    }
    t
};

/// Gives the calling thread's empty spans (those kept for reuse, and those emptied by remote
/// frees not yet collected) and its reserve of page runs back to the page heap. Returns the
/// bytes released.
pub(crate) fn trim_thread() -> usize {
    request_handover();
    let heap = current_heap();
    if heap == empty_heap() {
        return 0;
    }
    // SAFETY: this thread's live heap.
    let h = unsafe { &*heap };
    let _inside = h.enter();
    publish_outboxes(h);
    process_delayed(h, false);
    let mut bytes = 0;
    for cc in &h.classes[1..] {
        cc.partial.retain(|s| {
            collect_remote(s);
            if s.used.get() != 0 {
                return true;
            }
            bytes += s.npages.get() as usize * crate::size_class::PAGE_SIZE;
            s.set_tag(ListTag::None);
            // SAFETY: an owned span with no live block, just taken off its list.
            unsafe { release_span(s) };
            false
        });
    }
    h.empty_kept.set(0);
    bytes + super::reserve::release(h)
}
