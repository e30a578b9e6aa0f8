//! Heap profiling (cargo feature `profiling`): which code holds the memory, and which code
//! allocated it, as a sampled profile in the pprof format.
//!
//! [`start`] samples allocations at a mean interval of bytes (a Poisson process over the bytes
//! allocated, so a profile is unbiased at every size); each sample keeps its stack. [`profile`]
//! reads the stacks, symbolised, with the estimates of the allocations and bytes each stands
//! for, allocated since [`start`] and still live; [`dump`] writes them as a gzipped
//! `profile.proto` that `go tool pprof`, Pyroscope, Parca and Grafana open:
//!
//! ```no_run
//! specalloc_runtime::profile::start(specalloc_runtime::profile::DEFAULT_RATE);
//! // ... the program runs ...
//! specalloc_runtime::profile::dump("heap.pb.gz").unwrap();
//! // go tool pprof -top heap.pb.gz
//! ```
//!
//! Without the feature nothing of this is compiled and no path of the allocator changes. With
//! it and profiling off, an allocation costs one more branch (its class's countdown, taken
//! never); on, a sampled allocation walks its stack (a few microseconds) and takes a page run of
//! its own, once per [`DEFAULT_RATE`] bytes allocated on average.
//!
//! C and C++ programs under `LD_PRELOAD` (and Rust programs built with the feature) turn it on
//! with environment variables read once at start:
//! - `SPECALLOC_PROF=<prefix>`: sample, and write `<prefix>.<pid>.<n>.heap.pb.gz` at exit and
//!   when asked; never over an existing file (`<n>` counts up), one file per process, a forked
//!   child's with its own pid;
//! - `SPECALLOC_PROF_RATE=<bytes>`: the mean interval (default [`DEFAULT_RATE`]);
//! - `SPECALLOC_PROF_SIGNAL=<number>`: a signal (say 12, `SIGUSR2`) whose delivery asks for a
//!   dump; a thread of the profiler's own (started only then) writes it.

use core::sync::atomic::{AtomicI64, AtomicU32, Ordering};
use std::ffi::CStr;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

pub use crate::prof::{Frame, Profile, ProfileSample};

/// The default mean sampling interval: 512 KiB, as Go's and jemalloc's. At it, a program that
/// allocates 1 GiB/s takes about 2,000 samples a second (under 1 % of a core for the stack
/// walks); tcmalloc's 2 MiB misses sites that allocate under a few MiB in all.
pub const DEFAULT_RATE: u64 = 512 * 1024;

/// When profiling last started, in nanoseconds since the Unix epoch.
static START_NANOS: AtomicI64 = AtomicI64::new(0);

/// Nanoseconds since the Unix epoch.
fn now_nanos() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Starts sampling at a mean interval of `rate` bytes (at least 1), forgetting every earlier
/// sample: the profile's allocations count from here. The calling thread samples from its next
/// allocation on, every other thread from its next slow path (a refill of a size class) or, in
/// a thread that never leaves its fast paths, within 65,536 allocations of any one class.
///
/// A sampled small object takes a page run of its own (8 KiB at least): the live memory the
/// profiler adds is about `live bytes × 8 KiB / rate`, 1.6 % at the default rate.
///
/// ```
/// use specalloc_runtime::profile;
/// profile::start(profile::DEFAULT_RATE);
/// assert_eq!(profile::rate(), Some(profile::DEFAULT_RATE));
/// profile::stop();
/// assert_eq!(profile::rate(), None);
/// ```
pub fn start(rate: u64) {
    crate::prof::reset();
    crate::prof::seed();
    START_NANOS.store(now_nanos(), Ordering::Relaxed);
    crate::prof::set_dumper(dump_requested);
    crate::prof::set_rate(rate.max(1));
    crate::heap::arm_this_thread();
}

/// Stops sampling; the samples taken so far stay readable ([`profile`], [`dump`]) until the
/// next [`start`].
pub fn stop() {
    crate::prof::set_rate(0);
    crate::heap::arm_this_thread();
}

/// The mean sampling interval while profiling is on.
pub fn rate() -> Option<u64> {
    match crate::prof::rate() {
        0 => None,
        r => Some(r),
    }
}

/// The profile so far: every sampled stack, symbolised (the allocator's own frames dropped),
/// with the estimates of what it allocated since [`start`] and what of it is live. Allocates
/// and reads the binaries' symbols: for a `/debug/pprof/heap`-style endpoint, or to look at
/// the top sites in the program.
///
/// ```
/// #[global_allocator]
/// static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;
///
/// use specalloc_runtime::profile;
/// profile::start(4096);
/// let v: Vec<Vec<u8>> = (0..1000).map(|_| vec![1u8; 1000]).collect();
/// let p = profile::profile();
/// let live: u64 = p.samples.iter().map(|s| s.inuse_bytes).sum();
/// assert!(live > 0);
/// drop(v);
/// profile::stop();
/// ```
///
/// Empty in a forked child whose parent was writing a profile at the fork (the symboliser's
/// lock may be held there by a thread the child does not have).
pub fn profile() -> Profile {
    if !crate::prof::dumps_possible() {
        return Profile::default();
    }
    let _one_at_a_time = crate::prof::dump_lock();
    profile_locked()
}

/// [`profile`], with the dump lock held.
fn profile_locked() -> Profile {
    let _dumping = crate::prof::Dumping::start();
    let raw = crate::prof::snapshot();
    let rate = crate::prof::rate();
    crate::prof::build_profile(raw, rate, START_NANOS.load(Ordering::Relaxed), now_nanos())
}

