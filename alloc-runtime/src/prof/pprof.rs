//! Symbolising captured stacks and encoding profiles in the pprof format, at dump time only
//! (both allocate and read files).
//!
//! [`build_profile`] turns the table's raw stacks into a [`Profile`]: each return address is
//! resolved, inlined frames included, the allocator's own frames are dropped (so a stack
//! starts at the program's call of the allocator), and stacks that end up the same are merged.
//! [`Profile::to_pprof`] writes a profile as Go's heap profiles are written: a gzipped
//! `perftools.profiles.Profile` with the sample types `alloc_objects`, `alloc_space`,
//! `inuse_objects` and `inuse_space`, its locations already symbolised, and the executable
//! mappings of the process with their build ids.

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::Path;

use prost::Message;

use super::{Frame, Profile, ProfileSample, RawStack};

/// The messages of `profile.proto`, and the encoding of a profile into them.
#[path = "pprof_proto.rs"]
mod proto;

/// Symbolises and merges the table's stacks into a profile taken at `time_nanos` of sampling
/// started at `start_nanos` at a mean interval of `rate` bytes. Samples are ordered by their
/// live bytes, then their allocated bytes, most first; those whose estimates all round to 0
/// are left out.
pub(crate) fn build_profile(
    raw: Vec<RawStack>,
    rate: u64,
    start_nanos: i64,
    time_nanos: i64,
) -> Profile {
    let mut resolved: HashMap<usize, Vec<Frame>> = HashMap::new();
    let mut merged: Vec<(Vec<Frame>, [f64; 4])> = Vec::new();
    let mut index: HashMap<Vec<Frame>, usize> = HashMap::new();
    for r in raw {
        let mut frames = Vec::new();
        for (i, &pc) in r.pcs.iter().enumerate() {
            if pc == 0 {
                // The end of some unwinds (past a thread's first function).
                continue;
            }
            // A caller's address is its return address: the call is the instruction before.
            let addr = if i == 0 { pc } else { pc.saturating_sub(1) };
            frames.extend_from_slice(resolved.entry(addr).or_insert_with(|| symbolise(addr)));
        }
        let frames = program_frames(frames);
        let est = [
            r.alloc_objects,
            r.alloc_bytes,
            r.inuse_objects,
            r.inuse_bytes,
        ];
        let i = *index.entry(frames.clone()).or_insert_with(|| {
            merged.push((frames, [0.0; 4]));
            merged.len() - 1
        });
        for (sum, e) in merged[i].1.iter_mut().zip(est) {
            *sum += e;
        }
    }
    let mut samples: Vec<ProfileSample> = merged
        .into_iter()
        .map(|(frames, [ao, ab, io, ib])| ProfileSample {
            frames,
            alloc_objects: ao.round() as u64,
            alloc_bytes: ab.round() as u64,
            inuse_objects: io.round() as u64,
            inuse_bytes: ib.round() as u64,
        })
        .filter(|s| (s.alloc_objects | s.alloc_bytes | s.inuse_objects | s.inuse_bytes) != 0)
        .collect();
    samples.sort_by_key(|s| std::cmp::Reverse((s.inuse_bytes, s.alloc_bytes)));
    // The symboliser keeps the binaries' parsed debug information (tens of MiB for a binary
    // built with it) for its next use: given back, so that a server that writes a profile now
    // and then does not hold that memory in between (the next dump parses again).
    backtrace::clear_symbol_cache();
    Profile {
        rate,
        start_nanos,
        time_nanos,
        samples,
    }
}

/// The frames at the instruction address `addr`, innermost (the most deeply inlined) first;
/// one frame with no name when the address does not resolve.
fn symbolise(addr: usize) -> Vec<Frame> {
    let mut frames = Vec::new();
    // `resolve` takes a return address and looks up the byte before it: hand it the byte after
    // `addr` so that `addr` itself is looked up.
    let what = addr.wrapping_add(1) as *mut core::ffi::c_void;
    backtrace::resolve(what, |s| {
        frames.push(Frame {
            addr,
            // `#`: without the hash of a legacy symbol or the crate disambiguators of a v0 one.
            function: s.name().map(|n| format!("{n:#}")),
            file: s.filename().map(|f| f.display().to_string()),
            line: s.lineno(),
        });
    });
    if frames.is_empty() {
        frames.push(Frame {
            addr,
            ..Frame::default()
        });
    }
    frames
}

