//! specalloc for C and C++ code: the `malloc` family on specalloc's runtime, as `#[no_mangle]`
//! functions.
//!
//! This crate is the code of two things: `libspecalloc.so` (the `specalloc-capi` crate, built
//! with `cargo build --release -p specalloc-capi`), which runs any dynamically linked program
//! on specalloc:
//!
//! ```sh
//! LD_PRELOAD=target/release/libspecalloc.so python3 script.py
//! ```
//!
//! It exports `malloc`, `free`, `calloc`, `realloc`, `reallocarray`, `posix_memalign`,
//! `aligned_alloc`, `memalign`, `valloc`, `pvalloc`, `malloc_usable_size` and glibc's
//! `__libc_malloc`, `__libc_free`, `__libc_calloc`, `__libc_realloc`, `__libc_memalign`,
//! `__libc_valloc`, `__libc_pvalloc`, the old `cfree`, and C23's `free_sized` and
//! `free_aligned_sized` (glibc 2.39): every allocation entry point glibc exports at its default
//! version.
//! It also exports C++'s `operator new` and `operator delete` in all their forms ([`cxx`]).
//! `include/specalloc.h` declares what
//! C code can call beyond that: [`specalloc_stats`], [`specalloc_stats_print`],
//! [`specalloc_collect`] and [`specalloc_background_purge`].
//!
//! and the facade's `override` feature, which links these functions into a Rust binary that
//! calls `specalloc::install!()`: the C code linked into the binary, and the C library's own
//! allocations, come to specalloc too. ([`KEEP`] is what makes the linker keep them.)
//!
//! # Semantics
//!
//! As glibc documents them: `malloc(0)` returns a unique pointer; `free(NULL)` does nothing;
//! `realloc(NULL, n)` is `malloc(n)`; `realloc(p, 0)` frees `p` and returns NULL (glibc's
//! choice); every failure (an overflowing `calloc` or `reallocarray` included) returns NULL
//! with `errno = ENOMEM`, and leaves a block being resized untouched; a call that succeeds, and
//! every `free`, leaves `errno` as it was (a refused first try inside it included);
//! `posix_memalign`
//! returns `EINVAL` for an alignment that is not a power of two times `sizeof(void *)`,
//! `aligned_alloc` sets `EINVAL` for one that is not a power of two, and `memalign` rounds it
//! up to one, as glibc does. Blocks of 16 bytes or more are aligned to 16, smaller ones to 8.
//! `malloc_usable_size` is at least the request, and all of it is usable.
//!
//! # Robustness
//!
//! Nothing on these paths allocates, panics, or looks a symbol up (`dlsym`; a C++ `new` that
//! gets no memory does, to hand the failure to the C++ runtime, [`cxx`]): a call before
//! `main` (from the dynamic loader, libc's own start-up, other libraries' constructors), a
//! `free(NULL)` or `realloc` as the very first call, and a call from a thread that has just
//! started or is exiting all take the same code. Thread-local state is two plain words per
//! thread, without destructors; a thread's heap is handed on by a pthread-key destructor at
//! its exit; `fork` is safe in a multi-threaded program (the runtime's `pthread_atfork`
//! handlers). The one unsupported use is `dlopen`ing `libspecalloc.so` itself into a running
//! program as its `malloc`: blocks malloc'd before it could then reach its `free`. (As a private
//! allocator, called through `dlsym`, it works; a `dlclose` leaves it loaded.)
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

use core::ffi::{c_int, c_void};
use core::ptr;

use specalloc_runtime::cabi;

pub mod cxx;

/// The OS page, for `valloc` and `pvalloc`.
const OS_PAGE: usize = 4096;

fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns this thread's errno, valid for writes.
    unsafe { *libc::__errno_location() = e };
}

/// Returns `p`, setting `errno` to `ENOMEM` when it is null.
#[inline(always)]
fn or_enomem(p: *mut u8) -> *mut c_void {
    if p.is_null() {
        set_errno(libc::ENOMEM);
    }
    p.cast()
}

