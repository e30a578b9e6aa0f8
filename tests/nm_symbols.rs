//! Each routine a program uses is a distinct symbol: `nm` on a program using ten size classes
//! counts ten routines, and none when built with the `no-size-specialized` opt-out switch.
//! Builds `examples/nm_probe.rs` in its own target directory (two release builds).

use std::path::{Path, PathBuf};
use std::process::Command;

fn build(features: &[&str]) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // One directory per configuration, so the two can never share an artifact.
    let name = if features.is_empty() {
        "default"
    } else {
        "opt-out"
    };
    let target = root.join("target").join("nm-test").join(name);
    let mut cmd = Command::new(env!("CARGO"));
    cmd.current_dir(root)
        .args([
            "build",
            "--release",
            "--example",
            "nm_probe",
            "--target-dir",
        ])
        .arg(&target);
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    let status = cmd.status().expect("run cargo");
    assert!(status.success(), "building nm_probe failed");
    target.join("release").join("examples").join("nm_probe")
}

/// Distinct routine addresses (identical routines, such as a tiny size's plain and zeroing
/// variants, may be merged into one function with two names).
fn routines(bin: &Path) -> Vec<String> {
    let out = Command::new("nm")
        .args(["-C", "--defined-only"])
        .arg(bin)
        .output()
        .expect("run nm (binutils)");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut addrs: Vec<String> = text
        .lines()
        .filter(|l| l.contains("specalloc_runtime::routines::"))
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_string())
        .collect();
    addrs.sort();
    addrs.dedup();
    addrs
}

#[test]
fn routine_symbols_match_classes_used() {
    let on = build(&[]);
    assert_eq!(
        routines(&on).len(),
        10,
        "specialised build uses ten classes"
    );
    let off = build(&["no-size-specialized"]);
    assert_eq!(routines(&off).len(), 0, "opt-out build has no routine");
    let size = |p: &Path| std::fs::metadata(p).unwrap().len() as i64;
    eprintln!(
        "nm_probe: {} bytes specialised, {} bytes opt-out, cost {} bytes",
        size(&on),
        size(&off),
        size(&on) - size(&off)
    );
}
