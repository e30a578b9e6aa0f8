//! The end-of-model checks of the loom world (`World::settle`, `World::check_final`).

use std::sync::atomic::Ordering::SeqCst;

use loom::sync::atomic::Ordering;

use super::proto::PoolSpan;
use super::{Desc, World, BLOCKS, CLASSES, TAG_CENTRAL, TAG_CURRENT};

impl World {
    /// How often the pools hold descriptor `d` (in any life).
    fn pooled(&self, d: usize) -> (usize, Option<usize>) {
        let desc: *const Desc = &self.descs[d];
        let mut n = 0;
        let mut at = None;
        for (c, p) in self.pools.iter().enumerate() {
            for &s in p.lock().unwrap().0.iter() {
                // SAFETY: pool members are handles of the `World`.
                let h = unsafe { &*s };
                if std::ptr::eq(h.desc, desc) {
                    assert_eq!(h.life, self.life(d), "a pool holds an earlier life");
                    n += 1;
                    at = Some(c);
                }
            }
        }
        (n, at)
    }

    /// After every thread has joined: a full sweep of each pool gives back exactly its spans
    /// with no live block, then every descriptor's books balance ([`World::check_final`]).
    pub fn settle(&self) {
        for c in 0..CLASSES {
            let empty = (0..self.descs.len())
                .filter(|&d| {
                    self.life(d) != 0
                        && self.pooled(d) == (1, Some(c))
                        && self.descs[d].live_blocks().is_empty()
                })
                .count();
            assert_eq!(
                self.sweep(c),
                empty,
                "a full sweep of pool {c} in a settled world"
            );
        }
        self.check_final();
    }

    /// After every thread has joined: each descriptor's earlier lives were released once, and
    /// its current life is released (empty, unpooled), pooled once in its class's pool, or
    /// owned, with its `used` count and free list matching its live blocks.
    pub fn check_final(&self) {
        for (d, desc) in self.descs.iter().enumerate() {
            let life = self.life(d);
            for l in 1..life {
                assert_eq!(
                    self.releases(d, l),
                    1,
                    "descriptor {d}'s life {l} not released once"
                );
            }
            if life == 0 {
                continue;
            }
            let live = desc.live_blocks();
            let (pooled, at) = self.pooled(d);
            let h = self.current(d);
            if desc.in_page_heap.load(SeqCst) == 1 {
                assert_eq!(self.releases(d, life), 1);
                assert!(live.is_empty(), "span released with live blocks");
                assert_eq!(pooled, 0, "released span left in a central pool");
                assert_eq!(desc.remote.load(Ordering::Relaxed), 0);
                continue;
            }
            assert_eq!(self.releases(d, life), 0);
            let tag = desc.tag.load(Ordering::Relaxed);
            match tag {
                TAG_CENTRAL => {
                    assert_eq!(
                        (pooled, at),
                        (1, Some(h.class())),
                        "pooled span not in its pool once"
                    );
                    assert_eq!(desc.owner.load(Ordering::Relaxed), 0);
                }
                TAG_CURRENT => {
                    assert_eq!(pooled, 0, "owned span in a central pool");
                    assert_ne!(
                        desc.owner.load(Ordering::Relaxed),
                        0,
                        "owned span with no owner"
                    );
                }
                t => panic!("descriptor {d} lost: tag {t}, not released"),
            }
            h.collect_remote();
            let pin = u32::from(tag == TAG_CURRENT);
            assert_eq!(
                desc.used(),
                live.len() as u32 + pin,
                "used count does not match the live blocks"
            );
            // SAFETY: every thread has joined.
            let mut free = desc.free.with(|f| unsafe { (*f).clone() });
            free.sort_unstable();
            let want: Vec<usize> = (0..BLOCKS).filter(|b| !live.contains(b)).collect();
            assert_eq!(
                free, want,
                "free list does not hold exactly the free blocks"
            );
        }
    }
}
