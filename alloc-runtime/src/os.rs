//! The operating-system layer: every call the runtime makes to the OS outside the thread-heap
//! code (mappings, the environment, and the checked mode's probe, last words and abort).
//!
//! Every byte the allocator hands out comes from here. Failures are reported as `None`; nothing
//! here panics, so an exhausted address space turns into a null return to the caller.
//!
//! # Out of memory
//!
//! Two kinds of mappings, so that a request the machine cannot back fails the way glibc's
//! `malloc` does instead of succeeding and getting the process OOM-killed later:
//!
//! - [`map`] (chunks of the page heap, the checked mode's side bitmaps, heap arenas): small,
//!   fixed-size reservations made with `MAP_NORESERVE`, so that they stay cheap and out of the
//!   kernel's commit accounting under the default heuristic policy.
//! - [`map_placed`] with `accounted`, and [`map_at`] (huge objects' memory, of any size): no
//!   `MAP_NORESERVE`, so the kernel's overcommit policy judges the request: under the default heuristic
//!   (`vm.overcommit_memory = 0`) a mapping larger than RAM + swap is refused (glibc's `malloc`
//!   maps the same way and is refused the same), under strict accounting (mode 2) anything past
//!   the commit limit is refused (in that mode the kernel ignores `MAP_NORESERVE` anyway, so the
//!   chunks are accounted too), and under mode 1 everything is granted, to glibc too. Growing
//!   such a mapping with [`remap`] is judged the same way.
//!
//! `RLIMIT_AS` caps every mapping, with or without `MAP_NORESERVE`: the kernel refuses a
//! mapping past the cap and the caller sees `None`. Requests larger than the user address space
//! ([`MAX_MAPPING`]) are refused before asking the kernel.

