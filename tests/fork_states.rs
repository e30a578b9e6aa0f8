//! `fork` while another thread is inside each lock and wait state of the allocator (parked
//! there by the runtime's test hooks): the prepare handler waits until the thread leaves the
//! lock or finishes its delivery, so the child never starts with a lock held or a span stuck
//! NOTIFYING, and can allocate, free, park and release spans and start threads. A child that
//! hangs is the bug under test. See `docs/fork.md` for the table of locks and wait states.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{exited_ok, fork_child, wait_child};
use specalloc_runtime::test_hooks::{self, ALL_LOCKS};

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

const CHILD_TIMEOUT: Duration = Duration::from_secs(10);

/// The tests set process-wide hooks and fork: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The child's work: every size range, spans filled and parked and emptied again, a thread.
fn child_work() -> bool {
    let mut v: Vec<Vec<u8>> = Vec::new();
    for i in 0..3000usize {
        let len = match i % 7 {
            0 => 1 + i % 4,
            1 => 5 + i % 11,
            2 => 48,
            3 => 16 + i % 1000,
            4 => 40_000,
            5 => {
                if i % 70 == 5 {
                    1_500_000
                } else {
                    200
                }
            }
            _ => 8,
        };
        v.push(vec![i as u8; len]);
    }
    let ok = v
        .iter()
        .enumerate()
        .all(|(i, b)| b.iter().all(|&x| x == i as u8));
    let t = std::thread::spawn(|| (0..1000u64).map(Box::new).map(|b| *b).sum::<u64>());
    let sum = t.join().map(|s| s == 499_500).unwrap_or(false);
    drop(v);
    ok && sum
}

#[test]
fn fork_while_a_thread_holds_each_lock() {
    let _serial = serial();
    // This thread's heap, and the runtime's key and handlers, exist before any fork.
    drop(Box::new([1u8; 100]));
    for lock in ALL_LOCKS {
        let held = Arc::new(AtomicBool::new(false));
        let h = {
            let held = held.clone();
            std::thread::spawn(move || {
                test_hooks::hold_lock(lock, &held, Duration::from_millis(200))
            })
        };
        while !held.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        let pid = fork_child(child_work);
        let r = wait_child(pid, CHILD_TIMEOUT);
        h.join().unwrap();
        match r {
            Ok(status) => assert!(exited_ok(status), "{lock:?}: child status {status:#x}"),
            Err(e) => panic!("{lock:?}: {e}"),
        }
    }
}

/// A raw block that may cross threads.
struct Block(*mut u8);
// SAFETY: the block is owned by whoever holds it; any thread may free it.
unsafe impl Send for Block {}

#[test]
fn fork_while_a_thread_delivers_a_span() {
    let _serial = serial();
    let layout = std::alloc::Layout::from_size_align(48, 16).unwrap();
    // Fill spans of the 48-byte class: all but the current one are parked full, asking to be
    // told of their next remote free.
    let blocks: Vec<*mut u8> = (0..2000).map(|_| specalloc::alloc(layout)).collect();
    let first_page = blocks[0] as usize & !8191;
    let (theirs, mine): (Vec<_>, Vec<_>) = blocks
        .into_iter()
        .partition(|&p| p as usize & !8191 == first_page);
    // One block of the first span goes to another thread, which frees it: a delivery, parked.
    test_hooks::PARK_IN_DELIVERY.store(true, Ordering::Release);
    let to_free = Block(theirs[0]);
    let t = std::thread::spawn(move || {
        let b = to_free;
        // SAFETY: allocated with `layout`, freed once.
        unsafe { specalloc::dealloc(b.0, std::alloc::Layout::from_size_align(48, 16).unwrap()) };
    });
    while test_hooks::PARKED_IN_DELIVERY.load(Ordering::Acquire) == 0 {
        std::thread::yield_now();
    }
    let rest: Vec<Block> = theirs[1..].iter().chain(&mine).map(|&p| Block(p)).collect();
    let pid = fork_child(move || {
        // Free the span's other blocks here (its owner) and fill the class again: the span is
        // taken back, parked and watched again, which waits for any delivery in flight.
        for b in rest {
            // SAFETY: allocated with `layout`, freed once (in this process).
            unsafe { specalloc::dealloc(b.0, layout) };
        }
        let again: Vec<*mut u8> = (0..4000).map(|_| specalloc::alloc(layout)).collect();
        let ok = again.iter().all(|p| !p.is_null());
        for p in again {
            // SAFETY: allocated just above.
            unsafe { specalloc::dealloc(p, layout) };
        }
        ok && child_work()
    });
    let r = wait_child(pid, CHILD_TIMEOUT);
    t.join().unwrap();
    test_hooks::PARK_IN_DELIVERY.store(false, Ordering::Release);
    match r {
        Ok(status) => assert!(exited_ok(status), "child status {status:#x}"),
        Err(e) => panic!("{e}"),
    }
}