/// The program's frames of a stack (innermost first): drops the outermost frame that is the
/// allocator's or the unwinder's ([`is_allocator`]) and every frame inside it, so that the
/// stack starts at the program's caller of the allocator. Works frame by frame, so of an
/// address whose allocator function was inlined into a program's function only the allocator's
/// entries go. A stack with no allocator frame is kept whole; one with nothing outside the
/// allocator keeps its outermost frame.
fn program_frames(mut frames: Vec<Frame>) -> Vec<Frame> {
    let outermost = frames
        .iter()
        .rposition(|f| f.function.as_deref().is_some_and(is_allocator));
    match outermost {
        None => frames,
        Some(i) => {
            let keep = (i + 1).min(frames.len() - 1);
            frames.split_off(keep)
        }
    }
}

/// Crates all of whose functions are the allocator's (the runtime, the `malloc` crate, the
/// facade, which is also the C library's crate) or the unwinder's.
const ALLOCATOR_CRATES: &[&str] = &[
    "specalloc_runtime",
    "specalloc_malloc",
    "specalloc",
    "backtrace",
];
/// Modules of the standard library that are the allocator's interface (not `alloc::vec` and
/// the like, whose frames are the program's).
const ALLOCATOR_MODULES: &[&str] = &["alloc::alloc::", "std::alloc::"];
/// The allocator shims rustc generates, by the last segment of their path.
const SHIMS: &[&str] = &[
    "__rust_alloc",
    "__rust_alloc_zeroed",
    "__rust_realloc",
    "__rust_dealloc",
];
/// Prefixes of shims (`__rdl_alloc`, `__rg_alloc`), by the last segment of their path.
const SHIM_PREFIXES: &[&str] = &["__rdl_", "__rg_"];
/// The C library's allocation functions.
const C_FUNCTIONS: &[&str] = &[
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
];
/// Prefixes of C++'s `operator new` and `operator new[]` in every form, demangled or not
/// (`_Znwm`, `_Znam`, `_ZnwmSt11align_val_t`, ...), and of the unwinder's entry points.
const C_PREFIXES: &[&str] = &["operator new", "_Znw", "_Zna", "_Unwind_"];

/// Whether a demangled function name is the allocator's or the unwinder's. A Rust path counts
/// by its crate or module; `<T as Trait>::f` and `<T>::f` by their type or trait. The test
/// modules of the allocator's crates (a `tests` segment) are a program of their own.
fn is_allocator(name: &str) -> bool {
    let name = strip_hash(name);
    if C_FUNCTIONS.contains(&name) || C_PREFIXES.iter().any(|p| name.starts_with(p)) {
        return true;
    }
    let last = name.rsplit("::").next().unwrap_or(name);
    if SHIMS.contains(&last) || SHIM_PREFIXES.iter().any(|p| last.starts_with(p)) {
        return true;
    }
    match qualified(name) {
        Some((ty, tr)) => is_allocator_path(ty) || tr.is_some_and(is_allocator_path),
        None => is_allocator_path(name),
    }
}

/// Whether a path (`krate::module::item`, generic arguments allowed) is in the allocator's
/// crates or modules, outside their tests.
fn is_allocator_path(path: &str) -> bool {
    if ALLOCATOR_MODULES.iter().any(|m| path.starts_with(m)) {
        return true;
    }
    let krate = path.split(['<', ':']).next().unwrap_or(path);
    ALLOCATOR_CRATES.contains(&krate) && !path.split("::").any(|s| s == "tests")
}

/// A legacy symbol's name without its trailing `::h<16 hex digits>` hash.
fn strip_hash(name: &str) -> &str {
    match name.rsplit_once("::h") {
        Some((head, h)) if h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()) => head,
        _ => name,
    }
}