use core::ffi::CStr;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The OS page size assumed for `madvise`/`mremap` granularity (checked at the first mapping:
/// see [`check_page_size`]).
pub const OS_PAGE: usize = 4096;

/// Set once the kernel's page size was found to be [`OS_PAGE`].
static PAGE_CHECKED: AtomicBool = AtomicBool::new(false);

/// Stops the process with a message unless the kernel's pages are [`OS_PAGE`] bytes. The
/// runtime advises, drops and remaps memory at that granularity: on a kernel with larger pages
/// (aarch64 kernels built for 16 or 64 KiB pages) `madvise` would round a range up into the
/// memory of the objects beside it.
fn check_page_size() {
    if PAGE_CHECKED.load(Ordering::Relaxed) {
        return;
    }
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page != OS_PAGE as libc::c_long {
        write_stderr(
            b"specalloc: this kernel's memory pages are not 4 KiB; specalloc supports 4 KiB \
              pages only\n",
        );
        // SAFETY: abort has no preconditions; it does not return.
        unsafe { libc::abort() }
    }
    PAGE_CHECKED.store(true, Ordering::Relaxed);
}

/// The largest mapping ever asked of the kernel: 2^47 bytes (128 TiB), the user address space
/// of x86-64 and AArch64 with 4-level page tables (with 5-level tables the kernel still places
/// mappings below 2^47 unless given a hint above it, which we never give).
pub(crate) const MAX_MAPPING: usize = 1 << 47;

/// Bytes currently mapped from the OS by this allocator.
pub(crate) static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// Maps `size` bytes (a multiple of [`OS_PAGE`]) of fresh, zeroed, read-write memory, with
/// `MAP_NORESERVE`: for the allocator's own fixed-size reservations (see the module docs).
pub(crate) fn map(size: usize) -> Option<NonNull<u8>> {
    mmap_anon(size, libc::MAP_NORESERVE)
}

fn mmap_anon(size: usize, flags: libc::c_int) -> Option<NonNull<u8>> {
    debug_assert!(size.is_multiple_of(OS_PAGE) && size > 0);
    check_page_size();
    if size > MAX_MAPPING {
        return None;
    }
    // SAFETY: an anonymous private mapping with no address hint touches no existing memory;
    // the result is checked for MAP_FAILED before use.
    let p = unsafe {
        libc::mmap(
            core::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return None;
    }
    MAPPED.fetch_add(size, Ordering::Relaxed);
    NonNull::new(p.cast())
}

/// Maps `size` bytes aligned to `align` (a power of two, at least [`OS_PAGE`]), with
/// `MAP_NORESERVE` (see [`map`]); `None` when the OS refuses (see [`map_placed`]).
pub(crate) fn map_aligned(size: usize, align: usize) -> Option<NonNull<u8>> {
    map_placed(size, align, 0, false)
}

/// Maps `len` bytes (a multiple of [`OS_PAGE`]) placed so that the address `offset` bytes in is
/// a multiple of `align` (a power of two, at least [`OS_PAGE`]): maps `len + align - OS_PAGE`
/// bytes and unmaps the slop on both sides. With `accounted`, without `MAP_NORESERVE`: the
/// kernel's overcommit policy judges the request (`None` when it says the machine cannot back
/// it), as for objects of any size requested by the program; else as [`map`].
///
/// `None` when the OS refuses the mapping, or refuses to unmap the slop: unmapping part of a
/// mapping splits it in two, which the kernel refuses (`ENOMEM`) once the process has as many
/// mappings as `vm.max_map_count` allows. The whole mapping is then given back ([`release`]),
/// so that no slop stays mapped behind the caller's back and the request fails the way a
/// refused `mmap` does. (Even that unmap can need a split: the kernel merges neighbouring
/// anonymous mappings, so "the whole mapping" may be the middle of a larger one. Then its
/// memory still goes back, and its address space is counted in [`FAILED_UNMAPS`].)
pub(crate) fn map_placed(
    len: usize,
    align: usize,
    offset: usize,
    accounted: bool,
) -> Option<NonNull<u8>> {
    debug_assert!(align.is_power_of_two() && align >= OS_PAGE);
    debug_assert!(offset.is_multiple_of(OS_PAGE) && offset < len);
    let total = len.checked_add(align - OS_PAGE)?;
    let flags = if accounted { 0 } else { libc::MAP_NORESERVE };
    let base = mmap_anon(total, flags)?.as_ptr() as usize;
    let start = (base + offset).next_multiple_of(align) - offset;
    let end = start + len;
    // SAFETY: [base, start) is part of the mapping just made and nothing points into it.
    if start > base && !unsafe { unmap(base as *mut u8, start - base) } {
        // SAFETY: the whole mapping is still ours, and unused.
        unsafe { release(base as *mut u8, total) };
        return None;
    }
    // SAFETY: [end, base + total) is the unused end of the same mapping.
    if base + total > end && !unsafe { unmap(end as *mut u8, base + total - end) } {
        // SAFETY: [start, base + total) is all that is left of the mapping, ours and unused.
        unsafe { release(start as *mut u8, base + total - start) };
        return None;
    }
    NonNull::new(start as *mut u8)
}

/// Maps `len` bytes (a multiple of [`OS_PAGE`]) of fresh, zeroed memory exactly at `addr`
/// (page-aligned), accounted as [`map_placed`]'s `accounted` mappings are, only if nothing is
/// mapped there (`MAP_FIXED_NOREPLACE`): `false` when the range is taken or the OS refuses. A
/// kernel before 4.17 takes the flag as a hint and may place the mapping elsewhere; that
/// mapping is given back and the answer is `false`.
pub(crate) fn map_at(addr: usize, len: usize) -> bool {
    debug_assert!(addr.is_multiple_of(OS_PAGE) && len.is_multiple_of(OS_PAGE) && len > 0);
    if len > MAX_MAPPING || addr.checked_add(len).is_none_or(|end| end > MAX_MAPPING) {
        return false;
    }
    // SAFETY: MAP_FIXED_NOREPLACE never replaces an existing mapping: the kernel refuses
    // (EEXIST) when any of the range is taken; the result is checked for MAP_FAILED.
    let p = unsafe {
        libc::mmap(
            addr as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED_NOREPLACE,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return false;
    }
    MAPPED.fetch_add(len, Ordering::Relaxed);
    if p as usize != addr {
        // SAFETY: a whole mapping just made by us, somewhere else, that nothing uses.
        unsafe { release(p.cast(), len) };
        return false;
    }
    true
}

/// Unmaps `[ptr, ptr + size)`; `false` when the kernel refuses (the range then stays mapped
/// and counted): unmapping part of a mapping needs a new one, which fails with `ENOMEM` at
/// `vm.max_map_count`. Unmapping a whole mapping never splits one.
///
/// # Safety
/// The range must be a page-aligned part of a mapping made by [`map`] or [`map_placed`] that
/// nothing uses any more.
#[must_use]
pub(crate) unsafe fn unmap(ptr: *mut u8, size: usize) -> bool {
    // SAFETY: the caller guarantees the range is ours and unused.
    let r = unsafe { libc::munmap(ptr.cast(), size) };
    if r == 0 {
        MAPPED.fetch_sub(size, Ordering::Relaxed);
    }
    r == 0
}

/// Gives a whole mapping back: unmaps it, or, should the kernel refuse, drops its pages
/// (`MADV_DONTNEED`) so that at least its memory goes back, and counts the refusal
/// ([`FAILED_UNMAPS`]).
///
/// # Safety
/// `[ptr, ptr + size)` is a whole mapping of ours (or all that is left of one) that nothing
/// uses any more.
pub(crate) unsafe fn release(ptr: *mut u8, size: usize) {
    // `free` leaves `errno` as it was (glibc and POSIX.1-2024 promise it; programs read `errno`
    // after freeing their buffers on an error path).
    let _errno = KeepErrno::new();
    // SAFETY: guaranteed by the caller.
    if !unsafe { unmap(ptr, size) } {
        FAILED_UNMAPS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above; the pages hold nothing live.
        unsafe { decommit(ptr, size) };
    }
}

/// Mappings the kernel refused to unmap (see [`release`]): they stay mapped, without memory.
pub(crate) static FAILED_UNMAPS: AtomicUsize = AtomicUsize::new(0);

/// Restores this thread's `errno` when dropped: around system calls made inside `free` (and
/// other calls that must not change it), whose failures the allocator handles itself.
/// (The location is kept with the value: one `__errno_location` call, not two. The value is
/// `!Send`, so it is dropped on the thread whose `errno` it points to.)
pub(crate) struct KeepErrno {
    at: *mut libc::c_int,
    was: libc::c_int,
}

impl KeepErrno {
    /// Saves this thread's `errno`.
    #[inline(always)]
    pub(crate) fn new() -> KeepErrno {
        // SAFETY: `__errno_location` returns this thread's errno, valid for reads and writes
        // while the thread lives.
        let at = unsafe { libc::__errno_location() };
        // SAFETY: as above.
        let was = unsafe { *at };
        KeepErrno { at, was }
    }
}

impl Drop for KeepErrno {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: this thread's errno (the value cannot leave the thread), valid for writes.
        unsafe { *self.at = self.was };
    }
}

/// Sleeps while `word` holds `expected`, for at most `timeout_ms` milliseconds when given (or
/// until woken; a spurious or early return is harmless, the caller looks again). Does not
/// allocate, and leaves `errno` as it was.
pub(crate) fn futex_wait(
    word: &core::sync::atomic::AtomicU32,
    expected: u32,
    timeout_ms: Option<u64>,
) {
    let _errno = KeepErrno::new();
    let ts = timeout_ms.map(|ms| libc::timespec {
        tv_sec: (ms / 1000).min(libc::time_t::MAX as u64) as libc::time_t,
        tv_nsec: (ms % 1000 * 1_000_000) as libc::c_long,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: FUTEX_WAIT on a live, aligned 32-bit atomic of this process, with a relative
    // timeout (or none); the kernel only reads the word and the timespec.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            ts_ptr,
        )
    };
}

/// Wakes up to `n` threads sleeping on `word`. Does not allocate, and leaves `errno` as it was.
pub(crate) fn futex_wake(word: &core::sync::atomic::AtomicU32, n: i32) {
    let _errno = KeepErrno::new();
    // SAFETY: FUTEX_WAKE on a live, aligned 32-bit atomic of this process.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            n,
        )
    };
}