/// C's `malloc`: at least `size` bytes (a unique block for 0), or NULL with `errno = ENOMEM`.
#[no_mangle]
pub extern "C" fn malloc(size: usize) -> *mut c_void {
    // `cabi::malloc` sets `errno` itself.
    cabi::malloc(size).cast()
}

/// C's `free`: frees `p`; NULL does nothing.
///
/// # Safety
/// `p` is NULL or a live block from this allocator, not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn free(p: *mut c_void) {
    // SAFETY: forwarded from the caller.
    unsafe { cabi::free(p.cast()) }
}

/// C's `calloc`: `n * size` zeroed bytes, or NULL with `errno = ENOMEM` (also on overflow).
#[no_mangle]
pub extern "C" fn calloc(n: usize, size: usize) -> *mut c_void {
    // `cabi::calloc` sets `errno` itself.
    cabi::calloc(n, size).cast()
}

/// C's `realloc`: `realloc(NULL, n)` is `malloc(n)`; `realloc(p, 0)` frees `p` and returns
/// NULL (as glibc); otherwise resizes, in place when it can. On failure NULL with
/// `errno = ENOMEM`, and `p` is left as it was.
///
/// # Safety
/// `p` is NULL or a live block from this allocator; on success only the result is used.
#[no_mangle]
pub unsafe extern "C" fn realloc(p: *mut c_void, size: usize) -> *mut c_void {
    if p.is_null() {
        return malloc(size);
    }
    if size == 0 {
        // SAFETY: forwarded from the caller.
        unsafe { cabi::free(p.cast()) };
        return ptr::null_mut();
    }
    // SAFETY: forwarded from the caller.
    or_enomem(unsafe { cabi::realloc(p.cast(), size) })
}

/// glibc's (and the BSDs') `reallocarray`: `realloc(p, n * size)`, failing with
/// `errno = ENOMEM` (and `p` untouched) when the product overflows.
///
/// # Safety
/// As for [`realloc`].
#[no_mangle]
pub unsafe extern "C" fn reallocarray(p: *mut c_void, n: usize, size: usize) -> *mut c_void {
    match n.checked_mul(size) {
        // SAFETY: forwarded from the caller.
        Some(total) => unsafe { realloc(p, total) },
        None => or_enomem(ptr::null_mut()),
    }
}

/// POSIX's `posix_memalign`: stores a block of `size` bytes aligned to `align` in `*out` and
/// returns 0; returns `EINVAL` when `align` is not a power of two times `sizeof(void *)`, and
/// `ENOMEM` when memory is refused (`*out` is then left as it was; `errno` is not touched).
///
/// # Safety
/// `out` is valid for a pointer-sized write.
#[no_mangle]
pub unsafe extern "C" fn posix_memalign(out: *mut *mut c_void, align: usize, size: usize) -> c_int {
    if !align.is_power_of_two() || align < core::mem::size_of::<*mut c_void>() {
        return libc::EINVAL;
    }
    let p = cabi::memalign(align, size);
    if p.is_null() {
        return libc::ENOMEM;
    }
    // SAFETY: the caller's guarantee.
    unsafe { out.write(p.cast()) };
    0
}

/// C11's `aligned_alloc`: `size` bytes aligned to `align`; NULL with `errno = EINVAL` when
/// `align` is not a power of two, with `errno = ENOMEM` when memory is refused. (libstdc++'s
/// aligned `operator new` calls it.)
#[no_mangle]
pub extern "C" fn aligned_alloc(align: usize, size: usize) -> *mut c_void {
    if !align.is_power_of_two() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    or_enomem(cabi::memalign(align, size))
}

/// The old `memalign`: `size` bytes aligned to `align` rounded up to a power of two (as
/// glibc); NULL with `errno = EINVAL` for an alignment past half the address space, with
/// `errno = ENOMEM` when memory is refused.
#[no_mangle]
pub extern "C" fn memalign(align: usize, size: usize) -> *mut c_void {
    let Some(align) = align.max(1).checked_next_power_of_two() else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    or_enomem(cabi::memalign(align, size))
}

