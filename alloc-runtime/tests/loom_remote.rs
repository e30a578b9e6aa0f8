//! loom models of the cross-thread free protocol (`src/remote_proto.rs`, compiled here with
//! loom's atomics): every block freed by another thread reaches its span's owner exactly once;
//! a span delivered to its owner's delayed list is taken off it exactly once; nothing is
//! delivered to an owner after it has quiesced its spans to exit (abandon), and whoever adopts
//! the span finds every block; and a span released to the page heap is never touched again by a
//! freeing thread, even when its release races with a delivery (the release is deferred until
//! the owner takes the span off its delayed list).
//!
//! The owner's side mirrors `src/heap/slow.rs` and `src/heap/abandon.rs` step by step
//! (`park_full`, `watch_full`, `take_back`, `unpark`, `collect_remote`, `process_delayed`, `release_span`,
//! `abandon`); every atomic step is the shared protocol's. Each freed chain carries its length,
//! which the remote word counts: every taken list is walked here and must be as long as its
//! count says. Spans of the 4-byte class link their blocks through chunk offsets, others through
//! addresses; the models use both.

#![allow(dead_code)]

mod loom_arena;

use loom_arena::arena;

mod proto {
    pub use loom::sync::atomic::{AtomicUsize, Ordering};

    pub fn spin_loop() {
        loom::thread::yield_now();
    }

    /// The runtime's chunk size minus one: links are chunk offsets.
    pub const LINK_MASK: usize = (4 << 20) - 1;

    include!("../src/remote_proto.rs");
}

use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use proto::{Pushed, DELIVERED, NOTIFY, STATE_MASK};

/// Block `i` of the model (8-byte slots from offset 64). Tests run in parallel threads of one
/// process: each uses its own range of blocks.
fn block(i: usize) -> usize {
    arena() + 64 + 8 * i
}

/// A stand-in for a heap: its delayed word.
struct Heap {
    delayed: AtomicUsize,
}

/// A stand-in for a span: the remote word, the owner word and the delayed-list link.
struct Span {
    remote: AtomicUsize,
    owner: AtomicUsize,
    delayed_next: AtomicUsize,
    /// Its blocks link with addresses (a class of 8 bytes or more), not chunk offsets (the
    /// 4-byte class).
    wide: bool,
}

/// A remote word value no protocol step produces: written at release, so any later touch by a
/// freeing thread shows at the end.
const RELEASED: usize = 0xdead_0000;

impl Span {
    /// A span of the 4-byte class, owned by `owner`.
    fn new(owner: &Arc<Heap>) -> Arc<Span> {
        Span::with_links(owner, false)
    }

    /// A span of a class of 8 bytes or more, owned by `owner`.
    fn new_wide(owner: &Arc<Heap>) -> Arc<Span> {
        Span::with_links(owner, true)
    }

    fn with_links(owner: &Arc<Heap>, wide: bool) -> Arc<Span> {
        Arc::new(Span {
            remote: AtomicUsize::new(0),
            owner: AtomicUsize::new(Arc::as_ptr(owner) as usize),
            delayed_next: AtomicUsize::new(0),
            wide,
        })
    }
}

/// Walks a taken list (its head and the count the remote word gave with it), returning its
/// blocks; the count must be the list's length, which the runtime's owner takes on trust when it
/// takes a list without walking it.
fn walk((mut b, count): (usize, usize), wide: bool) -> Vec<usize> {
    let mut out = Vec::new();
    while b != 0 {
        out.push(b);
        // SAFETY: the list was taken by this thread; its blocks are in the arena, 8-byte slots.
        b = unsafe { proto::link_as(b, wide) };
    }
    assert_eq!(
        out.len(),
        count,
        "the remote word's count is not the list's length"
    );
    out
}

/// The model's delivery gate: counts, outside loom's model (a plain `std` atomic), the
/// deliveries entered and left, which must balance.
struct Gate;

static GATE: std::sync::atomic::AtomicIsize = std::sync::atomic::AtomicIsize::new(0);

