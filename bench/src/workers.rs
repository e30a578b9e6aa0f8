//! Building benchmark workers, one per configuration, and running commands:
//! shared by the size sweep and the real-workload suite.
//!
//! Cargo unifies features across one build: a worker built together with a
//! crate that turns on an allocator (or the runtime's opt-out switch) would
//! silently get it too. So each configuration is its own `cargo build` with
//! exactly its features, and its binary is checked before any figure of it is
//! used. The builds share one target directory, the driver's own: cargo keeps
//! each feature set's artifacts apart (the features are part of each
//! artifact's hash), so syn, serde and the allocators are compiled once and
//! only what a feature changes is rebuilt ([`build_worker`]).

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
/// `["--bin", "sweep_worker"]`) with exactly `features`, into
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

/// Builds `bin` of `package` with exactly `features` into the shared target
/// directory `target_dir` (normally [`target_dir()`], the driver's), then
/// copies the binary to `dest` and returns `dest`.
///
/// Cargo leaves the binary at `<target_dir>/release/<bin>`, where the next
/// build with other features puts its own: each configuration's copy is what
/// the driver checks and runs. `progress` is printed first, to stderr
/// (`"[sweep] building worker 3 of 6: system (features: global-system)"`).
pub fn build_worker(
    progress: &str,
    package: &str,
    bin: &str,
    features: &[&str],
    target_dir: &Path,
    dest: &Path,
) -> Result<PathBuf, String> {
    eprintln!("{progress}");
    cargo_build(package, &["--bin", bin], features, target_dir)?;
    let built = target_dir.join("release").join(bin);
    if let Some(dir) = dest.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    // Copy to a temporary name and rename, so that a binary being replaced
    // while it runs (an earlier sweep still going) is never written into.
    let tmp = dest.with_extension("tmp");
    std::fs::copy(&built, &tmp)
        .map_err(|e| format!("{} -> {}: {e}", built.display(), tmp.display()))?;
    std::fs::rename(&tmp, dest)
        .map_err(|e| format!("{} -> {}: {e}", tmp.display(), dest.display()))?;
    Ok(dest.to_path_buf())
}

/// The progress line of building worker `k` (from 1) of `n`.
///
/// ```
/// use specalloc_bench::workers::progress;
/// assert_eq!(
///     progress("sweep", 3, 6, "system", &["global-system"]),
///     "[sweep] building worker 3 of 6: system (features: global-system)"
/// );
/// assert_eq!(
///     progress("realworld", 1, 2, "specalloc", &[]),
///     "[realworld] building worker 1 of 2: specalloc (features: none)"
/// );
/// ```
pub fn progress(tool: &str, k: usize, n: usize, name: &str, features: &[&str]) -> String {
    let features = if features.is_empty() {
        "none".to_string()
    } else {
        features.join(",")
    };
    format!("[{tool}] building worker {k} of {n}: {name} (features: {features})")
}

/// The load averages of the machine (`/proc/loadavg`), for reports.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".to_string())
}

/// The commit of the workspace, for reports: `git rev-parse --short HEAD`,
/// with `+dirty` when the tree has changes; `?` without git.
pub fn commit() -> String {
    let root = workspace_root();
    let git = |args: &[&str]| output(Command::new("git").arg("-C").arg(&root).args(args));
    match git(&["rev-parse", "--short", "HEAD"]) {
        Ok(hash) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_ok_and(|s| !s.trim().is_empty());
            format!("{}{}", hash.trim(), if dirty { "+dirty" } else { "" })
        }
        Err(_) => "?".to_string(),
    }
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

/// Makes the directory `dir` (and its parents) for a tool's outputs; the error names it and
/// says why (a file of that name already there, say).
///
/// ```
/// let dir = std::env::temp_dir().join(format!("specalloc-doc-{}", std::process::id()));
/// specalloc_bench::workers::make_dir(&dir).unwrap();
/// assert!(dir.is_dir());
/// std::fs::remove_dir(&dir).unwrap();
/// ```
pub fn make_dir(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot make the directory {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_in_the_way_of_a_directory_is_named() {
        let file = std::env::temp_dir().join(format!("specalloc-make-dir-{}", std::process::id()));
        std::fs::write(&file, b"x").unwrap();
        let e = make_dir(&file).unwrap_err();
        std::fs::remove_file(&file).unwrap();
        assert!(e.starts_with("cannot make the directory "), "{e}");
        assert!(e.contains(&file.display().to_string()), "{e}");
    }
}
