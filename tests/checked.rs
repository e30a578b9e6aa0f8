//! The checked mode (`--features checked`): each kind of misuse aborts at once with a message
//! naming the fault and the address. Each case runs in a child process (this test binary,
//! re-executed with `SPECALLOC_CHECKED_CASE` set), and the parent checks that the child died of
//! SIGABRT and what it wrote to stderr. Without the feature this file checks nothing and says so.
//!
//! One test per misuse class of the adversarial review (issue 17): wrong alignment, medium double
//! free before and after reuse, realloc of a freed pointer, interior pointers into small and huge
//! objects, tiny/small and medium/small layout mix-ups, huge double free before and after reuse,
//! a stack pointer, cross-thread double frees, a huge object freed with another huge size; plus
//! double frees of small and tiny blocks, a pointer from glibc's malloc, and wrong small and
//! medium sizes.

#![cfg(feature = "checked")]

mod common;

use std::alloc::{alloc, dealloc, realloc, Layout};
use std::os::unix::process::ExitStatusExt;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

const CASE: &str = "SPECALLOC_CHECKED_CASE";

/// Runs one misuse in the child and returns (its stderr, the address it printed).
fn run_case(case: &str) -> (String, String) {
    let out = common::rerun_test("child", CASE, case);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "case {case}: child was not aborted; stdout: {stdout}; stderr: {stderr}"
    );
    let addr = stdout
        .split("ADDR ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("case {case}: no address printed; stdout: {stdout}"))
        .to_string();
    (stderr, addr)
}

fn expect(case: &str, message: &str) {
    let (stderr, addr) = run_case(case);
    assert!(
        stderr.contains(message),
        "case {case}: expected {message:?} in {stderr:?}"
    );
    assert!(
        stderr.contains(&addr),
        "case {case}: the message does not name the address {addr}: {stderr:?}"
    );
}

fn report(p: *const u8) {
    println!("ADDR 0x{:016x}", p as usize);
}

/// Exits the child with a note when a case's premise (a block reused at the same address) does
/// not hold, so that the parent fails with that note rather than a misleading one.
fn premise(holds: bool, what: &str) {
    if !holds {
        println!("premise failed: {what}");
        std::process::exit(4);
    }
}

/// Whether two pointers are the same address (compared as integers the optimiser cannot see
/// through: it may take a fresh allocation for distinct from a freed pointer).
fn same(p: *mut u8, q: *mut u8) -> bool {
    std::hint::black_box(p as usize) == std::hint::black_box(q as usize)
}

fn layout(size: usize, align: usize) -> Layout {
    Layout::from_size_align(size, align).unwrap()
}