/// The old `valloc`: `size` bytes aligned to the page.
#[no_mangle]
pub extern "C" fn valloc(size: usize) -> *mut c_void {
    or_enomem(cabi::memalign(OS_PAGE, size))
}

/// The old `pvalloc`: `size` rounded up to whole pages (one page for 0), aligned to the page.
#[no_mangle]
pub extern "C" fn pvalloc(size: usize) -> *mut c_void {
    match size.max(1).checked_next_multiple_of(OS_PAGE) {
        Some(n) => or_enomem(cabi::memalign(OS_PAGE, n)),
        None => or_enomem(ptr::null_mut()),
    }
}

/// glibc's `malloc_usable_size`: the bytes of the block at `p`, at least what was asked and
/// all usable; 0 for NULL.
///
/// # Safety
/// `p` is NULL or a live block from this allocator.
#[no_mangle]
pub unsafe extern "C" fn malloc_usable_size(p: *mut c_void) -> usize {
    // SAFETY: forwarded from the caller.
    unsafe { cabi::usable_size(p.cast()) }
}

/// glibc's internal name of [`malloc`] (called by some programs and libraries directly).
#[no_mangle]
pub extern "C" fn __libc_malloc(size: usize) -> *mut c_void {
    malloc(size)
}

/// glibc's internal name of [`free`].
///
/// # Safety
/// As for [`free`].
#[no_mangle]
pub unsafe extern "C" fn __libc_free(p: *mut c_void) {
    // SAFETY: forwarded from the caller.
    unsafe { free(p) }
}

/// glibc's internal name of [`calloc`].
#[no_mangle]
pub extern "C" fn __libc_calloc(n: usize, size: usize) -> *mut c_void {
    calloc(n, size)
}

/// glibc's internal name of [`realloc`].
///
/// # Safety
/// As for [`realloc`].
#[no_mangle]
pub unsafe extern "C" fn __libc_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    // SAFETY: forwarded from the caller.
    unsafe { realloc(p, size) }
}

/// glibc's internal name of [`memalign`].
#[no_mangle]
pub extern "C" fn __libc_memalign(align: usize, size: usize) -> *mut c_void {
    memalign(align, size)
}

/// glibc's internal name of [`valloc`].
#[no_mangle]
pub extern "C" fn __libc_valloc(size: usize) -> *mut c_void {
    valloc(size)
}

/// glibc's internal name of [`pvalloc`].
#[no_mangle]
pub extern "C" fn __libc_pvalloc(size: usize) -> *mut c_void {
    pvalloc(size)
}

/// The old `cfree`, kept by glibc for old binaries: [`free`].
///
/// # Safety
/// As for [`free`].
#[no_mangle]
pub unsafe extern "C" fn cfree(p: *mut c_void) {
    // SAFETY: forwarded from the caller.
    unsafe { free(p) }
}

/// C23's `free_sized` (glibc 2.39): frees `p`, which was allocated with `size` bytes by
/// [`malloc`], [`calloc`] or [`realloc`]. The size is not needed here: the block is found from
/// the pointer, as [`free`] finds it.
///
/// # Safety
/// As for [`free`].
#[no_mangle]
pub unsafe extern "C" fn free_sized(p: *mut c_void, _size: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { free(p) }
}

/// C23's `free_aligned_sized` (glibc 2.39): frees `p`, which was allocated with `size` bytes
/// at `align` by [`aligned_alloc`] (or any function of this family). As [`free`].
///
/// # Safety
/// As for [`free`].
#[no_mangle]
pub unsafe extern "C" fn free_aligned_sized(p: *mut c_void, _align: usize, _size: usize) {
    // SAFETY: forwarded from the caller.
    unsafe { free(p) }
}