/// A coarse monotonic clock in nanoseconds (`CLOCK_MONOTONIC_COARSE`: no system call, a few
/// milliseconds of resolution), for the page heap's tick.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; the clock id is supported by Linux.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    debug_assert_eq!(r, 0);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Tells the OS that `[ptr, ptr + size)` is no longer needed: its pages are dropped and read
/// back as zero on next touch. Returns whether the advice was taken; a refusal is counted
/// ([`FAILED_ADVICE`]), and one for locked pages is remembered for a while ([`pages_locked`]).
///
/// # Safety
/// The range must be page-aligned, inside one of our mappings, and hold nothing live.
pub(crate) unsafe fn decommit(ptr: *mut u8, size: usize) -> bool {
    // SAFETY: the caller guarantees the range is ours and holds nothing live; MADV_DONTNEED on
    // a private anonymous mapping only discards contents.
    if unsafe { libc::madvise(ptr.cast(), size, libc::MADV_DONTNEED) } == 0 {
        return true;
    }
    FAILED_ADVICE.fetch_add(1, Ordering::Relaxed);
    // SAFETY: errno is this thread's.
    if unsafe { *libc::__errno_location() } == libc::EINVAL {
        // Our mappings are private and anonymous, never Huge TLB or PFN-mapped: the range holds
        // locked pages (`mlock`, `mlockall`), which the kernel will not drop.
        LOCKED_UNTIL.store(
            monotonic_ns().saturating_add(LOCKED_RETRY_NS),
            Ordering::Relaxed,
        );
    }
    false
}

