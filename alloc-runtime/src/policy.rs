//! The page-return policy's settings: how long freed pages stay resident before the page heap
//! advises them (`MADV_FREE`) and returns them (`MADV_DONTNEED`), and whether a large heap asks
//! for huge pages. A leaf: read from the environment once, set from code with
//! [`crate::set_page_policy`]; the page heap (`chunk.rs`) and the huge heap
//! (`large.rs`) read it.
//!
//! A page freed by the program stays *dirty* (resident, no system call) while it is young; once
//! it stayed free for a whole purge period it is advised with `MADV_FREE` (*lazy*: still
//! resident and free to reuse without a fault, but the kernel may take it under memory
//! pressure); once it stayed lazy for a whole decommit period it goes back with
//! `MADV_DONTNEED` (*clean*: not resident, reads zero, faults when touched again). Two bounds
//! override the clock:
//!
//! - the *lasting* bound, kept resident for good: 256 KiB or an eighth of the pages in use;
//! - the *recent-peak* bound: free memory never stays resident beyond what the program's recent
//!   peak (the highest pages in use of the current and the previous decommit window) accounts
//!   for, with room for the fragmentation seen in those windows (pages handed out that did not
//!   hold memory while the free pages held enough that did), up to a quarter of the peak, or a
//!   slack of 8 MiB or half the pages in use, whichever is more. Past it, free pages go back
//!   with `MADV_DONTNEED` at once, lazy ones first.
//!
//! The chunk headers' pages of span descriptors follow a clock of their own (`chunk/decay.rs`):
//! once a second, a page that held no run's descriptor then and a second before goes back with
//! `MADV_DONTNEED`, and `collect()` returns every such page at once.
//!
//! So a program that builds and drops a large structure and builds it again reuses the same
//! resident pages (no fault, no system call), and a program whose heap shrank for good gives the
//! memory back within one or two decommit periods of page-heap activity. By default there is no
//! background thread: the clock is read on the page heap's own operations (a span or a medium object taken
//! or given back), so a program that stops allocating keeps its free pages until it allocates
//! again or calls `collect()`, which returns them all at once, unless the background purge is
//! on (`purge.rs`: opt-in, `SPECALLOC_BACKGROUND_PURGE_MS` or `set_background_purge`), whose
//! thread reads the clock on time.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::os;

/// Default of [`PagePolicy::purge_delay_ms`].
pub(crate) const DEFAULT_PURGE_DELAY_MS: u64 = 100;
/// Default of [`PagePolicy::decommit_delay_ms`].
pub(crate) const DEFAULT_DECOMMIT_DELAY_MS: u64 = 1000;

/// How the page heap gives free memory back to the OS, and whether it asks for huge pages.
///
/// Read once from the environment (`SPECALLOC_PURGE_DELAY_MS`, `SPECALLOC_DECOMMIT_DELAY_MS`,
/// `SPECALLOC_HUGE_PAGES`) at the first page-heap operation; [`set_page_policy`] overrides it.
///
/// ```
/// let p = specalloc_runtime::page_policy();
/// assert_eq!(p, specalloc_runtime::PagePolicy::default());
/// // Give freed memory back sooner: advise after 10 ms, return after 100 ms.
/// specalloc_runtime::set_page_policy(specalloc_runtime::PagePolicy {
///     purge_delay_ms: 10,
///     decommit_delay_ms: 100,
///     ..p
/// });
/// specalloc_runtime::set_page_policy(p);
/// ```
///
/// [`set_page_policy`]: crate::set_page_policy
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PagePolicy {
    /// How long a free page stays dirty (resident, no system call) before it is advised with
    /// `MADV_FREE`, in milliseconds (it happens between one and two periods after the free, on
    /// a page-heap operation). 0: at once. Default 100.
    pub purge_delay_ms: u64,
    /// How long a page advised with `MADV_FREE` stays so before it goes back with
    /// `MADV_DONTNEED` (and leaves the RSS), in milliseconds; also the window of the recent
    /// peak that bounds the free memory kept. 0: free pages go back with `MADV_DONTNEED`
    /// directly, never `MADV_FREE`. Default 1000.
    pub decommit_delay_ms: u64,
    /// Ask for transparent huge pages (`MADV_HUGEPAGE`) for chunks mapped once the heap is
    /// over 64 MiB. Off by default: below 64 MiB chunks are marked `MADV_NOHUGEPAGE`, above
    /// they follow the system's setting.
    pub huge_pages: bool,
}

impl Default for PagePolicy {
    fn default() -> Self {
        PagePolicy {
            purge_delay_ms: DEFAULT_PURGE_DELAY_MS,
            decommit_delay_ms: DEFAULT_DECOMMIT_DELAY_MS,
            huge_pages: false,
        }
    }
}

/// The policy's fields; `u64::MAX` in `PURGE_MS` until first read.
static PURGE_MS: AtomicU64 = AtomicU64::new(u64::MAX);
static DECOMMIT_MS: AtomicU64 = AtomicU64::new(DEFAULT_DECOMMIT_DELAY_MS);
static HUGE: AtomicBool = AtomicBool::new(false);

/// The policy in force (read from the environment the first time).
pub(crate) fn policy() -> PagePolicy {
    let purge = PURGE_MS.load(Ordering::Relaxed);
    if purge != u64::MAX {
        return PagePolicy {
            purge_delay_ms: purge,
            decommit_delay_ms: DECOMMIT_MS.load(Ordering::Relaxed),
            huge_pages: HUGE.load(Ordering::Relaxed),
        };
    }
    let env = |name: &core::ffi::CStr, default: u64| {
        os::env_usize(name).map_or(default, |v| (v as u64).min(u64::MAX - 1))
    };
    let p = PagePolicy {
        purge_delay_ms: env(c"SPECALLOC_PURGE_DELAY_MS", DEFAULT_PURGE_DELAY_MS),
        decommit_delay_ms: env(c"SPECALLOC_DECOMMIT_DELAY_MS", DEFAULT_DECOMMIT_DELAY_MS),
        huge_pages: env(c"SPECALLOC_HUGE_PAGES", 0) != 0,
    };
    store(p);
    p
}

/// Sets the policy (see [`crate::set_page_policy`]).
pub(crate) fn set_policy(p: PagePolicy) {
    // The environment is read first, so that a first read of it cannot come after this and
    // overwrite what the program set (short of a race with another thread's very first read).
    policy();
    store(p);
}

fn store(p: PagePolicy) {
    DECOMMIT_MS.store(p.decommit_delay_ms, Ordering::Relaxed);
    HUGE.store(p.huge_pages, Ordering::Relaxed);
    PURGE_MS.store(p.purge_delay_ms.min(u64::MAX - 1), Ordering::Relaxed);
}