/// The allocator's counters, for C (`struct specalloc_stats` in `specalloc.h`): a summary of
/// [`specalloc_runtime::Stats`], every field 64 bits wide.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpecallocStats {
    /// Bytes in live objects (blocks at their class size, large objects at their pages).
    pub bytes_in_use: u64,
    /// Bytes mapped from the OS.
    pub bytes_mapped: u64,
    /// Bytes of pages handed out by the page heap plus live huge mappings.
    pub pages_in_use: u64,
    /// The highest `pages_in_use` so far.
    pub peak_in_use: u64,
    /// Allocations so far.
    pub allocs: u64,
    /// Frees so far.
    pub frees: u64,
    /// Objects live now.
    pub live_objects: u64,
    /// Large objects (over 32 KiB) live now.
    pub large_objects: u64,
    /// Frees of blocks whose span another thread owned.
    pub remote_frees: u64,
    /// Threads that hold a heap now.
    pub threads: u64,
    /// Heaps made so far (each is reused once its thread exits).
    pub heaps: u64,
    /// Chunks (4 MiB) of the page heap.
    pub chunks: u64,
    /// Free pages that still hold memory, in bytes.
    pub free_resident: u64,
    /// Bytes of free pages given back to the OS so far.
    pub returned_to_os: u64,
}

impl From<&specalloc_runtime::Stats> for SpecallocStats {
    fn from(s: &specalloc_runtime::Stats) -> Self {
        SpecallocStats {
            bytes_in_use: s.bytes_in_use as u64,
            bytes_mapped: s.bytes_mapped as u64,
            pages_in_use: s.pages_in_use as u64,
            peak_in_use: s.peak_in_use as u64,
            allocs: s.allocs,
            frees: s.frees,
            live_objects: s.live_objects,
            large_objects: s.large_objects,
            remote_frees: s.remote_frees,
            threads: s.threads as u64,
            heaps: s.heaps as u64,
            chunks: s.chunks as u64,
            free_resident: s.free_resident as u64,
            returned_to_os: s.returned_to_os,
        }
    }
}

/// Fills `*out` with the allocator's counters, writing at most `size` bytes (pass
/// `sizeof *out`, so that a program built against an older, shorter struct keeps working);
/// returns the bytes written. Does not allocate.
///
/// # Safety
/// `out` is valid for writes of `size` bytes.
#[no_mangle]
pub unsafe extern "C" fn specalloc_stats(out: *mut SpecallocStats, size: usize) -> usize {
    let s = SpecallocStats::from(&specalloc_runtime::stats());
    let n = size.min(core::mem::size_of::<SpecallocStats>());
    // SAFETY: `s` is a live value of at least `n` bytes; the caller guarantees `out` takes `n`.
    unsafe { ptr::copy_nonoverlapping((&s as *const SpecallocStats).cast::<u8>(), out.cast(), n) };
    n
}

/// Writes the allocator's statistics, human-readable (the table `specalloc::stats()` prints),
/// to the file descriptor `fd`; returns 0, or -1 when the write failed. Allocates (from
/// specalloc) to format the table: not for use inside a `malloc` hook.
#[no_mangle]
pub extern "C" fn specalloc_stats_print(fd: c_int) -> c_int {
    let text = specalloc_runtime::stats().to_string();
    let mut rest = text.as_bytes();
    while !rest.is_empty() {
        // SAFETY: writes from a live buffer of `rest.len()` bytes.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n <= 0 {
            return -1;
        }
        rest = &rest[n as usize..];
    }
    0
}

/// Gives free memory back to the OS now (see `specalloc::collect()`): the calling thread's
/// empty spans, the page heap's free pages, the cache of freed huge mappings. Returns the bytes
/// returned to the OS.
#[no_mangle]
pub extern "C" fn specalloc_collect() -> usize {
    specalloc_runtime::collect().returned_to_os()
}

/// The environment variable naming a file to which each process appends one line of counters
/// when it exits (`exit`, or a return from `main`): `specalloc pid=… allocs=… frees=…
/// live=… heaps=…`. For checking that a program (and every program it starts, which inherits
/// `LD_PRELOAD` and the variable) ran on specalloc.
pub const STATS_AT_EXIT: &core::ffi::CStr = c"SPECALLOC_STATS_AT_EXIT";