/// The type and the trait of a qualified path: `<T as Trait>::f` is `(T, Some(Trait))`,
/// `<T>::f` (an inherent method, as v0 symbols write it) is `(T, None)`; `None` for a plain
/// path.
fn qualified(name: &str) -> Option<(&str, Option<&str>)> {
    let inner = name.strip_prefix('<')?;
    let b = inner.as_bytes();
    let (mut depth, mut as_at) = (0usize, None);
    for i in 0..b.len() {
        match b[i] {
            b'<' => depth += 1,
            // The arrow of a function type (`fn() -> T`) closes nothing.
            b'>' if i > 0 && b[i - 1] == b'-' => {}
            b'>' if depth == 0 => {
                return Some(match as_at {
                    Some(a) => (&inner[..a], Some(&inner[a + 4..i])),
                    None => (&inner[..i], None),
                });
            }
            b'>' => depth -= 1,
            b' ' if depth == 0 && as_at.is_none() && inner[i..].starts_with(" as ") => {
                as_at = Some(i);
            }
            _ => {}
        }
    }
    None
}

impl Profile {
    /// The profile in the pprof format, as `go tool pprof`, Pyroscope, Parca and Grafana read
    /// it: a gzipped `perftools.profiles.Profile` laid out as Go's heap profiles, with the
    /// sample types `alloc_objects`, `alloc_space`, `inuse_objects` and `inuse_space`
    /// (shown by default), a period of [`rate`](Profile::rate) bytes, its locations
    /// symbolised already, and the process's executable mappings (read from
    /// `/proc/self/maps`) with their build ids.
    ///
    /// ```
    /// use specalloc_runtime::profile::{Frame, Profile, ProfileSample};
    ///
    /// let frame = Frame {
    ///     addr: 0x1000,
    ///     function: Some("my_program::build_index".to_string()),
    ///     ..Frame::default()
    /// };
    /// let p = Profile {
    ///     rate: 512 * 1024,
    ///     samples: vec![ProfileSample {
    ///         frames: vec![frame],
    ///         alloc_objects: 10,
    ///         alloc_bytes: 5 << 20,
    ///         inuse_objects: 2,
    ///         inuse_bytes: 1 << 20,
    ///     }],
    ///     ..Profile::default()
    /// };
    /// let gz = p.to_pprof();
    /// assert_eq!(gz[..2], [0x1f, 0x8b]); // gzip's magic number
    /// ```
    pub fn to_pprof(&self) -> Vec<u8> {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        gzip(&proto::encode(self, &proto::parse_maps(&maps)).encode_to_vec())
    }

    /// Writes [`to_pprof`](Profile::to_pprof) to a new file at `path`; an error, and the file
    /// left as it was, when it exists already. A write that fails half way removes the file.
    ///
    /// ```
    /// use specalloc_runtime::profile::Profile;
    ///
    /// let name = format!("specalloc-doc-{}.heap.pb.gz", std::process::id());
    /// let path = std::env::temp_dir().join(name);
    /// Profile::default().write_pprof(&path)?;
    /// let again = Profile::default().write_pprof(&path);
    /// assert_eq!(again.unwrap_err().kind(), std::io::ErrorKind::AlreadyExists);
    /// std::fs::remove_file(&path)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_pprof(&self, path: &Path) -> io::Result<()> {
        let bytes = self.to_pprof();
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        f.write_all(&bytes).inspect_err(|_| {
            let _ = std::fs::remove_file(path);
        })
    }
}