/// The child: performs the misuse named by the environment (a no-op test otherwise).
#[test]
fn child() {
    let Ok(case) = std::env::var(CASE) else {
        return;
    };
    let l24 = Layout::from_size_align(24, 8).unwrap();
    // SAFETY: deliberately misusing the allocator is the point of each case; the checked mode
    // aborts before any memory is corrupted.
    unsafe {
        match case.as_str() {
            "double-small" => {
                let p = std::alloc::alloc(l24);
                report(p);
                dealloc(p, l24);
                dealloc(p, l24);
            }
            "double-tiny" => {
                let l = Layout::from_size_align(5, 1).unwrap();
                let p = std::alloc::alloc(l);
                let _q = std::alloc::alloc(l); // keeps the tiny block alive
                report(p);
                dealloc(p, l);
                dealloc(p, l);
            }
            "double-huge" => {
                let l = Layout::from_size_align(4 << 20, 8).unwrap();
                let p = std::alloc::alloc(l);
                report(p);
                dealloc(p, l);
                dealloc(p, l);
            }
            "foreign" => {
                let mut local = [0u64; 4];
                let p = local.as_mut_ptr() as *mut u8;
                report(p);
                dealloc(p, l24);
            }
            "foreign-malloc" => {
                let p = libc::malloc(24) as *mut u8;
                report(p);
                dealloc(p, l24);
            }
            "interior" => {
                let l = Layout::from_size_align(64, 8).unwrap();
                let p = std::alloc::alloc(l);
                report(p.add(8));
                dealloc(p.add(8), l);
            }
            "wrong-layout" => {
                let p = std::alloc::alloc(l24);
                report(p);
                dealloc(p, Layout::from_size_align(200, 8).unwrap());
            }
            "wrong-layout-medium" => {
                let l = Layout::from_size_align(100_000, 8).unwrap();
                let p = std::alloc::alloc(l);
                report(p);
                dealloc(p, Layout::from_size_align(300_000, 8).unwrap());
            }
            "wrong-align-small" => {
                // Allocated 8-aligned, freed as 64-aligned (another size class).
                let p = alloc(l24);
                report(p);
                dealloc(p, layout(24, 64));
            }
            "wrong-align-huge" => {
                let l = layout(4 << 20, 8);
                let p = alloc(l);
                report(p);
                dealloc(p, layout(4 << 20, 2 << 20));
            }
            "reserved-run" => {
                // A thread takes a few runs at once for its new spans and keeps those right
                // behind the one it uses: a pointer there is in no block.
                let l = layout(1024, 8);
                let mut kept = Vec::with_capacity(1 << 16);
                let mut hit = None;
                while kept.len() < kept.capacity() {
                    let before = specalloc::stats();
                    let p = alloc(l);
                    let after = specalloc::stats();
                    kept.push(p);
                    if after.reserved > before.reserved {
                        hit = Some((p, before, after));
                        break;
                    }
                }
                premise(hit.is_some(), "a new span made the thread reserve runs");
                let (p, before, after) = hit.unwrap();
                let taken = after.pages_in_use - before.pages_in_use;
                let span = taken - (after.reserved - before.reserved);
                premise(
                    (p as usize).is_multiple_of(8192) && span > 0,
                    "the block that took the runs starts its span",
                );
                let q = p.add(span);
                report(q);
                dealloc(q, l);
            }
            "double-medium" => {
                let l = layout(100_000, 8);
                let p = alloc(l);
                report(p);
                dealloc(p, l);
                dealloc(p, l);
            }
            "double-medium-after-reuse" => {
                // The second free of `p` frees the block that reused its pages; the free of that
                // block's own pointer is then the double free.
                let l = layout(100_000, 8);
                let p = alloc(l);
                dealloc(p, l);
                let q = alloc(l);
                premise(
                    same(p, q),
                    &format!("the medium block {p:?} was not reused: {q:?}"),
                );
                report(q);
                dealloc(p, l);
                dealloc(q, l);
            }
            "realloc-freed" => {
                let p = alloc(l24);
                report(p);
                dealloc(p, l24);
                let _ = realloc(p, l24, 200);
            }
            "realloc-freed-huge" => {
                let l = layout(4 << 20, 8);
                let p = alloc(l);
                report(p);
                dealloc(p, l);
                let _ = realloc(p, l, 6 << 20);
            }
            "interior-huge-page" => {
                let l = layout(4 << 20, 8);
                let p = alloc(l);
                report(p.add(4096));
                dealloc(p.add(4096), l);
            }
            "interior-huge" => {
                let l = layout(4 << 20, 8);
                let p = alloc(l);
                report(p.add(24));
                dealloc(p.add(24), l);
            }
            "tiny-as-small" => {
                // A 3-byte block freed with a 24-byte layout (another size class whatever the
                // tiny allocator's design).
                let p = alloc(layout(3, 1));
                report(p);
                dealloc(p, l24);
            }
            "small-as-tiny" => {
                let p = alloc(l24);
                report(p);
                dealloc(p, layout(3, 1));
            }
            "medium-as-small" => {
                let p = alloc(layout(100_000, 8));
                report(p);
                dealloc(p, l24);
            }
            "double-huge-after-reuse" => {
                // Keep freed huge mappings, so that the second allocation reuses the first's.
                specalloc::set_large_cache_percent(1_000_000);
                let l = layout(4 << 20, 8);
                let p = alloc(l);
                dealloc(p, l);
                let q = alloc(l);
                premise(
                    same(p, q),
                    &format!("the huge mapping {p:?} was not reused: {q:?}"),
                );
                report(q);
                dealloc(p, l);
                dealloc(q, l);
            }
            "cross-thread-double" => {
                let p = alloc(l24) as usize;
                report(p as *const u8);
                std::thread::spawn(move || dealloc(p as *mut u8, l24))
                    .join()
                    .unwrap();
                std::thread::spawn(move || dealloc(p as *mut u8, l24))
                    .join()
                    .unwrap();
            }
            "cross-thread-double-medium" => {
                let l = layout(100_000, 8);
                let p = alloc(l) as usize;
                report(p as *const u8);
                std::thread::spawn(move || dealloc(p as *mut u8, l))
                    .join()
                    .unwrap();
                dealloc(p as *mut u8, l);
            }
            "huge-wrong-size" => {
                let l = layout(4 << 20, 8);
                let p = alloc(l);
                report(p);
                dealloc(p, layout(8 << 20, 8));
            }
            "huge-wrong-size-after-realloc" => {
                // Grown in place by mremap: the object's size is now 6 MiB.
                let l = layout(4 << 20, 8);
                let p = alloc(l);
                let q = realloc(p, l, 6 << 20);
                assert!(!q.is_null());
                report(q);
                dealloc(q, l);
            }
            other => panic!("unknown case {other}"),
        }
    }
    println!("misuse was not caught");
    std::process::exit(3);
}

