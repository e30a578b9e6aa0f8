//! loom models of a span descriptor's reuse, compiled from the runtime's own protocol source
//! (`src/heap/central_proto.rs`; the world is `tests/loom_pool/mod.rs`, which says what is
//! checked). A pooled span is emptied by frees from other threads and given back to the page
//! heap by a sweep; its descriptor is then set up again for a new owner (a new *life*) while
//! threads of the old life are still running: a freeing thread after its push (with its share
//! of the sweeping, in the pool of the class it read before the push), a sweeper continuing
//! its sweep, an adopter. The models check that nothing of the old life reaches the new one:
//! the released span had no remote free pending and no block live, no thread of the old life
//! touches the descriptor after its release (every access the protocol makes names its life),
//! the new life's setup is ordered after every access of the old (loom's cells), and no pool
//! holds the descriptor in its old life.
//!
//! Every model is exhaustive (`loom::model`, no preemption bound).

mod loom_pool;

use loom::sync::Arc;
use loom_pool::{Start, World, HEAP_NEW, HEAP_OLD};

/// A pooled span of class 0 with two live blocks, held by two threads. One frees its block and
/// then sweeps as it goes (in class 0's pool, the class it read before its push); the other
/// frees its block and sweeps the pool, which may give the span back. Meanwhile a third thread
/// takes fresh pages: if the span's are free, it sets the descriptor up as its current span of
/// class 1 with a block handed out, then exits, pooling it in class 1.
#[test]
fn released_span_reused_for_another_class_vs_late_free_and_sweep() {
    loom::model(|| {
        let w = Arc::new(World::new(&[Start::Pooled(0, &[0, 1])]));
        let w1 = w.clone();
        let t1 = loom::thread::spawn(move || w1.free_foreign(0, 0, 1, true));
        let w2 = w.clone();
        let t2 = loom::thread::spawn(move || {
            w2.free_foreign(0, 1, 1, false);
            w2.sweep(0);
        });
        let reused = w
            .fresh(0, 1, HEAP_NEW, &[0])
            .map(|h| w.owner_exits(h))
            .is_some();
        t1.join().unwrap();
        t2.join().unwrap();
        w.settle();
        assert_eq!(w.releases(0, 1), 1, "the old life not given back once");
        assert_eq!(w.life(0), 1 + usize::from(reused));
        if reused {
            // The new life's block is still live: pooled in class 1, not given back.
            assert_eq!(w.releases(0, 2), 0);
            w.free_foreign(0, 0, 2, false);
            assert_eq!(w.sweep(1), 1);
            assert_eq!(w.releases(0, 2), 1);
            w.check_final();
        }
    });
}

/// A pooled span of class 0 with one live block: a thread frees it, sweeping as it goes; a
/// second thread sweeps the pool, then refills from it (adopting whatever span is pooled,
/// in whichever life); a third takes fresh pages and, if the span's are free, sets the
/// descriptor up again in the same class, hands out a block, and exits, pooling it again in
/// the same pool, where the old life's sweeps and the refill can find it.
#[test]
fn released_span_reused_in_its_class_vs_old_sweeper_and_adopter() {
    loom::model(|| {
        let w = Arc::new(World::new(&[Start::Pooled(0, &[0])]));
        let w1 = w.clone();
        let t1 = loom::thread::spawn(move || w1.free_foreign(0, 0, 1, true));
        let w2 = w.clone();
        let t2 = loom::thread::spawn(move || {
            w2.sweep(0);
            w2.adopt_and_alloc(0, HEAP_OLD)
        });
        let reused = w
            .fresh(0, 0, HEAP_NEW, &[1])
            .map(|h| w.owner_exits(h))
            .is_some();
        t1.join().unwrap();
        let adopted = t2.join().unwrap();
        w.settle();
        match adopted {
            // The old life adopted: its block was freed (remote, collected), one handed out.
            Some((0, 1, _)) => assert!(!reused && w.releases(0, 1) == 0),
            // The new life adopted after the old one's release.
            Some((0, 2, _)) => assert!(reused && w.releases(0, 1) == 1 && w.releases(0, 2) == 0),
            Some(other) => panic!("adopted {other:?}"),
            None => assert_eq!(w.releases(0, 1), 1),
        }
    });
}

/// The old life's last free races with its sweep and with two fresh-page setups: the pages
/// are taken at most once per release, and a setup that finds them taken gets nothing.
#[test]
fn released_span_taken_once_by_racing_setups() {
    loom::model(|| {
        let w = Arc::new(World::new(&[Start::Pooled(1, &[1])]));
        let w1 = w.clone();
        let t1 = loom::thread::spawn(move || {
            w1.free_foreign(0, 1, 1, true);
            w1.sweep(1);
        });
        let w2 = w.clone();
        let t2 = loom::thread::spawn(move || w2.fresh(0, 0, HEAP_OLD, &[0]).is_some());
        let mine = w.fresh(0, 1, HEAP_NEW, &[1]).is_some();
        t1.join().unwrap();
        let theirs = t2.join().unwrap();
        assert!(!(mine && theirs), "the pages handed out twice");
        assert_eq!(w.life(0), 1 + usize::from(mine || theirs));
        w.settle();
    });
}
