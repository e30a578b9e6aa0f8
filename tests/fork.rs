//! `fork` while other threads allocate: the allocator's `pthread_atfork` handlers hold every
//! allocator lock across the fork, so the child (whose only thread is the one that forked)
//! starts with consistent structures and can allocate, free (also blocks whose owning threads
//! did not survive the fork) and start threads. A child that hangs is a deadlock: the bug under
//! test. One test function, so nothing else in this binary forks or holds locks meanwhile.
#![deny(unsafe_op_in_unsafe_fn)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use specalloc::SpecAlloc;

mod common;

use common::{wait_child, Rng};

#[global_allocator]
static GLOBAL: SpecAlloc = SpecAlloc;

/// Children forked.
const FORKS: usize = 40;
/// How long a child may take before it counts as deadlocked.
const CHILD_TIMEOUT: Duration = Duration::from_secs(10);

/// A size: mostly tiny and small, some medium (page runs), a few huge (own mappings).
fn mixed_size(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0..=34 => 1 + rng.below(15),
        35..=84 => 16 + rng.below(32 * 1024 - 16),
        85..=96 => 32 * 1024 + rng.below(1 << 20),
        _ => (1 << 20) + rng.below(2 << 20),
    }
}

/// The byte at `i` of a filled buffer of length `len`.
fn byte(len: usize, i: usize) -> u8 {
    (i as u8).wrapping_mul(7) ^ (len as u8)
}

/// A buffer of `len` bytes holding its pattern (large ones only at their ends, to keep it fast).
fn filled(len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    if len <= 64 * 1024 {
        v.extend((0..len).map(|i| byte(len, i)));
    } else {
        v.resize(len, 0);
        for i in (0..64).chain(len - 64..len) {
            v[i] = byte(len, i);
        }
    }
    v
}

fn intact(v: &[u8]) -> bool {
    let len = v.len();
    if len <= 64 * 1024 {
        (0..len).all(|i| v[i] == byte(len, i))
    } else {
        (0..64).chain(len - 64..len).all(|i| v[i] == byte(len, i))
    }
}

/// A background thread: allocates and frees mixed sizes, frees blocks of its peer (remote
/// frees), and hands some of its blocks to the forking thread.
fn hammer(
    id: u64,
    stop: Arc<AtomicBool>,
    to_peer: SyncSender<Vec<u8>>,
    from_peer: Receiver<Vec<u8>>,
    to_main: SyncSender<Vec<u8>>,
    ops: Arc<AtomicU64>,
) {
    let mut rng = Rng::new(id + 1);
    let mut keep: Vec<Vec<u8>> = Vec::new();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let v = filled(mixed_size(&mut rng));
        match rng.below(8) {
            0 => {
                if let Err(TrySendError::Full(v) | TrySendError::Disconnected(v)) =
                    to_peer.try_send(v)
                {
                    assert!(intact(&v));
                }
            }
            1 => {
                if let Err(TrySendError::Full(v) | TrySendError::Disconnected(v)) =
                    to_main.try_send(v)
                {
                    assert!(intact(&v));
                }
            }
            _ => {
                keep.push(v);
                if keep.len() > 64 {
                    let v = keep.swap_remove(rng.below(keep.len()));
                    assert!(intact(&v), "thread {id}: block corrupted");
                }
            }
        }
        // Size-specialised routines too.
        let b = specalloc::spec::boxed([n; 3]);
        assert_eq!(b[2], n);
        while let Ok(v) = from_peer.try_recv() {
            assert!(intact(&v), "thread {id}: peer block corrupted");
        }
        n += 1;
    }
    ops.fetch_add(n, Ordering::Relaxed);
}

/// A background thread that starts short-lived threads (each allocates, hands a block back and
/// exits, so its heap is torn down and its spans go to the central pools) and reads the
/// statistics (which take every central-pool lock).
/// Held for reading by [`churn`] over each short-lived thread's whole life, and for writing by
/// the test around each `fork`: the standard library holds a lock of its own (its table of
/// threads' stack guards) around the allocations of a thread's start and exit, and a fork made
/// then leaves that lock held in the child, whose own new thread waits for it forever, whatever
/// the allocator. The threads that allocate and free across threads go on during the forks.
static THREAD_STARTS: RwLock<()> = RwLock::new(());

fn churn(stop: Arc<AtomicBool>, ops: Arc<AtomicU64>) {
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let _starting = THREAD_STARTS.read().unwrap_or_else(|e| e.into_inner());
        let t = std::thread::spawn(move || {
            let mut rng = Rng::new(1000 + n);
            let kept: Vec<Vec<u8>> = (0..16)
                .map(|_| filled(mixed_size(&mut rng) % 4096 + 1))
                .collect();
            kept
        });
        let kept = t.join().expect("short-lived thread panicked");
        assert!(kept.iter().all(|v| intact(v)));
        std::hint::black_box(specalloc::stats());
        n += 1;
    }
    ops.fetch_add(n, Ordering::Relaxed);
}