#[test]
fn double_free_aborts() {
    expect("double-small", "double free");
    expect("double-tiny", "double free");
    expect("double-huge", "double free");
}

#[test]
fn foreign_pointer_aborts() {
    expect("foreign", "never handed out");
    expect("foreign-malloc", "never handed out");
    expect("interior", "not a live block");
}

#[test]
fn wrong_layout_aborts() {
    expect("wrong-layout", "size class disagrees");
    expect("wrong-layout-medium", "size class disagrees");
}

#[test]
fn wrong_alignment_aborts() {
    expect("wrong-align-small", "size class disagrees");
    expect("wrong-align-huge", "size or alignment disagrees");
}

#[test]
fn medium_double_free_aborts() {
    expect("double-medium", "double free");
    expect("double-medium-after-reuse", "double free");
}

#[test]
fn free_into_a_reserved_run_aborts() {
    expect("reserved-run", "a run held in reserve");
}

#[test]
fn realloc_of_a_freed_pointer_aborts() {
    expect("realloc-freed", "double free");
    expect("realloc-freed-huge", "double free");
}

#[test]
fn interior_pointers_abort() {
    // Into a small block: `interior` in foreign_pointer_aborts.
    expect("interior-huge-page", "never handed out");
    expect("interior-huge", "never handed out");
}

#[test]
fn tiny_small_layout_mix_ups_abort() {
    expect("tiny-as-small", "size class disagrees");
    expect("small-as-tiny", "size class disagrees");
}

#[test]
fn medium_freed_as_small_aborts() {
    expect("medium-as-small", "size class disagrees");
}

#[test]
fn huge_double_free_after_reuse_aborts() {
    expect("double-huge-after-reuse", "double free");
}

#[test]
fn stack_pointer_aborts() {
    expect("foreign", "never handed out");
}

#[test]
fn cross_thread_double_free_aborts() {
    expect("cross-thread-double", "double free");
    expect("cross-thread-double-medium", "double free");
}

#[test]
fn huge_wrong_size_aborts() {
    expect("huge-wrong-size", "size or alignment disagrees");
    expect(
        "huge-wrong-size-after-realloc",
        "size or alignment disagrees",
    );
}

#[test]
fn correct_use_is_not_flagged() {
    // A mixed workload across tiny, small, medium and huge, with threads and remote frees.
    let handles: Vec<_> = (0..3)
        .map(|t| {
            std::thread::spawn(move || {
                let mut v: Vec<Vec<u8>> = Vec::new();
                for i in 0..20_000usize {
                    let len = [3, 9, 24, 100, 1000, 40_000, 2 << 20][i % 7] + t;
                    v.push(vec![
                        i as u8;
                        if i % 500 == 0 { len } else { len.min(5000) }
                    ]);
                    if v.len() > 300 {
                        v.drain(..150);
                    }
                }
                v
            })
        })
        .collect();
    for h in handles {
        let v = h.join().unwrap();
        assert!(v.iter().all(|b| b.iter().all(|&x| x == b[0])));
    }
    // Huge objects grown and shrunk (mremap and moves), freed with their last layout.
    let mut v: Vec<u8> = vec![1; 2 << 20];
    for len in [3 << 20, 9 << 20, 5 << 20, (2 << 20) + 12_345] {
        v.resize(len, 1);
        v.shrink_to_fit();
        assert!(v.iter().all(|&x| x == 1));
    }
    drop(v);
    // SAFETY: a 64 KiB-aligned huge block, resized with its layout and freed with the last one.
    unsafe {
        let l = layout(3 << 20, 64 * 1024);
        let p = alloc(l);
        assert!(!p.is_null());
        let q = realloc(p, l, 7 << 20);
        assert!(!q.is_null());
        dealloc(q, layout(7 << 20, 64 * 1024));
    }
}
