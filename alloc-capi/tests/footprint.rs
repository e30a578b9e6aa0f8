//! What preloading `libspecalloc.so` adds to every process before it allocates anything: the
//! libraries it loads. Each one it needs is mapped and relocated at start and counts in the
//! process's resident set (`libm.so`'s start-up made about 300 KiB resident, for the two
//! functions the heap profiler's sampler called), so the library needs glibc, the loader and
//! `libgcc_s` (the unwinder: Rust's panics and the profiler's stacks) and nothing else.
//!
//! Skipped, with a line, without `readelf`.

mod common;

use std::process::Command;

/// The shared libraries the library names as needed (`readelf -d`'s `NEEDED` entries).
fn needed() -> Option<Vec<String>> {
    if !common::have("readelf", "the needed-libraries check") {
        return None;
    }
    let o = Command::new("readelf")
        .arg("-dW")
        .arg(common::lib())
        .output()
        .expect("run readelf");
    assert!(o.status.success(), "readelf -d failed");
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    Some(
        text.lines()
            .filter(|l| l.contains("(NEEDED)"))
            .filter_map(|l| Some(l.split_once('[')?.1.split_once(']')?.0.to_string()))
            .collect(),
    )
}

#[test]
fn only_libc_the_loader_and_the_unwinder_are_needed() {
    let Some(libs) = needed() else { return };
    println!("NEEDED: {libs:?}");
    assert!(
        libs.iter().any(|l| l.starts_with("libc.so")),
        "libc is among the needed libraries: {libs:?}"
    );
    let extra: Vec<&String> = libs
        .iter()
        .filter(|l| {
            !(l.starts_with("libc.so") || l.starts_with("ld-linux") || l.starts_with("libgcc_s"))
        })
        .collect();
    assert!(
        extra.is_empty(),
        "libspecalloc.so needs libraries beyond libc, the loader and libgcc_s: {extra:?} \
         (each one is mapped and relocated in every preloaded process)"
    );
}