/// Writes [`profile`] to `path` in the pprof format (gzipped `profile.proto`); an error, and
/// nothing written, when the file exists already or cannot be made.
pub fn dump(path: impl AsRef<Path>) -> io::Result<()> {
    if !crate::prof::dumps_possible() {
        return Err(no_dumps());
    }
    let _one_at_a_time = crate::prof::dump_lock();
    let _dumping = crate::prof::Dumping::start();
    profile_locked().write_pprof(path.as_ref())
}

/// The error of a dump in a forked child whose parent was writing a profile at the fork.
fn no_dumps() -> io::Error {
    io::Error::other(
        "this process was forked while its parent wrote a heap profile, whose symboliser it \
         cannot use; it writes no profile",
    )
}

/// The profiler's own figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProfilerStats {
    /// Distinct stacks sampled since [`start`].
    pub stacks: usize,
    /// Samples counted under the overflow entry because the table of stacks was full.
    pub overflowed: u64,
    /// Bytes the table of stacks maps (also in `Stats::profiler_bytes`).
    pub table_bytes: usize,
}

/// The profiler's own figures.
///
/// ```
/// let s = specalloc_runtime::profile::profiler_stats();
/// assert!(s.stacks == 0 || s.table_bytes > 0);
/// ```
pub fn profiler_stats() -> ProfilerStats {
    let (stacks, overflowed) = crate::prof::counts();
    ProfilerStats {
        stacks,
        overflowed,
        table_bytes: crate::prof::table_bytes(),
    }
}

/// `SPECALLOC_PROF`'s prefix, when set.
static PREFIX: OnceLock<PathBuf> = OnceLock::new();
/// The number of the next dump file.
static SEQ: AtomicU32 = AtomicU32::new(0);

/// Writes a dump to the next free `<prefix>.<pid>.<n>.heap.pb.gz`; `None` when no prefix is set.
pub fn dump_to_prefix() -> Option<io::Result<PathBuf>> {
    let prefix = PREFIX.get()?;
    if !crate::prof::dumps_possible() {
        return Some(Err(no_dumps()));
    }
    let _one_at_a_time = crate::prof::dump_lock();
    let _dumping = crate::prof::Dumping::start();
    let p = profile_locked();
    let pid = std::process::id();
    Some(loop {
        let n = SEQ.fetch_add(1, Ordering::Relaxed);
        let mut name = prefix.clone().into_os_string();
        name.push(format!(".{pid}.{n}.heap.pb.gz"));
        let path = PathBuf::from(name);
        match p.write_pprof(&path) {
            Ok(()) => break Ok(path),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => break Err(e),
        }
    })
}

/// A requested dump (the signal's): to the prefix, or nowhere without one.
fn dump_requested() {
    if let Some(Err(e)) = dump_to_prefix() {
        eprintln!("specalloc: the heap profile could not be written: {e}");
    }
}

/// The signal handler of `SPECALLOC_PROF_SIGNAL`: wakes the profiler's dump thread (an atomic
/// store and a futex wake).
extern "C" fn on_signal(_: libc::c_int) {
    crate::prof::request_dump();
}

/// Reads an environment variable as a string, without holding on to it.
fn env(name: &CStr) -> Option<String> {
    // SAFETY: a NUL-terminated name; the result is read at once (see `os::env_usize`).
    let v = unsafe { libc::getenv(name.as_ptr()) };
    if v.is_null() {
        return None;
    }
    // SAFETY: a non-null result of getenv is a NUL-terminated string.
    let s = unsafe { CStr::from_ptr(v) }.to_string_lossy().into_owned();
    (!s.is_empty()).then_some(s)
}

/// Reads `SPECALLOC_PROF`, `SPECALLOC_PROF_RATE` and `SPECALLOC_PROF_SIGNAL` and starts
/// profiling when the first is set.
extern "C" fn from_env() {
    let Some(prefix) = env(c"SPECALLOC_PROF") else {
        return;
    };
    let _ = PREFIX.set(PathBuf::from(prefix));
    let rate = match crate::os::env_usize(c"SPECALLOC_PROF_RATE") {
        Some(0) => {
            crate::os::write_stderr(
                b"specalloc: SPECALLOC_PROF_RATE=0 is no interval; sampling at the default, \
                  one sample per 512 KiB\n",
            );
            DEFAULT_RATE
        }
        Some(r) => r as u64,
        None => DEFAULT_RATE,
    };
    if let Some(sig) = crate::os::env_usize(c"SPECALLOC_PROF_SIGNAL") {
        // SAFETY: a zeroed `sigaction` with a handler that only stores to an atomic; the
        // signal number is checked by the kernel.
        let ok = unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigaction(sig as libc::c_int, &sa, core::ptr::null_mut()) == 0
        };
        if !ok {
            crate::os::write_stderr(
                b"specalloc: SPECALLOC_PROF_SIGNAL names no signal that can be caught; dumps \
                  are written at exit only\n",
            );
        } else if crate::prof::start_dumper().is_err() {
            crate::os::write_stderr(
                b"specalloc: the heap profiler's dump thread could not be started; dumps are \
                  written at exit only\n",
            );
        }
    }
    start(rate);
}

/// Writes the exit dump when `SPECALLOC_PROF` is set.
extern "C" fn at_exit() {
    dump_requested();
}

/// Runs [`from_env`] before `main` (and, in a shared library, when it is loaded).
#[used]
#[unsafe(link_section = ".init_array")]
static FROM_ENV: extern "C" fn() = from_env;

/// Runs [`at_exit`] at exit (and, in a shared library, when it is unloaded).
#[used]
#[unsafe(link_section = ".fini_array")]
static AT_EXIT: extern "C" fn() = at_exit;
