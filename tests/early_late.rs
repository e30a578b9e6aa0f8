//! Allocation outside `main`'s comfortable middle: before `main` (a `.init_array` constructor,
//! before the Rust runtime has set anything up), in thread-local destructors (Rust's, which run
//! while the thread's heap is alive, and a pthread-key destructor that runs after the
//! allocator's own has torn the heap down), and in an `atexit` handler at process exit.
#![deny(unsafe_op_in_unsafe_fn)]

mod common;

use std::cell::RefCell;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

use specalloc::SpecAlloc;

#[global_allocator]
static GLOBAL: SpecAlloc = SpecAlloc;

// ---------------------------------------------------------------------------------------------
// Before main
// ---------------------------------------------------------------------------------------------

/// What the constructor allocated.
struct Early {
    numbers: Vec<u64>,
    text: String,
    tiny: Box<[u8; 3]>,
    pair: Box<[u64; 2]>,
    big: Vec<u8>,
}

static EARLY: AtomicPtr<Early> = AtomicPtr::new(ptr::null_mut());

/// Runs from `.init_array`, before `main`: allocates (generic, tiny, size-specialised, large),
/// frees some of it, and leaves the rest for the test to check and free from another thread.
extern "C" fn early() {
    let scratch: Vec<Box<u32>> = (0..100).map(Box::new).collect();
    let sum: u32 = scratch.iter().map(|b| **b).sum();
    drop(scratch);
    let e = Early {
        numbers: (0..1000).collect(),
        text: format!("allocated before main: {sum}"),
        tiny: Box::new([1, 2, 3]),
        pair: specalloc::spec::boxed([7u64, 8]),
        big: vec![0x5a; 2 << 20],
    };
    EARLY.store(Box::into_raw(Box::new(e)), Ordering::Release);
}

#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = early;

#[test]
fn allocation_before_main() {
    let p = EARLY.swap(ptr::null_mut(), Ordering::Acquire);
    assert!(!p.is_null(), "the .init_array constructor did not run");
    // SAFETY: `early` leaked this box and nothing else took it (swapped out above).
    let e = unsafe { Box::from_raw(p) };
    assert_eq!(e.numbers.len(), 1000);
    assert!(e.numbers.iter().enumerate().all(|(i, &n)| n == i as u64));
    assert_eq!(e.text, "allocated before main: 4950");
    assert_eq!(*e.tiny, [1, 2, 3]);
    assert_eq!(*e.pair, [7, 8]);
    assert_eq!(e.big.len(), 2 << 20);
    assert!(e.big.iter().all(|&b| b == 0x5a));
    // Freed from this (test) thread: cross-thread frees into the main thread's spans.
    drop(e);
}

// ---------------------------------------------------------------------------------------------
// Thread-local destructors
// ---------------------------------------------------------------------------------------------

/// Reports from destructors (which must not panic: a panic there aborts the process).
static REPORTS: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn report(s: String) {
    REPORTS.lock().unwrap_or_else(|e| e.into_inner()).push(s);
}

fn reports_with(prefix: &str) -> Vec<String> {
    let r = REPORTS.lock().unwrap_or_else(|e| e.into_inner());
    r.iter()
        .filter(|s| s.starts_with(prefix))
        .cloned()
        .collect()
}

/// Blocks allocated by another thread, each holding its index.
type Held = Vec<Box<[u64; 4]>>;

fn held(n: u64) -> Held {
    (0..n).map(|i| Box::new([i; 4])).collect()
}

fn held_ok(h: &Held) -> bool {
    h.iter().enumerate().all(|(i, b)| **b == [i as u64; 4])
}

/// A thread-local value whose destructor frees blocks other threads allocated and allocates
/// (a `String`, a `Vec`, a tiny box, a large buffer).
struct AllocOnDrop {
    id: usize,
    /// From the test's thread (still running).
    from_live: Held,
    /// From a thread that has exited (its spans are in the central pools).
    from_exited: Held,
    /// From this thread.
    own: Vec<String>,
}

impl Drop for AllocOnDrop {
    fn drop(&mut self) {
        let held = held_ok(&self.from_live) && held_ok(&self.from_exited);
        let own = self
            .own
            .iter()
            .enumerate()
            .all(|(i, s)| *s == format!("own {i}"));
        self.from_live.clear();
        self.from_exited.clear();
        self.own.clear();
        let text = "z".repeat(40);
        let big = vec![self.id as u8; 300_000];
        let tiny = Box::new([self.id as u8; 5]);
        let numbers: Vec<u64> = (0..5000).collect();
        let fresh = text.len() == 40
            && big.iter().all(|&b| b == self.id as u8)
            && *tiny == [self.id as u8; 5]
            && numbers.iter().sum::<u64>() == 5000 * 4999 / 2;
        report(format!(
            "tls {} held={held} own={own} fresh={fresh}",
            self.id
        ));
    }
}

thread_local! {
    static TLS: RefCell<Option<AllocOnDrop>> = const { RefCell::new(None) };
}