/// `madvise` calls (`MADV_FREE`, `MADV_DONTNEED`) the kernel refused, ever.
pub(crate) static FAILED_ADVICE: AtomicUsize = AtomicUsize::new(0);

/// Until when (monotonic ns; 0: never refused) the page heap and the huge heap leave their free
/// pages resident instead of advising them, after the kernel refused to drop locked pages.
static LOCKED_UNTIL: AtomicU64 = AtomicU64::new(0);

/// How long free pages are left unadvised after the kernel refused to drop locked pages: a
/// program under `mlockall` would otherwise pay a failed system call on every page-heap
/// operation; one that unlocks its memory (or locked only a part of it) has its free pages
/// advised again after this long.
const LOCKED_RETRY_NS: u64 = 1_000_000_000;

/// Whether the kernel refused, less than [`LOCKED_RETRY_NS`] ago, to drop free pages because
/// they are locked in memory: while so, free pages are not advised (they stay resident and
/// are counted so). No system call unless a refusal was seen.
pub(crate) fn pages_locked() -> bool {
    let until = LOCKED_UNTIL.load(Ordering::Relaxed);
    until != 0 && monotonic_ns() < until
}

/// Forgets a refusal to drop locked pages (see [`pages_locked`]): for `collect()`, which asks
/// for every free page to go back now.
pub(crate) fn retry_locked() {
    LOCKED_UNTIL.store(0, Ordering::Relaxed);
}

/// Asks which pages of `[ptr, ptr + len)` (`ptr` page-aligned) are resident (`mincore`): bit 0
/// of `out[i]` is set when page `i` is. Returns false when the OS refused (a page not mapped);
/// `out` must have a byte for every page.
pub(crate) fn residency(ptr: *const u8, len: usize, out: &mut [u8]) -> bool {
    assert!(len.div_ceil(OS_PAGE) <= out.len(), "a byte for every page");
    // SAFETY: mincore only reads the page tables and writes one byte per page of the range
    // into `out`, which has that many; an unmapped range is an error, not a fault.
    unsafe { libc::mincore(ptr as *mut libc::c_void, len, out.as_mut_ptr()) == 0 }
}

/// Tells the OS that `[ptr, ptr + size)` may be taken back lazily (`MADV_FREE`): the pages stay
/// resident and keep their contents until the kernel needs memory, when it drops them (they then
/// read zero). Writing a page before that keeps it, with no fault. Returns the `errno` when the
/// advice was refused: `EINVAL` on kernels before 4.5, which lack it, and on locked pages
/// (`mlock`, `mlockall`), which [`decommit`] then tells apart (it fails on those too).
///
/// # Safety
/// As for [`decommit`].
pub(crate) unsafe fn lazy_free(ptr: *mut u8, size: usize) -> Result<(), libc::c_int> {
    // SAFETY: the caller guarantees the range is ours and holds nothing live; MADV_FREE on a
    // private anonymous mapping only lets the kernel discard contents. errno is this thread's.
    unsafe {
        if libc::madvise(ptr.cast(), size, libc::MADV_FREE) == 0 {
            Ok(())
        } else {
            FAILED_ADVICE.fetch_add(1, Ordering::Relaxed);
            Err(*libc::__errno_location())
        }
    }
}

