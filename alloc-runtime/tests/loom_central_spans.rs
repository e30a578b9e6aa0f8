//! loom models of sweeps and adoptions over several pooled spans at once, compiled from the
//! runtime's own protocol source (`src/heap/central_proto.rs`; the world is
//! `tests/loom_pool/mod.rs`, which says what is checked). `loom_central.rs` models one span;
//! here a class's pool holds two or three, frees race into each, an owner exit pools another
//! and its short sweep (`SWEEP_ON_PUSH` spans, oldest first) takes the others, while other
//! threads sweep or adopt from the same pool.
//!
//! Every model is exhaustive (`loom::model`, no preemption bound).

mod loom_pool;

use loom::sync::Arc;
use loom_pool::{Start, World, HEAP_NEW};

/// Two pooled spans of one class (the first with one live block, the second with two), and an
/// owner's current span of that class with one. The owner exits (pooling its span, then a short
/// sweep of the two oldest: both pooled spans) while one thread frees the first span's last
/// block (sweeping as it goes) and another frees one of the second's and sweeps the whole pool.
/// The emptied span goes back exactly once; the others stay pooled, once each.
#[test]
fn exit_vs_frees_into_two_pooled_spans_vs_sweep() {
    loom::model(|| {
        let w = Arc::new(World::new(&[
            Start::Pooled(0, &[0]),
            Start::Pooled(0, &[0, 1]),
            Start::Current(0, &[0]),
        ]));
        let w1 = w.clone();
        let t1 = loom::thread::spawn(move || w1.free_foreign(0, 0, 1, true));
        let w2 = w.clone();
        let t2 = loom::thread::spawn(move || {
            w2.free_foreign(1, 0, 1, false);
            w2.sweep(0);
        });
        w.owner_exits(w.current(2));
        t1.join().unwrap();
        t2.join().unwrap();
        w.settle();
        assert_eq!(w.releases(0, 1), 1, "the emptied span not given back");
        assert_eq!(w.releases(1, 1), 0);
        assert_eq!(w.releases(2, 1), 0);
    });
}

/// Two pooled spans with one live block each: a thread frees both blocks (sweeping as it goes)
/// while another adopts from the pool and a third runs a short sweep, which takes both spans.
/// Each span is adopted, or given back exactly once; at most one is adopted.
#[test]
fn two_pooled_spans_frees_vs_adopt_vs_short_sweep() {
    loom::model(|| {
        let w = Arc::new(World::new(&[
            Start::Pooled(0, &[0]),
            Start::Pooled(0, &[1]),
        ]));
        let w1 = w.clone();
        let t1 = loom::thread::spawn(move || {
            w1.free_foreign(0, 0, 1, true);
            w1.free_foreign(1, 1, 1, true);
        });
        let w2 = w.clone();
        let t2 = loom::thread::spawn(move || w2.adopt_and_alloc(0, HEAP_NEW));
        w.sweep_short(0);
        t1.join().unwrap();
        let adopted = t2.join().unwrap().map(|(d, _, _)| d);
        w.settle();
        for d in 0..2 {
            assert_eq!(
                w.releases(d, 1),
                usize::from(adopted != Some(d)),
                "span {d}: given back iff not adopted"
            );
        }
    });
}

/// Two pooled spans, each emptied by a different thread, each of which then runs a short sweep:
/// the later sweep starts after both frees and takes both spans, so both go back, once each,
/// before any full sweep.
#[test]
fn two_emptied_pooled_spans_two_short_sweeps() {
    loom::model(|| {
        let w = Arc::new(World::new(&[
            Start::Pooled(0, &[0]),
            Start::Pooled(0, &[1]),
        ]));
        let w1 = w.clone();
        let t1 = loom::thread::spawn(move || {
            w1.free_foreign(0, 0, 1, false);
            w1.sweep_short(0);
        });
        w.free_foreign(1, 1, 1, false);
        w.sweep_short(0);
        t1.join().unwrap();
        assert_eq!(
            w.releases(0, 1),
            1,
            "span 0 left behind by the short sweeps"
        );
        assert_eq!(
            w.releases(1, 1),
            1,
            "span 1 left behind by the short sweeps"
        );
        w.settle();
    });
}

/// Three pooled spans, the oldest still live: a freeing thread empties the two newer ones
/// (sweeping as it goes) while an owner exit pools a fourth span and runs its short sweep. A
/// full sweep once everyone is done gives back exactly the emptied spans still pooled: none is
/// hidden behind the live one.
#[test]
fn emptied_spans_behind_a_live_one_vs_exit() {
    loom::model(|| {
        let w = Arc::new(World::new(&[
            Start::Pooled(0, &[0]),
            Start::Pooled(0, &[1]),
            Start::Pooled(0, &[0]),
            Start::Current(0, &[1]),
        ]));
        let w1 = w.clone();
        let t1 = loom::thread::spawn(move || {
            w1.free_foreign(1, 1, 1, true);
            w1.free_foreign(2, 0, 1, true);
        });
        w.owner_exits(w.current(3));
        t1.join().unwrap();
        w.settle();
        assert_eq!(w.releases(0, 1), 0);
        assert_eq!(w.releases(1, 1), 1);
        assert_eq!(w.releases(2, 1), 1);
        assert_eq!(w.releases(3, 1), 0);
    });
}