impl proto::DeliveryGate for Gate {
    fn enter(&self) {
        GATE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
    fn leave(&self) {
        GATE.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A remote free of block `b` into `span` (`heap::slow::free_slow`'s remote branch).
fn free(span: &Span, b: usize) -> Pushed {
    free_batch(span, &[b])
}

/// Remote frees of `blocks` into `span` gathered in a freeing thread's outbox and published in
/// one step (`heap::slow::free_batched` and `publish`): linked from the last freed to the
/// first, as the outbox links them.
fn free_batch(span: &Span, blocks: &[usize]) -> Pushed {
    for w in blocks.windows(2) {
        // SAFETY: arena blocks this thread freed and owns until the push publishes them.
        unsafe { proto::set_link_as(w[1], w[0], span.wide) };
    }
    let (head, tail) = (blocks[blocks.len() - 1], blocks[0]);
    // SAFETY: arena blocks freed once; heap addresses in owner words are live `Heap`s (the
    // `Arc`s outlive the threads).
    unsafe {
        proto::free_remote_chain(
            &span.remote,
            &span.owner,
            head,
            tail,
            blocks.len(),
            span.wide,
            &Gate,
            |h| {
                let heap = &*(h as *const Heap);
                proto::push_delayed(
                    &heap.delayed,
                    span as *const Span as usize,
                    &span.delayed_next,
                );
            },
        )
    }
}

/// The owner's view of one span (owner-only fields of `span::Span`), and of its heap.
struct Owner {
    heap: Arc<Heap>,
    span: Arc<Span>,
    /// Blocks collected from the span's lists.
    got: Vec<usize>,
    /// Blocks handed out and not yet collected back.
    used: u32,
    /// The span's list: 'F' full, 'P' partial, 'R' releasing, 'N' none, 'X' released.
    tag: char,
    /// Times the span was taken off the delayed list.
    taken: u32,
}

impl Owner {
    fn new(heap: Arc<Heap>, span: Arc<Span>, used: u32) -> Owner {
        Owner {
            heap,
            span,
            got: Vec::new(),
            used,
            tag: 'N',
            taken: 0,
        }
    }

    fn addr(&self) -> usize {
        Arc::as_ptr(&self.heap) as usize
    }

    /// `collect_remote`.
    fn collect(&mut self) -> u32 {
        let got = walk(proto::take_remote(&self.span.remote), self.span.wide);
        self.used -= got.len() as u32;
        self.got.extend(&got);
        got.len() as u32
    }

    /// `park_full` + `watch_full`.
    fn park_full(&mut self) {
        self.span.owner.store(self.addr() | 1, Ordering::Relaxed);
        self.tag = 'F';
        self.watch();
    }

    /// `watch_full`: arm the request (once per span; it may still be armed), then look.
    fn watch(&mut self) {
        proto::arm(&self.span.remote);
        if proto::has_remote(&self.span.remote) {
            self.take_back();
        }
    }

    /// `take_back`: off the full list, with the remote blocks.
    fn take_back(&mut self) {
        self.unpark();
        self.collect();
        if self.used == 0 {
            self.release();
        }
    }

    /// `unpark` (a local free or a delivered span takes it off the full list): no atomic
    /// read-modify-write; the request stays armed.
    fn unpark(&mut self) {
        self.span.owner.store(self.addr(), Ordering::Relaxed);
        self.tag = 'P';
    }

    /// `release_span`.
    fn release(&mut self) {
        assert_eq!(self.used, 0);
        if proto::quiesce(&self.span.remote) {
            self.tag = 'R';
            return;
        }
        assert_eq!(
            self.span.remote.load(Ordering::Relaxed),
            0,
            "released with blocks"
        );
        self.span.remote.store(RELEASED, Ordering::Relaxed);
        self.tag = 'X';
    }

    /// A refill collects the remote list until every block is back, then the emptied span is
    /// released (`release_span`).
    fn collect_all_and_release(&mut self) {
        while self.used > 0 {
            if self.collect() == 0 {
                loom::thread::yield_now();
            }
        }
        self.release();
    }

    /// `process_delayed`.
    fn process_delayed(&mut self, exiting: bool) {
        let mut p = proto::take_delayed(&self.heap.delayed);
        while p != 0 {
            assert_eq!(
                p,
                Arc::as_ptr(&self.span) as usize,
                "a foreign span delivered"
            );
            p = self.span.delayed_next.load(Ordering::Relaxed);
            self.taken += 1;
            proto::take_delivered(&self.span.remote);
            match self.tag {
                'R' => self.release(),
                'F' if !exiting => {
                    if proto::has_remote(&self.span.remote) {
                        self.take_back();
                    } else {
                        self.watch();
                    }
                }
                'X' => panic!("a released span was delivered"),
                _ => {}
            }
        }
    }

    /// `abandon`: quiesce, last drain of the delayed list, then give the span away.
    fn abandon(&mut self) {
        proto::quiesce(&self.span.remote);
        self.process_delayed(true);
        assert_eq!(self.heap.delayed.load(Ordering::Relaxed), 0);
        if self.tag == 'X' {
            return;
        }
        self.collect();
        self.span.owner.store(0, Ordering::Relaxed);
        self.tag = 'N';
    }
}

/// The end state of a model: no delivery claimed and not yet taken off the delayed list (the
/// request may still be armed: unparking leaves it so).
fn assert_no_delivery_pending(span: &Span) {
    let state = span.remote.load(Ordering::Relaxed) & STATE_MASK;
    assert!(
        state == 0 || state == NOTIFY,
        "a delivery left pending: state {state}"
    );
}

/// The end of a model that empties the span: released exactly once, never touched afterwards.
fn assert_released(o: &Owner, span: &Span) {
    assert_eq!(o.tag, 'X', "span not released");
    assert_eq!(
        span.remote.load(Ordering::Relaxed),
        RELEASED,
        "span touched after release"
    );
}

fn new_heap() -> Arc<Heap> {
    Arc::new(Heap {
        delayed: AtomicUsize::new(0),
    })
}

/// Two threads free blocks of a span while its owner collects: every block arrives once.
#[test]
fn remote_free_and_collect() {
    loom::model(|| {
        let heap = new_heap();
        let span = Span::new_wide(&heap);
        let (b1, b2) = (block(11), block(12));
        let s1 = span.clone();
        let t1 = loom::thread::spawn(move || free(&s1, b1));
        let s2 = span.clone();
        let t2 = loom::thread::spawn(move || free(&s2, b2));
        let mut got = walk(proto::take_remote(&span.remote), span.wide);
        assert_eq!(t1.join().unwrap(), Pushed::ToSpan);
        assert_eq!(t2.join().unwrap(), Pushed::ToSpan);
        got.extend(walk(proto::take_remote(&span.remote), span.wide));
        got.sort();
        assert_eq!(got, vec![b1, b2]);
        assert_eq!(heap.delayed.load(Ordering::Relaxed), 0);
    });
}

/// The owner parks a span full; a free claims the notification and delivers the span, while the
/// owner takes its delayed list: the block arrives once, the span is taken off the list once,
/// and afterwards it is parked and watched again or back on the partial list.
#[test]
fn park_deliver_process() {
    loom::model(|| {
        let heap = new_heap();
        let span = Span::new(&heap);
        let mut o = Owner::new(heap.clone(), span.clone(), 2);
        o.park_full();
        let b = block(21);
        let s = span.clone();
        let t = loom::thread::spawn(move || free(&s, b));
        o.process_delayed(false);
        let pushed = t.join().unwrap();
        o.process_delayed(false);
        if o.tag == 'F' {
            // Still parked: the block is on the remote list, watched.
            o.unpark();
            o.collect();
        }
        assert_eq!(o.got, vec![b]);
        assert_eq!(o.taken, u32::from(matches!(pushed, Pushed::Delivered(_))));
        assert_no_delivery_pending(&span);
        assert_eq!(heap.delayed.load(Ordering::Relaxed), 0);
    });
}

/// The owner parks a span full, then exits (quiesce, last drain, give away) while two threads
/// free into it; then a new owner adopts the span and parks it again, and a third free reaches
/// the new owner. Nothing is delivered to the old owner after its last drain, and every block
/// is found by one owner or the other.
#[test]
fn owner_exits_and_span_is_adopted() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(|| {
        let heap = new_heap();
        let span = Span::new(&heap);
        let mut o = Owner::new(heap.clone(), span.clone(), 3);
        o.park_full();
        let (b1, b2, b3) = (block(31), block(32), block(33));
        let s1 = span.clone();
        let t1 = loom::thread::spawn(move || free(&s1, b1));
        let s2 = span.clone();
        let t2 = loom::thread::spawn(move || free(&s2, b2));

        // Thread exit: abandon.
        o.abandon();
        let delivered_before_exit = o.taken;

        // Adoption (`refill` from the central pool): a new heap owns the span.
        let heap2 = new_heap();
        let mut n = Owner::new(heap2.clone(), span.clone(), o.used);
        n.got = std::mem::take(&mut o.got);
        span.owner.store(n.addr(), Ordering::Relaxed);
        n.collect();
        n.park_full();
        let s3 = span.clone();
        let t3 = loom::thread::spawn(move || free(&s3, b3));

        let p1 = t1.join().unwrap();
        let p2 = t2.join().unwrap();
        let p3 = t3.join().unwrap();
        assert_eq!(
            heap.delayed.load(Ordering::Relaxed),
            0,
            "late delivery to an exited heap"
        );
        n.process_delayed(false);
        if n.tag == 'F' {
            n.unpark();
        }
        if n.tag != 'X' {
            n.collect();
        }
        let mut got = n.got.clone();
        got.sort();
        assert_eq!(got, vec![b1, b2, b3]);
        let to_old = [p1, p2, p3]
            .iter()
            .filter(|p| **p == Pushed::Delivered(Arc::as_ptr(&heap) as usize))
            .count() as u32;
        assert_eq!(to_old, delivered_before_exit);
        assert_no_delivery_pending(&span);
    });
}

/// The span's last live block is freed by another thread (which delivers the span) while the
/// owner frees its own last block: the owner takes the span off the full list by itself,
/// collects the remote block and releases the span. If the delivery is still on the delayed
/// list, the release waits for the owner to take it off; the span is released exactly once, and
/// the freeing thread never touches it afterwards.
#[test]
fn release_races_delivery() {
    loom::model(|| {
        let heap = new_heap();
        let span = Span::new(&heap);
        // Two live blocks: one freed remotely, one by the owner.
        let mut o = Owner::new(heap.clone(), span.clone(), 2);
        o.park_full();
        let b = block(41);
        let s = span.clone();
        let t = loom::thread::spawn(move || free(&s, b));
        // The owner's own free into the parked span (`free_slow`'s owner branch).
        if o.tag == 'F' {
            o.unpark();
        }
        o.used -= 1;
        // A refill of the class collects the remote list, then the span is emptied.
        o.collect_all_and_release();
        let pushed = t.join().unwrap();
        // The next slow path takes the delayed list; a deferred release completes there.
        o.process_delayed(false);
        assert_released(&o, &span);
        assert_eq!(heap.delayed.load(Ordering::Relaxed), 0);
        assert_eq!(o.taken, u32::from(matches!(pushed, Pushed::Delivered(_))));
        assert_eq!(o.got, vec![b]);
    });
}

/// The owner parks a span, a free claims the notification, the owner takes the span back by
/// itself (a local free) and parks it again before the delivery has finished. Parking again
/// first waits out the delivery (`arm`); a span already delivered is not armed again but
/// comes off the delayed list, where the owner looks at it. The block arrives exactly once.
#[test]
fn repark_while_notifying() {
    loom::model(|| {
        let heap = new_heap();
        let span = Span::new(&heap);
        let mut o = Owner::new(heap.clone(), span.clone(), 3);
        o.park_full();
        let b = block(51);
        let s = span.clone();
        let t = loom::thread::spawn(move || free(&s, b));
        o.unpark(); // a local free
        o.used -= 1;
        o.park_full(); // full again
        let pushed = t.join().unwrap();
        let state = span.remote.load(Ordering::Relaxed) & STATE_MASK;
        assert!(
            state == NOTIFY
                || state == DELIVERED
                || (state == 0 && o.tag == 'P')
                || (state == 0 && matches!(pushed, Pushed::Delivered(_))),
            "state {state}, {pushed:?}"
        );
        o.process_delayed(false);
        if o.tag == 'F' {
            o.unpark();
        }
        o.collect();
        assert_eq!(o.got, vec![b]);
        assert_eq!(heap.delayed.load(Ordering::Relaxed), 0);
        assert_no_delivery_pending(&span);
    });
}

/// The owner takes its delayed list while a delivery is being completed (the span is already on
/// the list, its state not yet DELIVERED): taking the span off the list waits for the delivery.
#[test]
fn take_list_while_delivery_completes() {
    loom::model(|| {
        let heap = new_heap();
        let span = Span::new(&heap);
        let mut o = Owner::new(heap.clone(), span.clone(), 2);
        o.park_full();
        let b = block(61);
        let s = span.clone();
        let t = loom::thread::spawn(move || free(&s, b));
        // Poll the delayed list until the span arrives.
        while o.taken == 0 && !matches!(o.tag, 'P') {
            o.process_delayed(false);
            loom::thread::yield_now();
        }
        t.join().unwrap();
        o.process_delayed(false);
        assert_no_delivery_pending(&span);
    });
}

/// Taking a span back leaves its request armed: a remote free into the span while it is partial
/// claims the request and delivers the span all the same. The owner, which meanwhile takes its
/// delayed list (ignoring a span that is not parked), frees its own last block, collects the
/// remote one and releases the span, defers the release if the span is still on its delayed
/// list: the block arrives once, the span is taken off the list once and released once, and the
/// freeing thread never touches it afterwards.
#[test]
fn armed_request_outlives_unpark() {
    loom::model(|| {
        let heap = new_heap();
        let span = Span::new(&heap);
        let mut o = Owner::new(heap.clone(), span.clone(), 3);
        o.park_full();
        o.unpark(); // a local free; the request stays armed
        o.used -= 1;
        let b = block(71);
        let s = span.clone();
        let t = loom::thread::spawn(move || free(&s, b));
        o.process_delayed(false); // a slow path meanwhile
        o.used -= 1; // the owner's last local free
        o.collect_all_and_release();
        let pushed = t.join().unwrap();
        o.process_delayed(false);
        assert!(
            matches!(pushed, Pushed::Delivered(_)),
            "the armed request was not claimed: {pushed:?}"
        );
        assert_eq!(o.taken, 1);
        assert_released(&o, &span);
        assert_eq!(o.got, vec![b]);
        assert_eq!(heap.delayed.load(Ordering::Relaxed), 0);
    });
}

/// A batch of two blocks (a freeing thread's outbox) is published in one step while the owner,
/// which parked the span full, exits, and a single free races both; then a new owner adopts the
/// span. Every block arrives once, the batch's two together, and nothing is delivered to the old
/// owner after its last drain.
#[test]
fn batch_races_owner_exit_and_adoption() {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(|| {
        let heap = new_heap();
        let span = Span::new_wide(&heap);
        let mut o = Owner::new(heap.clone(), span.clone(), 3);
        o.park_full();
        let (b1, b2, b3) = (block(41), block(42), block(43));
        let s1 = span.clone();
        let t1 = loom::thread::spawn(move || free_batch(&s1, &[b1, b2]));
        let s2 = span.clone();
        let t2 = loom::thread::spawn(move || free(&s2, b3));

        o.abandon();
        let delivered_before_exit = o.taken;
        let batch_seen_by_old = o.got.contains(&b1);
        assert_eq!(o.got.contains(&b2), batch_seen_by_old, "half a batch");

        let heap2 = new_heap();
        let mut n = Owner::new(heap2.clone(), span.clone(), o.used);
        n.got = std::mem::take(&mut o.got);
        span.owner.store(n.addr(), Ordering::Relaxed);
        let p1 = t1.join().unwrap();
        let p2 = t2.join().unwrap();
        assert_eq!(
            heap.delayed.load(Ordering::Relaxed),
            0,
            "late delivery to an exited heap"
        );
        n.process_delayed(false);
        n.collect();
        let mut got = n.got.clone();
        got.sort();
        assert_eq!(got, vec![b1, b2, b3]);
        assert_eq!(n.used, 0);
        let to_old = [p1, p2]
            .iter()
            .filter(|p| **p == Pushed::Delivered(Arc::as_ptr(&heap) as usize))
            .count() as u32;
        assert_eq!(to_old, delivered_before_exit);
        assert_no_delivery_pending(&span);
    });
}