/// Two threads fork at overlapping times (glibc runs `pthread_atfork` handlers without a lock
/// of its own): this thread's prepare handler holds deliveries back and is parked (test hooks)
/// before it takes the locks; another thread makes a whole fork meanwhile; then a third frees
/// into a span of this thread's that asks to be told (a delivery). The first fork's parent
/// handler must not have let deliveries start again while this one is prepared: the freeing
/// thread waits at the gate, and this thread's child finds no span half delivered (with the
/// gate open, the delivery is parked half done when this thread forks, and the child, which
/// frees into and refills that span, hangs).
#[test]
fn overlapping_forks_keep_deliveries_held_back() {
    let _serial = serial();
    let layout = std::alloc::Layout::from_size_align(48, 16).unwrap();
    // Spans of the 48-byte class parked full, asking to be told of their next remote free.
    let blocks: Vec<*mut u8> = (0..2000).map(|_| specalloc::alloc(layout)).collect();
    let first_page = blocks[0] as usize & !8191;
    let (theirs, mine): (Vec<_>, Vec<_>) = blocks
        .into_iter()
        .partition(|&p| p as usize & !8191 == first_page);
    let to_free = Block(theirs[0]);
    test_hooks::PARK_IN_FORK_PREPARE.store(true, Ordering::Release);
    let other = std::thread::spawn(move || {
        while !test_hooks::PARKED_IN_FORK_PREPARE.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // A whole fork while the main thread's is prepared.
        let pid = fork_child(|| true);
        let first = wait_child(pid, CHILD_TIMEOUT);
        // A delivery into the main thread's span.
        test_hooks::PARK_IN_DELIVERY.store(true, Ordering::Release);
        let freer = std::thread::spawn(move || {
            let b = to_free;
            // SAFETY: allocated with `layout`, freed once.
            unsafe { specalloc::dealloc(b.0, layout) };
        });
        while test_hooks::HELD_AT_GATE.load(Ordering::Acquire) == 0
            && test_hooks::PARKED_IN_DELIVERY.load(Ordering::Acquire) == 0
        {
            std::thread::sleep(Duration::from_millis(1));
        }
        test_hooks::RESUME_FORK.store(true, Ordering::Release);
        (first, freer)
    });
    let rest: Vec<Block> = theirs[1..].iter().chain(&mine).map(|&p| Block(p)).collect();
    let pid = fork_child(move || {
        // The span's other blocks freed here (its owner), and the class filled again: the span
        // is taken back, parked and watched again, which waits for any delivery in flight.
        for b in rest {
            // SAFETY: allocated with `layout`, freed once (in this process).
            unsafe { specalloc::dealloc(b.0, layout) };
        }
        let again: Vec<*mut u8> = (0..4000).map(|_| specalloc::alloc(layout)).collect();
        let ok = again.iter().all(|p| !p.is_null());
        for p in again {
            // SAFETY: allocated just above.
            unsafe { specalloc::dealloc(p, layout) };
        }
        ok && child_work()
    });
    let r = wait_child(pid, CHILD_TIMEOUT);
    let (first, freer) = other.join().unwrap();
    freer.join().unwrap();
    test_hooks::PARK_IN_DELIVERY.store(false, Ordering::Release);
    match first {
        Ok(status) => assert!(exited_ok(status), "the other fork's child: {status:#x}"),
        Err(e) => panic!("the other fork's child: {e}"),
    }
    match r {
        Ok(status) => assert!(exited_ok(status), "child status {status:#x}"),
        Err(e) => panic!("{e}"),
    }
}