/// The CPUs this process may run on: its affinity mask's, else (where the kernel refuses to
/// say) the CPUs online, else 1.
pub(crate) fn cpus() -> usize {
    // SAFETY: an all-zero `cpu_set_t` is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { core::mem::zeroed() };
    // SAFETY: the kernel writes at most `size_of::<cpu_set_t>()` bytes into `set`.
    if unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) } == 0 {
        // SAFETY: counts the bits of a set the kernel just wrote.
        let n = unsafe { libc::CPU_COUNT(&set) };
        if n > 0 {
            return n as usize;
        }
    }
    // SAFETY: `sysconf` reads a value and writes nothing of ours.
    let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(online).unwrap_or(1).max(1)
}

/// Asks the OS to back `[ptr, ptr + size)` with transparent huge pages where it can.
///
/// # Safety
/// The range must be page-aligned and inside one of our mappings.
pub(crate) unsafe fn huge_pages(ptr: *mut u8, size: usize) {
    // SAFETY: advice on our own mapping; failure (e.g. THP disabled) is harmless.
    unsafe { libc::madvise(ptr.cast(), size, libc::MADV_HUGEPAGE) };
}

/// Asks the OS not to back `[ptr, ptr + size)` with transparent huge pages.
///
/// # Safety
/// The range must be page-aligned and inside one of our mappings.
pub(crate) unsafe fn no_huge_pages(ptr: *mut u8, size: usize) {
    // SAFETY: advice on our own mapping; failure (e.g. a kernel without THP) is harmless.
    unsafe { libc::madvise(ptr.cast(), size, libc::MADV_NOHUGEPAGE) };
}

/// Grows or shrinks the mapping `[ptr, ptr + old)` to `new` bytes, moving it if needed. Growth
/// is judged by the overcommit policy as the mapping was (see the module docs); `None` when
/// refused.
///
/// # Safety
/// `[ptr, ptr + old)` must be a page-aligned range of ours inside one mapping made by [`map`],
/// [`map_placed`] or [`map_aligned`] that nothing else uses; on success the old range must not
/// be used any more.
pub(crate) unsafe fn remap(ptr: *mut u8, old: usize, new: usize) -> Option<NonNull<u8>> {
    if new > MAX_MAPPING {
        return None;
    }
    // SAFETY: the caller guarantees the mapping is ours; MREMAP_MAYMOVE lets the kernel move the
    // pages without copying, and the result is checked for MAP_FAILED.
    let p = unsafe { libc::mremap(ptr.cast(), old, new, libc::MREMAP_MAYMOVE) };
    if p == libc::MAP_FAILED {
        return None;
    }
    if new >= old {
        MAPPED.fetch_add(new - old, Ordering::Relaxed);
    } else {
        MAPPED.fetch_sub(old - new, Ordering::Relaxed);
    }
    NonNull::new(p.cast())
}

/// Reads the environment variable `name` as a decimal number, without allocating: `None` when it
/// is unset, empty or not all digits; saturates at `usize::MAX`.
///
/// Reads the environment with `getenv`, which is safe as long as nothing changes the environment
/// at the same time; `std::env::set_var` is `unsafe` for that reason, and its callers promise it.
pub(crate) fn env_usize(name: &CStr) -> Option<usize> {
    // SAFETY: a NUL-terminated name; getenv returns null or a NUL-terminated string, which we
    // only read, before returning (see above for concurrent changes).
    let v = unsafe { libc::getenv(name.as_ptr()) };
    if v.is_null() {
        return None;
    }
    // SAFETY: a non-null result of getenv is a NUL-terminated string that lives at least until
    // the environment changes.
    let bytes = unsafe { CStr::from_ptr(v) }.to_bytes();
    if bytes.is_empty() {
        return None;
    }
    let mut n = 0usize;
    for &c in bytes {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        n = n.saturating_mul(10).saturating_add(d as usize);
    }
    Some(n)
}

/// Whether the page holding `addr` is mapped in this process (asked with `mincore`, which never
/// touches the page, so any address may be asked about).
#[cfg(feature = "checked")]
pub(crate) fn is_mapped(addr: usize) -> bool {
    let page = addr & !(OS_PAGE - 1);
    let mut vec = 0u8;
    // SAFETY: mincore only reports on the page (it fails with ENOMEM if it is not mapped) and
    // writes one byte into `vec`, which covers the one page asked about.
    unsafe { libc::mincore(page as *mut libc::c_void, 1, &mut vec) == 0 }
}

/// Writes `bytes` to standard error (file descriptor 2) without allocating or locking; a
/// failed or short write is not retried (this is for last words before aborting, and for
/// warnings before `main`).
pub(crate) fn write_stderr(bytes: &[u8]) {
    // SAFETY: writes from a live buffer of `bytes.len()` bytes.
    unsafe { libc::write(2, bytes.as_ptr().cast(), bytes.len()) };
}

