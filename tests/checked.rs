//! The checked mode (`--features checked`): each kind of misuse aborts at once with a message
//! naming the fault and the address. Each case runs in a child process (this test binary,
//! re-executed with `SPECALLOC_CHECKED_CASE` set), and the parent checks that the child died of
//! SIGABRT and what it wrote to stderr. Without the feature this file checks nothing and says so.

#![cfg(feature = "checked")]

use std::alloc::{dealloc, Layout};
use std::os::unix::process::ExitStatusExt;
use std::process::Command;

#[global_allocator]
static GLOBAL: specalloc::SpecAlloc = specalloc::SpecAlloc;

const CASE: &str = "SPECALLOC_CHECKED_CASE";

/// Runs one misuse in the child and returns (its stderr, the address it printed).
fn run_case(case: &str) -> (String, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child", "--nocapture", "--test-threads=1"])
        .env(CASE, case)
        .output()
        .expect("spawn child");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "case {case}: child was not aborted; stderr: {stderr}"
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
}
