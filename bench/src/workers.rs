//! Building benchmark workers, one per configuration, each alone in its own
//! target directory, and running commands: shared by the size sweep and the
//! real-workload suite.
//!
//! Cargo unifies features across one build: a worker built together with a
//! crate that turns on an allocator (or the runtime's opt-out switch) would
//! silently get it too. So each configuration is its own `cargo build` with
//! exactly its features, into a target directory of its own, and its binary
//! is checked before any figure of it is used.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The cargo target directory the running binary was built in (the nearest
/// ancestor of the executable holding cargo's `CACHEDIR.TAG`), or `target`
/// under the workspace root.
pub fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| {
            exe.ancestors()
                .skip(1)
                .find(|d| d.join("CACHEDIR.TAG").is_file())
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| workspace_root().join("target"))
}

/// The workspace root (the parent of this crate's directory).
pub fn workspace_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent().unwrap_or(here).to_path_buf()
}

/// The cargo that runs us (`$CARGO`), or `cargo`.
pub fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string())
}

/// Runs a command; returns its stdout, or an error naming it with its
/// stderr.
pub fn output(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("running {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `cargo build --release` of one package target (`target`: e.g.
/// `["--bin", "sweep_worker"]`) with exactly `features`, into its own
/// `target_dir`, from the workspace root.
pub fn cargo_build(
    package: &str,
    target: &[&str],
    features: &[&str],
    target_dir: &Path,
) -> Result<(), String> {
    let mut cmd = Command::new(cargo());
    cmd.current_dir(workspace_root())
        .args(["build", "--release", "-p", package])
        .args(target)
        .arg("--target-dir")
        .arg(target_dir);
    if !features.is_empty() {
        cmd.arg("--features").arg(features.join(","));
    }
    let status = cmd.status().map_err(|e| format!("running {cmd:?}: {e}"))?;
    if !status.success() {
        return Err(format!("{cmd:?} failed ({status})"));
    }
    Ok(())
}

/// The load averages of the machine (`/proc/loadavg`), for reports.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}

/// The machine, for reports: CPU model, CPU count, rustc version.
pub fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|r| r.trim_start_matches([' ', '\t', ':']).to_string())
            })
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let rustc = output(Command::new("rustc").arg("-V"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "rustc ?".into());
    format!("{model}, {cpus} CPUs; {rustc}")
}