/// Aborts the process at once with `SIGABRT`: no unwinding, no destructors, no allocation.
#[cfg(feature = "checked")]
pub(crate) fn abort() -> ! {
    // SAFETY: abort has no preconditions; it does not return.
    unsafe { libc::abort() }
}

/// A pthread key: a per-thread value whose destructor runs at thread exit.
pub(crate) type ThreadKey = libc::pthread_key_t;

/// A thread-exit destructor, called with the thread's non-null value of its key.
pub(crate) type ThreadDtor = unsafe extern "C" fn(*mut libc::c_void);

/// Creates a pthread key with destructor `dtor`. `None` if the system has no key left.
pub(crate) fn thread_key_create(dtor: ThreadDtor) -> Option<ThreadKey> {
    let mut key: ThreadKey = 0;
    // SAFETY: `key` is a valid out-pointer; `dtor` has the destructor signature.
    (unsafe { libc::pthread_key_create(&mut key, Some(dtor)) } == 0).then_some(key)
}

/// Sets this thread's value of `key` (a non-null value makes its destructor run at exit).
pub(crate) fn thread_key_set(key: ThreadKey, value: *mut libc::c_void) {
    // SAFETY: `key` came from `thread_key_create`; the value is only handed back to the
    // key's destructor, which decides what it means.
    unsafe { libc::pthread_setspecific(key, value) };
}

/// Starts a detached thread running `f` (it must not allocate, recurse deeply or unwind), with
/// every signal blocked, so that the program's signals are never delivered to it (a program
/// that blocks a signal in its threads and waits for it in one, or runs its handlers, sees no
/// difference). `Err(errno)` when the system refuses the thread.
pub(crate) fn spawn_detached(
    f: extern "C" fn(*mut libc::c_void) -> *mut libc::c_void,
) -> Result<(), libc::c_int> {
    // 256 KiB beyond the minimum: glibc takes the static TLS of every loaded library out of a
    // thread's stack, so a tight stack could refuse the thread in a program with a large one.
    const STACK: usize = libc::PTHREAD_STACK_MIN + (256 << 10);
    // SAFETY: `attr` and the signal sets are initialised before any other use and `attr` is
    // destroyed once; `thread` is a valid out-pointer; `f` has the start routine's signature
    // and takes no argument (null). The caller's signal mask is restored before returning.
    unsafe {
        let mut attr: libc::pthread_attr_t = core::mem::zeroed();
        let r = libc::pthread_attr_init(&mut attr);
        if r != 0 {
            return Err(r);
        }
        libc::pthread_attr_setdetachstate(&mut attr, libc::PTHREAD_CREATE_DETACHED);
        libc::pthread_attr_setstacksize(&mut attr, STACK);
        let mut all: libc::sigset_t = core::mem::zeroed();
        let mut old: libc::sigset_t = core::mem::zeroed();
        libc::sigfillset(&mut all);
        // The new thread starts with the creating thread's mask: all blocked.
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut thread: libc::pthread_t = 0;
        let r = libc::pthread_create(&mut thread, &attr, f, core::ptr::null_mut());
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, core::ptr::null_mut());
        libc::pthread_attr_destroy(&mut attr);
        if r == 0 {
            Ok(())
        } else {
            Err(r)
        }
    }
}

/// This process's id (a system call: glibc keeps no copy).
pub(crate) fn process_id() -> i32 {
    // SAFETY: getpid has no preconditions and cannot fail.
    unsafe { libc::getpid() }
}

/// Registers `fork` handlers: `prepare` in the parent before the fork, `parent` and `child`
/// after it, in the parent and in the child. `Err(errno)` when the C library refuses (it
/// grows its array of handlers with `malloc`: `ENOMEM`).
pub(crate) fn at_fork(
    prepare: extern "C" fn(),
    parent: extern "C" fn(),
    child: extern "C" fn(),
) -> Result<(), libc::c_int> {
    // SAFETY: the handlers have the required signature.
    match unsafe { libc::pthread_atfork(Some(prepare), Some(parent), Some(child)) } {
        0 => Ok(()),
        e => Err(e),
    }
}

mod pin;
pub(crate) use pin::{pin_fork_child, pin_image};
