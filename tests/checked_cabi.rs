//! The checked mode (`--features checked`) of the C `free` (`specalloc_runtime::cabi::free`,
//! what `libspecalloc.so` and the `override` feature export): a free of a pointer this
//! allocator never handed out aborts with the checked mode's message naming the fault and the
//! address, before anything reads memory the pointer does not own (the block's span, found by
//! masking the address, is read only once the address is known to be in one of our chunks).
//! Each case runs in a child process (this test binary, re-executed with
//! `SPECALLOC_CHECKED_CABI_CASE` set); the parent checks that it died of SIGABRT, not of a
//! fault, and what it wrote to stderr. Without the feature this file checks nothing.

#![cfg(feature = "checked")]

mod common;

use std::os::unix::process::ExitStatusExt;

use specalloc_runtime::cabi;

const CASE: &str = "SPECALLOC_CHECKED_CABI_CASE";

/// The chunk size (huge C objects are aligned to it).
const CHUNK: usize = 4 << 20;

/// A static array nobody allocated.
static mut STATIC_BUF: [u64; 8] = [0; 8];

/// Runs one case in the child; asserts it died of SIGABRT with `message` and the address it
/// printed on stderr.
fn expect(case: &str, message: &str) {
    let out = common::rerun_test("child", CASE, case);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.signal(),
        Some(libc::SIGABRT),
        "case {case}: child not aborted ({}); stdout: {stdout}; stderr: {stderr}",
        out.status
    );
    let addr = stdout
        .split("ADDR ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("case {case}: no address printed; stdout: {stdout}"));
    assert!(
        stderr.contains("specalloc (checked mode): ") && stderr.contains(message),
        "case {case}: expected {message:?} in {stderr:?}"
    );
    assert!(
        stderr.contains(addr),
        "case {case}: the message does not name the address {addr}: {stderr:?}"
    );
}

fn report(p: *const u8) {
    println!("ADDR 0x{:016x}", p as usize);
}

/// Maps `len` bytes of anonymous memory.
fn map(len: usize) -> *mut u8 {
    // SAFETY: a fresh private anonymous mapping; the result is checked.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    assert_ne!(p, libc::MAP_FAILED);
    p.cast()
}

/// The child: frees what the environment names (a no-op test otherwise).
#[test]
fn child() {
    let Ok(case) = std::env::var(CASE) else {
        return;
    };
    // Our chunks exist (the checked mode's bitmaps are set up) before the misuse.
    let keep = cabi::malloc(24);
    assert!(!keep.is_null());
    // SAFETY: deliberately misusing the allocator is the point of each case; the checked mode
    // aborts before any memory is touched.
    unsafe {
        match case.as_str() {
            "stack" => {
                let mut local = [0u64; 4];
                let p = std::hint::black_box(local.as_mut_ptr().cast::<u8>());
                report(p);
                cabi::free(p);
            }
            "static" => {
                let p = std::ptr::addr_of_mut!(STATIC_BUF).cast::<u8>().add(8);
                report(p);
                cabi::free(p);
            }
            "glibc" => {
                let p = libc::malloc(24).cast::<u8>();
                report(p);
                cabi::free(p);
            }
            "mmap" => {
                let p = map(4096).add(16);
                report(p);
                cabi::free(p);
            }
            "mmap-chunk-aligned" => {
                // A foreign pointer at a chunk boundary: where a huge C object would be.
                let base = map(3 * CHUNK) as usize;
                let p = base.next_multiple_of(CHUNK) as *mut u8;
                report(p);
                cabi::free(p);
            }
            "realloc-stack" => {
                let mut local = [0u64; 4];
                let p = std::hint::black_box(local.as_mut_ptr().cast::<u8>());
                report(p);
                cabi::realloc(p, 100);
            }
            "realloc-mmap-chunk-aligned" => {
                let base = map(3 * CHUNK) as usize;
                let p = base.next_multiple_of(CHUNK) as *mut u8;
                report(p);
                cabi::realloc(p, 100);
            }
            "usable-static" => {
                let p = std::ptr::addr_of_mut!(STATIC_BUF).cast::<u8>().add(8);
                report(p);
                cabi::usable_size(p);
            }
            "usable-freed" => {
                let p = cabi::malloc(40);
                report(p);
                cabi::free(p);
                cabi::usable_size(p);
            }
            "double-small" => {
                let p = cabi::malloc(40);
                report(p);
                cabi::free(p);
                cabi::free(p);
            }
            "double-huge" => {
                let p = cabi::malloc(8 << 20);
                report(p);
                cabi::free(p);
                cabi::free(p);
            }
            other => panic!("unknown case {other}"),
        }
    }
    println!("misuse was not caught");
    std::process::exit(3);
}

#[test]
fn c_free_of_a_foreign_pointer_aborts_with_the_report() {
    expect("stack", "never handed out");
    expect("static", "never handed out");
    expect("glibc", "never handed out");
    expect("mmap", "never handed out");
    expect("mmap-chunk-aligned", "never handed out");
}

#[test]
fn c_realloc_and_usable_size_of_a_foreign_or_freed_pointer_abort_with_the_report() {
    expect("realloc-stack", "never handed out");
    expect("realloc-mmap-chunk-aligned", "never handed out");
    expect("usable-static", "never handed out");
    expect("usable-freed", "double free");
}

#[test]
fn c_double_free_aborts_with_the_report() {
    expect("double-small", "double free");
    expect("double-huge", "double free");
}

#[test]
fn c_correct_use_is_not_flagged() {
    // SAFETY: each block is live from its allocation to its single free.
    unsafe {
        let mut v = Vec::new();
        for size in [
            1usize,
            3,
            8,
            24,
            100,
            1000,
            5000,
            40_000,
            300_000,
            2 << 20,
            9 << 20,
        ] {
            let p = cabi::malloc(size);
            assert!(!p.is_null());
            p.write_bytes(1, size);
            v.push(p);
            let q = cabi::memalign(1 << 16, size);
            assert!(!q.is_null());
            v.push(q);
        }
        let r = cabi::realloc(cabi::malloc(10), 3 << 20);
        assert!(!r.is_null());
        v.push(r);
        for p in v {
            cabi::free(p);
        }
    }
}