#[test]
fn thread_local_destructors_allocate_and_free() {
    const THREADS: usize = 4;
    let threads: Vec<_> = (0..THREADS)
        .map(|id| {
            let from_live = held(50 + id as u64);
            let from_exited = std::thread::spawn(move || held(30 + id as u64))
                .join()
                .unwrap();
            std::thread::spawn(move || {
                let own: Vec<String> = (0..20).map(|i| format!("own {i}")).collect();
                TLS.with(|t| {
                    *t.borrow_mut() = Some(AllocOnDrop {
                        id,
                        from_live,
                        from_exited,
                        own,
                    })
                });
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut got = reports_with("tls ");
    got.sort();
    let want: Vec<String> = (0..THREADS)
        .map(|id| format!("tls {id} held=true own=true fresh=true"))
        .collect();
    assert_eq!(got, want);
}

/// What a late pthread-key destructor receives.
struct KeyPayload {
    id: usize,
    /// Allocated by the thread itself, before its heap was torn down.
    own: Vec<u8>,
    tiny: Box<[u8; 7]>,
    /// Allocated by the test's thread.
    from_live: Held,
}

/// A pthread-key destructor created after the allocator's key, so that glibc runs it after the
/// allocator's `thread_exit` has handed the thread's spans on: it frees blocks of those spans
/// and allocates again (which gives the exiting thread a heap anew, torn down in the next round
/// of key destructors).
unsafe extern "C" fn late_key_dtor(arg: *mut libc::c_void) {
    // SAFETY: the value set below: a leaked `Box<KeyPayload>`, handed to us once.
    let p = unsafe { Box::from_raw(arg as *mut KeyPayload) };
    let id = p.id;
    let own = p.own.len() == 10_000 && p.own.iter().all(|&b| b == id as u8);
    let tiny = *p.tiny == [id as u8; 7];
    let live = held_ok(&p.from_live);
    drop(p);
    let s: String = (0..100)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let v: Vec<Box<u64>> = (0..1000).map(Box::new).collect();
    let fresh = s.len() == 100 && v.iter().map(|b| **b).sum::<u64>() == 499_500;
    drop(v);
    report(format!(
        "key {id} own={own} tiny={tiny} live={live} fresh={fresh}"
    ));
}

#[test]
fn pthread_key_destructor_after_heap_teardown() {
    // This thread has a heap, so the allocator's key exists and ours comes after it.
    let warm = Box::new(1u64);
    let mut key: libc::pthread_key_t = 0;
    // SAFETY: a valid out-pointer and a destructor of the required signature.
    let r = unsafe { libc::pthread_key_create(&mut key, Some(late_key_dtor)) };
    assert_eq!(r, 0);
    const THREADS: usize = 3;
    let threads: Vec<_> = (0..THREADS)
        .map(|id| {
            let from_live = held(40);
            std::thread::spawn(move || {
                let payload = Box::new(KeyPayload {
                    id,
                    own: vec![id as u8; 10_000],
                    tiny: Box::new([id as u8; 7]),
                    from_live,
                });
                // SAFETY: `key` is a live key; the destructor takes the box back.
                let r = unsafe { libc::pthread_setspecific(key, Box::into_raw(payload).cast()) };
                assert_eq!(r, 0);
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let mut got = reports_with("key ");
    got.sort();
    let want: Vec<String> = (0..THREADS)
        .map(|id| format!("key {id} own=true tiny=true live=true fresh=true"))
        .collect();
    assert_eq!(got, want);
    assert_eq!(*warm, 1);
}

// ---------------------------------------------------------------------------------------------
// At exit
// ---------------------------------------------------------------------------------------------

const CHILD_ENV: &str = "SPECALLOC_EARLY_LATE_CHILD";
const AT_EXIT_OK: &[u8] = b"specalloc-atexit: allocated and freed at exit\n";
const AT_EXIT_BAD: &[u8] = b"specalloc-atexit: FAILED\n";

/// A block allocated by a thread that exited, freed at process exit.
static STASH: AtomicPtr<Vec<u64>> = AtomicPtr::new(ptr::null_mut());

extern "C" fn at_exit() {
    let p = STASH.swap(ptr::null_mut(), Ordering::Acquire);
    let stash_ok = !p.is_null() && {
        // SAFETY: leaked by the helper thread below and taken once (swapped out above).
        let v = unsafe { Box::from_raw(p) };
        v.iter().enumerate().all(|(i, &x)| x == 3 * i as u64)
    };
    let numbers: Vec<u64> = (0..10_000).collect();
    let text = format!("exit {}", numbers.len());
    let big = vec![9u8; 3 << 20];
    let tiny = Box::new([4u8; 3]);
    let pair = specalloc::spec::boxed([5u64, 6]);
    let ok = stash_ok
        && numbers.iter().sum::<u64>() == 10_000 * 9_999 / 2
        && text == "exit 10000"
        && big.iter().all(|&b| b == 9)
        && *tiny == [4u8; 3]
        && *pair == [5, 6];
    drop((numbers, text, big, tiny, pair));
    let msg = if ok { AT_EXIT_OK } else { AT_EXIT_BAD };
    // SAFETY: writes a static buffer to stdout; `write` does not allocate.
    unsafe { libc::write(1, msg.as_ptr().cast(), msg.len()) };
}

#[test]
fn atexit_handler_allocates() {
    if std::env::var_os(CHILD_ENV).is_some() {
        let v = std::thread::spawn(|| (0..5000u64).map(|i| 3 * i).collect::<Vec<u64>>())
            .join()
            .unwrap();
        STASH.store(Box::into_raw(Box::new(v)), Ordering::Release);
        // SAFETY: registers a handler of the required signature.
        assert_eq!(unsafe { libc::atexit(at_exit) }, 0);
        return;
    }
    let out = common::rerun_test("atexit_handler_allocates", CHILD_ENV, "1");
    let marker = std::str::from_utf8(AT_EXIT_OK).unwrap().trim_end();
    common::assert_child_ok(&out, marker);
}
