//! Regression tests for the two memory-safety bugs of the old tiny allocator (Go-style 16-byte
//! blocks shared by several objects, with tokens riding on the remote-free lists), as the
//! adversarial review reproduced them. Both crashed the old allocator (SIGSEGV, or a live block
//! handed out twice); both must now run clean with every object's contents intact.
//!
//! 1. A thread that owns full spans exits while other threads are freeing into them: a
//!    notification re-armed during the exit delivered to a heap that was already back in the
//!    pool (a null owner dereferenced).
//! 2. A span delivered to its owner (a notification in flight) was given back to the page heap
//!    once the owner freed every block itself; the owner then read the freed page when it took
//!    its delayed list.

#![allow(clippy::vec_box)] // the boxes are the point: one allocation each

use std::sync::mpsc;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

/// A cookie for the object at address `p`.
fn cookie32(p: usize) -> u32 {
    (p as u32).wrapping_mul(0x9E37_79B9) ^ 0x5A5A_5A5A
}

fn cookie64(p: usize) -> u64 {
    (p as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xA5A5_5A5A_F00D_CAFE
}

/// Boxes of `u32` carrying their own address's cookie.
fn boxes32(n: usize) -> Vec<Box<u32>> {
    (0..n)
        .map(|_| {
            let mut b = Box::new(0u32);
            *b = cookie32(&*b as *const u32 as usize);
            b
        })
        .collect()
}

fn check32(b: &u32) {
    assert_eq!(
        *b,
        cookie32(b as *const u32 as usize),
        "object contents changed"
    );
}

/// Repro 1: a spawned thread allocates 2,000 `Box<u32>`, sends them to main and waits; main
/// frees the objects at `addr % 16 == 0`; the thread exits; main frees those at `addr % 16 == 4`,
/// then the rest.
#[test]
fn frees_into_spans_of_an_exiting_thread() {
    for _round in 0..3 {
        let (tx, rx) = mpsc::channel::<Vec<Box<u32>>>();
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            tx.send(boxes32(2000)).unwrap();
            // Wait until main has freed the first quarter, then exit.
            go_rx.recv().unwrap();
        });
        let all = rx.recv().unwrap();
        let (mut first, mut rest): (Vec<_>, Vec<_>) = all
            .into_iter()
            .partition(|b| (&**b as *const u32 as usize).is_multiple_of(16));
        for b in first.drain(..) {
            check32(&b);
            drop(b);
        }
        go_tx.send(()).unwrap();
        t.join().unwrap();
        let (second, third): (Vec<_>, Vec<_>) = rest
            .drain(..)
            .partition(|b| &**b as *const u32 as usize % 16 == 4);
        for b in second {
            check32(&b);
            drop(b);
        }
        for b in third {
            check32(&b);
            drop(b);
        }
    }
    // Every object is back: allocate and check another batch.
    let again = boxes32(10_000);
    again.iter().for_each(|b| check32(b));
}

/// Repro 2: use up the owner's allowance of kept empty spans; fill spans of the 8-byte class
/// (and of the tiny class) so that one is parked full; another thread frees one object of that
/// span (a notification: the span is delivered to the owner); the owner frees all the span's
/// other objects; then it allocates 3,000-byte boxes and more small ones, which must not
/// overlap any live object.
#[test]
fn owner_empties_a_delivered_span() {
    for round in 0..3 {
        // Use up the keep-empty allowance.
        let pages: Vec<Box<[u8; 8192]>> = (0..300).map(|_| Box::new([round as u8; 8192])).collect();
        drop(pages);

        let mut small: Vec<Box<u64>> = (0..4000)
            .map(|_| {
                let mut b = Box::new(0u64);
                *b = cookie64(&*b as *const u64 as usize);
                b
            })
            .collect();
        let mut tiny = boxes32(6000);

        // The page (span) of the earliest objects: parked full by now, and all ours if all
        // its blocks are in our vector.
        let page_of = |p: usize| p & !8191;
        // (A page holding the most of our objects is a whole span of ours.)
        let pick = |addrs: Vec<usize>| -> Option<usize> {
            let mut counts = std::collections::BTreeMap::new();
            for a in &addrs {
                *counts.entry(page_of(*a)).or_insert(0usize) += 1;
            }
            let most = *counts.values().max()?;
            addrs
                .iter()
                .map(|a| page_of(*a))
                .find(|pg| counts[pg] == most)
        };
        let small_page = pick(small.iter().map(|b| &**b as *const u64 as usize).collect());
        let tiny_page = pick(tiny.iter().map(|b| &**b as *const u32 as usize).collect());

        // Another thread frees one object of each chosen span.
        let mut remote_small = None;
        if let Some(pg) = small_page {
            let i = small
                .iter()
                .position(|b| page_of(&**b as *const u64 as usize) == pg)
                .unwrap();
            remote_small = Some(small.swap_remove(i));
        }
        let mut remote_tiny = None;
        if let Some(pg) = tiny_page {
            let i = tiny
                .iter()
                .position(|b| page_of(&**b as *const u32 as usize) == pg)
                .unwrap();
            remote_tiny = Some(tiny.swap_remove(i));
        }
        std::thread::spawn(move || {
            if let Some(b) = remote_small {
                assert_eq!(*b, cookie64(&*b as *const u64 as usize));
                drop(b);
            }
            if let Some(b) = remote_tiny {
                check32(&b);
                drop(b);
            }
        })
        .join()
        .unwrap();

        // The owner frees the rest of those spans.
        small.retain(|b| {
            let p = &**b as *const u64 as usize;
            assert_eq!(**b, cookie64(p));
            Some(page_of(p)) != small_page
        });
        tiny.retain(|b| {
            check32(b);
            Some(page_of(&**b as *const u32 as usize)) != tiny_page
        });

        // Allocations that take the slow path (and the owner's delayed list) and reuse pages.
        let big: Vec<Box<[u8; 3000]>> = (0..400).map(|i| Box::new([i as u8; 3000])).collect();
        let more_small: Vec<Box<u64>> = (0..3000)
            .map(|_| {
                let mut b = Box::new(0u64);
                *b = cookie64(&*b as *const u64 as usize);
                b
            })
            .collect();
        let more_tiny = boxes32(5000);
        for (i, b) in big.iter().enumerate() {
            assert!(
                b.iter().all(|&x| x == i as u8),
                "a 3,000-byte box was overwritten"
            );
        }
        for b in small.iter().chain(&more_small) {
            assert_eq!(
                **b,
                cookie64(&**b as *const u64 as usize),
                "a live box was reused"
            );
        }
        for b in tiny.iter().chain(&more_tiny) {
            check32(b);
        }
        let mut addrs: Vec<usize> = small
            .iter()
            .chain(&more_small)
            .map(|b| &**b as *const u64 as usize)
            .chain(
                tiny.iter()
                    .chain(&more_tiny)
                    .map(|b| &**b as *const u32 as usize),
            )
            .collect();
        addrs.sort_unstable();
        addrs.dedup();
        assert_eq!(
            addrs.len(),
            small.len() + more_small.len() + tiny.len() + more_tiny.len(),
            "a block was handed out twice"
        );
    }
}