/// What a child does: frees what it inherited (blocks of threads that do not exist in the
/// child), allocates and frees ordinary values and a few MB, starts a thread, reads the
/// statistics. Returns whether everything read back as written.
fn child_work(inherited: Vec<Vec<u8>>) -> bool {
    if !inherited.iter().all(|v| intact(v)) {
        return false;
    }
    drop(inherited);
    let b = Box::new(0x1234_5678_9abc_def0u64);
    let t = Box::new([1u8, 2, 3]);
    let s = format!("child {} {}", std::process::id(), "x".repeat(100));
    let mut v: Vec<u64> = (0..(1u64 << 20)).collect(); // 8 MiB: a huge mapping
    v.push(7);
    let big = filled(3 << 20);
    let med = filled(200 * 1024);
    let smalls: Vec<Box<[u64; 4]>> = (0..10_000u64).map(|i| Box::new([i; 4])).collect();
    let ok = *b == 0x1234_5678_9abc_def0
        && *t == [1, 2, 3]
        && s.starts_with("child ")
        && s.len() > 100
        && v.iter()
            .take(1 << 20)
            .enumerate()
            .all(|(i, &x)| x == i as u64)
        && intact(&big)
        && intact(&med)
        && smalls.iter().enumerate().all(|(i, b)| b[3] == i as u64);
    drop((b, t, s, v, big, med, smalls));
    // A thread of the child's own.
    let th = std::thread::spawn(|| {
        let v: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        v.iter().map(|s| s.len()).sum::<usize>()
    });
    let ok = ok && th.join().map(|n| n == 2890).unwrap_or(false);
    let st = specalloc::stats();
    ok && st.allocs >= st.frees
}

#[test]
fn fork_while_threads_allocate() {
    // This thread's heap exists before any fork.
    let warm = Box::new([1u8; 100]);
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let (to_main, from_workers) = mpsc::sync_channel::<Vec<u8>>(32);
    let (tx_a, rx_a) = mpsc::sync_channel::<Vec<u8>>(16);
    let (tx_b, rx_b) = mpsc::sync_channel::<Vec<u8>>(16);
    let mut threads = Vec::new();
    for (id, to_peer, from_peer) in [(0, tx_a, rx_b), (1, tx_b, rx_a)] {
        let (stop, to_main, ops) = (stop.clone(), to_main.clone(), ops.clone());
        threads.push(std::thread::spawn(move || {
            hammer(id, stop, to_peer, from_peer, to_main, ops)
        }));
    }
    drop(to_main);
    {
        let (stop, ops) = (stop.clone(), ops.clone());
        threads.push(std::thread::spawn(move || churn(stop, ops)));
    }

    let mut inherited: Vec<Vec<u8>> = Vec::new();
    let mut failures = Vec::new();
    for i in 0..FORKS {
        std::thread::sleep(Duration::from_millis(10 + (i as u64 * 7) % 15));
        // Blocks the workers allocated, for the child to free.
        while let Ok(v) = from_workers.try_recv() {
            inherited.push(v);
        }
        if inherited.len() > 24 {
            inherited.drain(..inherited.len() - 24);
        }
        let child_gets = std::mem::take(&mut inherited);
        let no_thread_starts = THREAD_STARTS.write().unwrap_or_else(|e| e.into_inner());
        // SAFETY: fork in a multi-threaded process: the child runs only `child_work` (which
        // allocates through the allocator under test, whose fork handlers make that valid, and
        // uses no lock another thread of the parent may have held) and then `_exit`s.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork: {}", std::io::Error::last_os_error());
        if pid == 0 {
            let ok = std::panic::catch_unwind(move || child_work(child_gets)).unwrap_or(false);
            // SAFETY: ends the child without running the parent's exit handlers or unwinding
            // into the test harness.
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        drop(no_thread_starts);
        // The parent frees its copies.
        assert!(child_gets.iter().all(|v| intact(v)));
        drop(child_gets);
        match wait_child(pid, CHILD_TIMEOUT) {
            Ok(status) => {
                if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
                    failures.push(format!("fork {i}: child status {status:#x}"));
                }
            }
            Err(e) => failures.push(format!("fork {i}: {e}")),
        }
        if !failures.is_empty() {
            break;
        }
    }

    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().expect("background thread panicked");
    }
    drop(from_workers);
    assert!(failures.is_empty(), "{failures:?}");
    assert!(ops.load(Ordering::Relaxed) > 0);
    assert_eq!(warm.iter().map(|&b| b as usize).sum::<usize>(), 100);
}