/// `bytes` gzipped.
fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    // Compressing into a vector has no way to fail.
    gz.write_all(bytes).expect("gzip into memory");
    gz.finish().expect("gzip into memory")
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    /// A frame of `function` at `addr`, at line 7 of `src/x.rs`.
    fn frame(addr: usize, function: &str) -> Frame {
        Frame {
            addr,
            function: Some(function.to_string()),
            file: Some("src/x.rs".to_string()),
            line: Some(7),
        }
    }

    /// The function names of `frames` (`?` for an unresolved one).
    fn names(frames: &[Frame]) -> Vec<&str> {
        frames
            .iter()
            .map(|f| f.function.as_deref().unwrap_or("?"))
            .collect()
    }

    /// `program_frames` of frames named `functions`, one address each, as names.
    fn kept(functions: &[&str]) -> Vec<String> {
        let frames = (1..).zip(functions).map(|(a, f)| frame(a, f)).collect();
        let kept = program_frames(frames);
        names(&kept).into_iter().map(String::from).collect()
    }

    #[test]
    fn drops_the_allocators_frames() {
        // A Rust allocation: the unwinder, the runtime, the shim, and `alloc::alloc` inlined
        // into `RawVecInner`'s function at one address, which stays with its caller.
        let rust = vec![
            frame(
                1,
                "backtrace::backtrace::libunwind::trace::h0123456789abcdef",
            ),
            frame(2, "specalloc_runtime::prof::stacks::record"),
            frame(
                3,
                "<specalloc_runtime::SpecAlloc as core::alloc::global::GlobalAlloc>::alloc",
            ),
            frame(4, "__rustc::__rust_alloc"),
            frame(5, "alloc::alloc::alloc"),
            frame(
                5,
                "<alloc::alloc::Global as core::alloc::Allocator>::allocate",
            ),
            frame(5, "alloc::raw_vec::RawVecInner<A>::try_allocate_in"),
            frame(6, "<alloc::vec::Vec<u8>>::with_capacity"),
            frame(7, "my_program::main"),
        ];
        let program = program_frames(rust);
        assert_eq!(
            names(&program),
            [
                "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
                "<alloc::vec::Vec<u8>>::with_capacity",
                "my_program::main"
            ]
        );
        assert_eq!(program[0].addr, 5);
        // C and C++ programs.
        let c = [
            "_Unwind_Backtrace",
            "specalloc_malloc::m",
            "malloc",
            "strdup",
            "main",
        ];
        assert_eq!(kept(&c), ["strdup", "main"]);
        let cpp = [
            "specalloc::x",
            "_ZnwmSt11align_val_t",
            "Tree::make()",
            "main",
        ];
        assert_eq!(kept(&cpp), ["Tree::make()", "main"]);
        let cpp = ["malloc", "operator new[](unsigned long)", "f()", "main"];
        assert_eq!(kept(&cpp), ["f()", "main"]);
        // The outermost allocator frame counts: a callback of the program's inside goes too.
        let hook = [
            "specalloc::a",
            "my::on_alloc",
            "specalloc_runtime::b",
            "my::main",
        ];
        assert_eq!(kept(&hook), ["my::main"]);
        // No allocator frame: the stack as it was; nothing but: its outermost frame.
        let none = vec![
            frame(1, "my::f"),
            Frame {
                addr: 2,
                ..Frame::default()
            },
        ];
        assert_eq!(program_frames(none.clone()), none);
        assert_eq!(kept(&["malloc", "_Znam"]), ["_Znam"]);
        assert!(program_frames(Vec::new()).is_empty());
    }

    #[test]
    fn names_the_allocators_functions() {
        for name in [
            "alloc::alloc::exchange_malloc",
            "alloc::alloc::Global::alloc_impl",
            "<alloc::alloc::Global>::alloc_impl",
            "<std::alloc::System as core::alloc::global::GlobalAlloc>::alloc",
            "std::alloc::__default_lib_allocator::__rdl_alloc",
            "__rg_alloc",
            "my::_::__rg_realloc",
            "__rust_alloc_zeroed",
            "specalloc::spec::alloc_64::h0123456789abcdef",
            "<specalloc_runtime::heap::Heap>::alloc",
            "<my::Wrap<fn() -> u8> as specalloc::Spec>::make",
            "operator new(unsigned long)",
            "_Znwm",
            "_Unwind_RaiseException",
            "posix_memalign",
            "backtrace::backtrace::trace_unsynchronized",
        ] {
            assert!(is_allocator(name), "{name}");
        }
        for name in [
            "alloc::raw_vec::finish_grow",
            "<alloc::vec::Vec<T> as core::clone::Clone>::clone",
            "alloc::boxed::Box<T>::new",
            "my::malloc_wrapper",
            "specallocator::f",
            "std::sys::backtrace::__rust_begin_short_backtrace",
            "specalloc_runtime::prof::pprof::tests::site",
            "strdup",
        ] {
            assert!(!is_allocator(name), "{name}");
        }
    }

    /// The stack of a call of this function as the profiler captures one: return addresses,
    /// innermost (the unwinder's) first.
    #[inline(never)]
    fn pprof_test_site() -> Vec<usize> {
        let mut pcs = Vec::new();
        backtrace::trace(|f| {
            pcs.push(f.ip() as usize);
            true
        });
        std::hint::black_box(pcs)
    }

    /// A MiB.
    const MIB: f64 = (1 << 20) as f64;

    /// A real stack's profile: 3 MiB in 3 allocations by `pprof_test_site`, 1 MiB live, from
    /// two captures (which must merge), and an empty stack too small to count.
    fn real_profile() -> (Vec<usize>, Profile) {
        let pcs = pprof_test_site();
        let raw = |pcs: &[usize], est: [f64; 4]| RawStack {
            pcs: pcs.to_vec(),
            alloc_objects: est[0],
            alloc_bytes: est[1],
            inuse_objects: est[2],
            inuse_bytes: est[3],
        };
        // The same program's frames under another allocator frame: one more unwinder frame.
        let deeper: Vec<usize> = [pcs[0]].iter().chain(&pcs).copied().collect();
        let raw = vec![
            raw(&pcs, [2.0, 2.0 * MIB, 1.0, MIB]),
            raw(&[], [0.3, 0.3, 0.0, 0.0]),
            raw(&deeper, [1.4, MIB + 0.4, 0.0, 0.0]),
        ];
        let p = build_profile(raw, 4096, 1, 2);
        (pcs, p)
    }

    #[test]
    fn keeps_the_callers_frame() {
        let (pcs, p) = real_profile();
        assert_eq!(p.samples.len(), 1, "{p:#?}");
        let s = &p.samples[0];
        let f = &s.frames[0];
        let name = f.function.as_deref().unwrap_or("");
        assert!(name.ends_with("pprof::tests::pprof_test_site"), "{p:#?}");
        assert!(
            pcs.contains(&(f.addr + 1)),
            "a caller's address is its call's"
        );
        assert!(f.file.as_deref().is_some_and(|f| f.ends_with("pprof.rs")) && f.line.is_some());
        assert!(names(&s.frames)
            .iter()
            .any(|n| n.ends_with("tests::real_profile")));
        let values = [
            s.alloc_objects,
            s.alloc_bytes,
            s.inuse_objects,
            s.inuse_bytes,
        ];
        assert_eq!(values, [3, 3 << 20, 1, 1 << 20]);
        // Its location is in the test's executable, with the executable's build id.
        let m = proto::decode(&p.to_pprof());
        let loc = &m.location[m.sample[0].location_id[0] as usize - 1];
        let map = &m.mapping[loc.mapping_id as usize - 1];
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(m.string_table[map.filename as usize], exe.to_str().unwrap());
        let readelf = Command::new("readelf").arg("-n").arg(&exe).output();
        match readelf.ok().filter(|o| o.status.success()) {
            Some(o) => {
                let notes = String::from_utf8_lossy(&o.stdout);
                let id = notes
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("Build ID: "));
                assert_eq!(m.string_table[map.build_id as usize], id.unwrap_or(""));
            }
            None => println!("build id not checked: `readelf -n` did not run"),
        }
    }

    #[test]
    fn go_pprof_reads_it() {
        let go = Command::new("go").arg("version").output();
        if !go.is_ok_and(|o| o.status.success()) {
            println!("skipped: `go version` does not run, so there is no `go tool pprof` to read");
            return;
        }
        let (_, mut p) = real_profile();
        // A stack the table had no room for has no frames.
        p.samples.push(ProfileSample {
            alloc_objects: 1,
            ..ProfileSample::default()
        });
        let name = format!("specalloc-pprof-test-{}.heap.pb.gz", std::process::id());
        let path = std::env::temp_dir().join(name);
        let _ = std::fs::remove_file(&path);
        p.write_pprof(&path).unwrap();
        let again = p.write_pprof(&path).unwrap_err();
        let pprof = |args: &[&str]| {
            let mut go = Command::new("go");
            let o = go.args(["tool", "pprof"]).args(args).arg(&path).output();
            let o = o.unwrap();
            let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
            (o.status.success(), text(&o.stdout), text(&o.stderr))
        };
        let raw = pprof(&["-raw"]);
        let top = pprof(&["-top", "-sample_index=alloc_space"]);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
        println!("{}{}\n{}{}", raw.1, raw.2, top.1, top.2);
        // `-raw`: the site and the exact values; `-top`: the site's line, its flat bytes first.
        assert!(
            raw.0 && raw.1.contains("tests::pprof_test_site "),
            "{raw:?}"
        );
        assert!(
            raw.1.contains(" 3145728 ") && raw.1.contains(" 1048576:"),
            "{raw:?}"
        );
        let site = top
            .1
            .lines()
            .find(|l| l.ends_with("tests::pprof_test_site"));
        let flat = site.is_some_and(|l| l.trim_start().starts_with("3MB "));
        assert!(top.0 && flat, "{top:?}");
    }
}