/// Runs before `main` (and before the constructors of libraries loaded after this one): arms
/// the report at exit when [`STATS_AT_EXIT`] is set. Takes no lock and allocates only through
/// `atexit`, whose first entries are static.
extern "C" fn on_load() {
    // SAFETY: a NUL-terminated name; getenv only reads the environment.
    if !unsafe { libc::getenv(STATS_AT_EXIT.as_ptr()) }.is_null() {
        // SAFETY: `report_at_exit` has the handler signature and lives as long as the process.
        unsafe { libc::atexit(report_at_exit) };
    }
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;

/// A fixed buffer that formats without allocating.
struct Line {
    buf: [u8; 256],
    len: usize,
}

impl core::fmt::Write for Line {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let end = self.len + s.len();
        if end > self.buf.len() {
            return Err(core::fmt::Error);
        }
        self.buf[self.len..end].copy_from_slice(s.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// Appends this process's counters to the file [`STATS_AT_EXIT`] names.
extern "C" fn report_at_exit() {
    use core::fmt::Write;
    // SAFETY: as in `on_load`.
    let path = unsafe { libc::getenv(STATS_AT_EXIT.as_ptr()) };
    if path.is_null() {
        return;
    }
    let s = specalloc_runtime::stats();
    let mut line = Line {
        buf: [0; 256],
        len: 0,
    };
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let r = writeln!(
        line,
        "specalloc pid={pid} allocs={} frees={} live={} heaps={}",
        s.allocs, s.frees, s.live_objects, s.heaps
    );
    if r.is_err() {
        return;
    }
    // SAFETY: `path` is a NUL-terminated string from getenv; the descriptor is closed below.
    let fd = unsafe {
        libc::open(
            path,
            libc::O_WRONLY | libc::O_APPEND | libc::O_CREAT | libc::O_CLOEXEC,
            0o644,
        )
    };
    if fd < 0 {
        return;
    }
    // SAFETY: writes from a live buffer of `line.len` bytes to the descriptor opened above;
    // one `write` of a short line to an O_APPEND file keeps lines of processes apart.
    unsafe {
        libc::write(fd, line.buf.as_ptr().cast(), line.len);
        libc::close(fd);
    }
}

/// Turns the background purge on, every `interval_ms` milliseconds, or off (0): see
/// `specalloc_runtime::set_background_purge`. Returns 0, or the error number of the failed
/// `pthread_create` (the purge then stays off).
#[no_mangle]
pub extern "C" fn specalloc_background_purge(interval_ms: u64) -> c_int {
    let interval = (interval_ms > 0).then(|| std::time::Duration::from_millis(interval_ms));
    match specalloc_runtime::set_background_purge(interval) {
        Ok(()) => 0,
        Err(e) => e.raw_os_error().unwrap_or(libc::EAGAIN),
    }
}

/// Every exported function, referenced from one static: the facade's `install!` (with the
/// `override` feature) references this, so that the linker keeps the functions in a Rust
/// binary (an rlib's object is linked only when something refers to it).
#[doc(hidden)]
pub struct Keep {
    _fns: [*const (); 25],
    _cxx: [*const (); 20],
}

// SAFETY: the pointers are never dereferenced or called through this value.
unsafe impl Sync for Keep {}

/// The one value of [`Keep`]; see there.
#[doc(hidden)]
#[used]
pub static KEEP: Keep = Keep {
    _fns: [
        malloc as *const (),
        free as *const (),
        calloc as *const (),
        realloc as *const (),
        reallocarray as *const (),
        posix_memalign as *const (),
        aligned_alloc as *const (),
        memalign as *const (),
        valloc as *const (),
        pvalloc as *const (),
        malloc_usable_size as *const (),
        __libc_malloc as *const (),
        __libc_free as *const (),
        __libc_calloc as *const (),
        __libc_realloc as *const (),
        __libc_memalign as *const (),
        __libc_valloc as *const (),
        __libc_pvalloc as *const (),
        cfree as *const (),
        free_sized as *const (),
        free_aligned_sized as *const (),
        specalloc_stats as *const (),
        specalloc_stats_print as *const (),
        specalloc_collect as *const (),
        specalloc_background_purge as *const (),
    ],
    _cxx: cxx::FNS,
};
