//! The per-site report of `#[specialize(report)]`: each rewritten site is a static [`Site`]
//! that counts its runs and lists itself on its first run; [`sites()`] reads the list.
//! Where a site's allocations go is decided by the runtime's single router,
//! [`size_class::route`](specalloc_runtime::size_class::route).

use core::fmt;
use core::mem::{align_of, size_of, MaybeUninit};
use core::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use specalloc_runtime::routines::TINY_ALIGN;
use specalloc_runtime::size_class::{self, route, Route};
use specalloc_runtime::spec;

/// One allocation site rewritten by `#[specialize(report)]`, as [`sites()`] reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteStats {
    /// Source file of the site.
    pub file: &'static str,
    /// Line of the site (1-based).
    pub line: u32,
    /// Column of the site (1-based).
    pub column: u32,
    /// What was written there: `Box::new`, `Box::default`, `String::from`, …
    pub what: &'static str,
    /// Times the site ran.
    pub hits: u64,
    /// Bytes each allocation asks for (at the first run: a site in a generic function may
    /// allocate several sizes).
    pub size: usize,
    /// Alignment each allocation asks for (at the first run).
    pub align: usize,
    /// Where such an allocation goes.
    pub route: SiteRoute,
}

/// Where the allocations of a site go, from their size and alignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SiteRoute {
    /// Zero-sized: nothing is allocated.
    ZeroSized,
    /// A tiny routine (1 to 15 bytes).
    Tiny,
    /// The routine of this size class (16 bytes to 32 KiB).
    Class(usize),
    /// The global allocator's generic path: large or over-aligned, the `no-size-specialized`
    /// opt-out is on, or the program did not `install!` specalloc.
    Generic,
}

impl SiteRoute {
    /// The route of an allocation of `size` bytes at `align` in a program that installed
    /// specalloc with `install!`: the runtime's router ([`route`]) decides, as it does for the
    /// entry points' choice of routine.
    ///
    /// ```
    /// use specalloc::SiteRoute;
    /// assert_eq!(SiteRoute::of(0, 1), SiteRoute::ZeroSized);
    /// assert_eq!(SiteRoute::of(1 << 20, 8), SiteRoute::Generic);
    /// if specalloc::spec::SIZE_SPECIALIZED {
    ///     assert_eq!(SiteRoute::of(4, 4), SiteRoute::Tiny);
    ///     assert_eq!(SiteRoute::of(24, 8), SiteRoute::Class(3));
    ///     // Agrees with the entry points' choice of routine.
    ///     for size in 1..40_000 {
    ///         for align in [1, 2, 4, 8, 16, 64, 4096, 16384] {
    ///             let routed = SiteRoute::of(size, align) != SiteRoute::Generic;
    ///             assert_eq!(routed, specalloc::spec::routine(size, align, false).is_some());
    ///         }
    ///     }
    /// }
    /// ```
    pub const fn of(size: usize, align: usize) -> SiteRoute {
        if size == 0 {
            return SiteRoute::ZeroSized;
        }
        if !spec::SIZE_SPECIALIZED {
            return SiteRoute::Generic;
        }
        match route(size, align) {
            Route::Large => SiteRoute::Generic,
            // Under 16 bytes the routine of the exact size serves the layout when its block is
            // aligned enough (`spec::routine`, without linking its tables of routines).
            _ if size < 16 => {
                if align <= TINY_ALIGN[size] {
                    SiteRoute::Tiny
                } else {
                    SiteRoute::Generic
                }
            }
            Route::Tiny => SiteRoute::Generic,
            Route::Small(c) => SiteRoute::Class(c),
        }
    }
}

impl fmt::Display for SiteStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {} of {} B (align {}) -> ",
            self.file, self.line, self.column, self.what, self.size, self.align
        )?;
        match self.route {
            SiteRoute::ZeroSized => write!(f, "nothing (zero-sized)")?,
            SiteRoute::Tiny => write!(f, "tiny routine")?,
            SiteRoute::Class(c) => write!(f, "class {c} ({} B)", size_class::class_size(c))?,
            SiteRoute::Generic => write!(f, "generic path")?,
        }
        write!(f, ", {} hit{}", self.hits, plural(self.hits))
    }
}

/// The plural ending of a count's noun.
fn plural(n: u64) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// The sites rewritten by `#[specialize(report)]` that have run so far, hottest first: by
/// hits, most first, and sites with as many hits by file, line and column. Sites of code
/// without `report` are not counted (it costs an atomic increment per allocation).
/// [`site_report()`] gives the same list ready to print.
///
/// ```
/// specalloc::install!();
///
/// #[specalloc::specialize(report)]
/// fn make() -> (Box<[u64; 3]>, String) {
///     (Box::new([1, 2, 3]), String::from("once"))
/// }
///
/// #[specalloc::specialize(report)]
/// fn more() -> Box<u8> {
///     Box::new(1)
/// }
///
/// for i in 0..10 {
///     make();
///     if i < 4 {
///         more();
///     }
/// }
/// let sites = specalloc::sites();
/// let hits: Vec<u64> = sites.iter().map(|s| s.hits).collect();
/// assert_eq!(hits, [10, 10, 4]);
/// let site = sites.iter().find(|s| s.what == "Box::new" && s.size == 24).unwrap();
/// println!("{site}"); // src/lib.rs:5:6: Box::new of 24 B (align 8) -> class 3 (24 B), 10 hits
/// // Equal hits: in source order.
/// assert_eq!((sites[0].what, sites[1].what), ("Box::new", "String::from"));
/// ```
pub fn sites() -> Vec<SiteStats> {
    let mut out = Vec::new();
    let mut p = SITES.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: the list holds only `&'static Site`s, never removed.
        let s = unsafe { &*p };
        out.push(s.stats());
        p = s.next.load(Ordering::Acquire);
    }
    out.sort_by(|a, b| {
        b.hits
            .cmp(&a.hits)
            .then_with(|| (a.file, a.line, a.column).cmp(&(b.file, b.line, b.column)))
    });
    out
}

/// The per-site report, ready to print: [`sites()`], hottest first, with the hits of all of
/// them. Its `Display` writes a summary line, then one line per site (as [`SiteStats`]
/// displays it) with its share of all the hits.
///
/// ```
/// specalloc::install!();
///
/// #[specalloc::specialize(report)]
/// fn node() -> Box<(u64, u64)> {
///     Box::new((1, 2))
/// }
///
/// for _ in 0..3 {
///     node();
/// }
/// let report = specalloc::site_report();
/// assert_eq!((report.sites.len(), report.counted(), report.hits()), (1, 1, 3));
/// let text = report.to_string();
/// assert!(text.starts_with("1 site, 3 hits, hottest first:\n"), "{text}");
/// assert!(text.ends_with(": Box::new of 16 B (align 8) -> class 2 (16 B), 3 hits (100.0%)\n")
///     || !specalloc::spec::SIZE_SPECIALIZED, "{text}");
/// print!("{report}");
/// // 1 site, 3 hits, hottest first:
/// //   …:5:5: Box::new of 16 B (align 8) -> class 2 (16 B), 3 hits (100.0%)
/// print!("{}", report.top(10)); // the ten hottest
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteReport {
    /// The sites, hottest first (as [`sites()`] orders them): all of them, or the hottest
    /// ones ([`SiteReport::top`]).
    pub sites: Vec<SiteStats>,
    counted: usize,
    hits: u64,
}

/// The sites counted so far, as a [`SiteReport`] (`print!("{}", specalloc::site_report())`).
///
/// ```
/// let report = specalloc::site_report();
/// assert_eq!(report.sites, specalloc::sites());
/// ```
pub fn site_report() -> SiteReport {
    let sites = sites();
    SiteReport {
        counted: sites.len(),
        hits: sites.iter().map(|s| s.hits).sum(),
        sites,
    }
}

impl SiteReport {
    /// The hits of all the sites counted (those [`SiteReport::top`] left out included).
    ///
    /// ```
    /// let report = specalloc::site_report();
    /// assert_eq!(report.hits(), report.sites.iter().map(|s| s.hits).sum::<u64>());
    /// ```
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// How many sites were counted (those [`SiteReport::top`] left out included).
    ///
    /// ```
    /// let report = specalloc::site_report();
    /// assert_eq!(report.counted(), report.sites.len());
    /// ```
    pub fn counted(&self) -> usize {
        self.counted
    }

    /// The `n` hottest sites only; the shares printed stay shares of all the hits.
    ///
    /// ```
    /// let report = specalloc::site_report();
    /// let top = report.top(3);
    /// assert!(top.sites.len() <= 3);
    /// assert_eq!((top.counted(), top.hits()), (report.counted(), report.hits()));
    /// ```
    pub fn top(&self, n: usize) -> SiteReport {
        SiteReport {
            sites: self.sites.iter().take(n).cloned().collect(),
            ..*self
        }
    }
}

impl fmt::Display for SiteReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (shown, counted, hits) = (self.sites.len(), self.counted, self.hits);
        if counted == 0 {
            return writeln!(
                f,
                "no site counted (none under #[specialize(report)] has run)"
            );
        }
        if shown < counted {
            write!(f, "the {shown} hottest of ")?;
        }
        writeln!(
            f,
            "{counted} site{}, {hits} hit{}, hottest first:",
            plural(counted as u64),
            plural(hits)
        )?;
        for s in &self.sites {
            // The share in tenths of a percent, from integers.
            let per_mille = (u128::from(s.hits) * 1000)
                .checked_div(u128::from(hits))
                .unwrap_or(0);
            writeln!(f, "  {s} ({}.{}%)", per_mille / 10, per_mille % 10)?;
        }
        Ok(())
    }
}

static SITES: AtomicPtr<Site> = AtomicPtr::new(core::ptr::null_mut());

/// A site rewritten by `#[specialize(report)]`: a static of its own (not public API).
#[doc(hidden)]
pub struct Site {
    file: &'static str,
    line: u32,
    column: u32,
    what: &'static str,
    hits: AtomicU64,
    size: AtomicUsize,
    align: AtomicUsize,
    state: AtomicU8,
    next: AtomicPtr<Site>,
}

const UNLISTED: u8 = 0;
const LISTING: u8 = 1;
const LISTED: u8 = 2;

impl Site {
    /// A site not run yet.
    pub const fn new(file: &'static str, line: u32, column: u32, what: &'static str) -> Self {
        Site {
            file,
            line,
            column,
            what,
            hits: AtomicU64::new(0),
            size: AtomicUsize::new(0),
            align: AtomicUsize::new(0),
            state: AtomicU8::new(UNLISTED),
            next: AtomicPtr::new(core::ptr::null_mut()),
        }
    }

    /// Counts one run allocating `size` bytes at `align`; the first run lists the site.
    #[inline]
    pub fn hit(&'static self, size: usize, align: usize) {
        self.hits.fetch_add(1, Ordering::Relaxed);
        if self.state.load(Ordering::Acquire) != LISTED {
            self.list(size, align);
        }
    }

    #[cold]
    fn list(&'static self, size: usize, align: usize) {
        if self
            .state
            .compare_exchange(UNLISTED, LISTING, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return;
        }
        self.size.store(size, Ordering::Relaxed);
        self.align.store(align, Ordering::Relaxed);
        let me = self as *const Site as *mut Site;
        let mut head = SITES.load(Ordering::Acquire);
        loop {
            self.next.store(head, Ordering::Relaxed);
            match SITES.compare_exchange_weak(head, me, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(h) => head = h,
            }
        }
        self.state.store(LISTED, Ordering::Release);
    }

    fn stats(&self) -> SiteStats {
        let (size, align) = (
            self.size.load(Ordering::Relaxed),
            self.align.load(Ordering::Relaxed),
        );
        let route = match SiteRoute::of(size, align.max(1)) {
            SiteRoute::Tiny | SiteRoute::Class(_) if !spec::installed() => SiteRoute::Generic,
            r => r,
        };
        SiteStats {
            file: self.file,
            line: self.line,
            column: self.column,
            what: self.what,
            hits: self.hits.load(Ordering::Relaxed),
            size,
            align,
            route,
        }
    }
}

/// Bytes of `n` elements of `T`, saturating (a size no routine serves).
const fn array_bytes<T>(n: usize) -> usize {
    size_of::<T>().saturating_mul(n)
}

/// The macros' entry points ([`crate::__private`]), each counting its site first.
pub mod counted {
    use super::{align_of, array_bytes, size_of, MaybeUninit, Site};
    use crate::__private as p;
    use core::pin::Pin;

    /// [`p::boxer`], counted when the site starts to run (the function is chosen before its
    /// argument is evaluated): `boxer(&SITE, Box::new)(x)`, so that a large value goes to std's
    /// `Box::new` itself, built in place in a debug build, as without `report`.
    #[inline(always)]
    pub fn boxer<T, F: FnOnce(T) -> Box<T>>(site: &'static Site, std: F) -> fn(T) -> Box<T> {
        site.hit(size_of::<T>(), align_of::<T>());
        p::boxer(std)
    }

    /// [`p::box_slicer`], counted when the site starts to run, as [`boxer`].
    #[inline(always)]
    pub fn box_slicer<T, const N: usize, F: FnOnce([T; N]) -> Box<[T]>>(
        site: &'static Site,
        std: F,
    ) -> fn([T; N]) -> Box<[T]> {
        site.hit(size_of::<[T; N]>(), align_of::<T>());
        p::box_slicer(std)
    }

    /// [`p::box_str`], counted.
    #[inline(always)]
    pub fn box_str<const N: usize, F: FnOnce(&'static str) -> Box<str>>(
        site: &'static Site,
        std: F,
        s: &'static str,
    ) -> Box<str> {
        site.hit(N, 1);
        p::box_str::<N, F>(std, s)
    }

    /// [`p::box_default`], counted at `S`'s site when the block comes from
    /// [`p::BoxDefault::make`].
    #[inline(always)]
    pub fn box_default<T: ?Sized, F: Fn() -> Box<T>, S: p::SiteOf>(
        std: F,
    ) -> p::BoxDefault<T, F, S> {
        p::box_default_at(std)
    }

    /// [`p::pinner`], counted when the site starts to run, as [`boxer`].
    #[inline(always)]
    pub fn pinner<T, F: FnOnce(T) -> Pin<Box<T>>>(
        site: &'static Site,
        std: F,
    ) -> fn(T) -> Pin<Box<T>> {
        site.hit(size_of::<T>(), align_of::<T>());
        p::pinner(std)
    }

    /// [`p::uninit`], counted.
    #[inline(always)]
    pub fn uninit<T, F: FnOnce() -> Box<MaybeUninit<T>>>(
        site: &'static Site,
        std: F,
    ) -> Box<MaybeUninit<T>> {
        site.hit(size_of::<T>(), align_of::<T>());
        p::uninit(std)
    }

    /// [`p::zeroed`], counted.
    #[inline(always)]
    pub fn zeroed<T, F: FnOnce() -> Box<MaybeUninit<T>>>(
        site: &'static Site,
        std: F,
    ) -> Box<MaybeUninit<T>> {
        site.hit(size_of::<T>(), align_of::<T>());
        p::zeroed(std)
    }

    /// [`p::vec_from_elem`], counted.
    #[inline(always)]
    pub fn vec_from_elem<T, const N: usize, C: Fn(&T) -> T>(
        site: &'static Site,
        empty: Vec<T>,
        clone: C,
        x: T,
    ) -> Vec<T> {
        site.hit(array_bytes::<T>(N), align_of::<T>());
        p::vec_from_elem::<T, N, C>(empty, clone, x)
    }

    /// [`p::vec_zero`], counted.
    #[inline(always)]
    pub fn vec_zero<T: p::Zero, const N: usize>(
        site: &'static Site,
        empty: Vec<T>,
        zero: T,
    ) -> Vec<T> {
        site.hit(array_bytes::<T>(N), align_of::<T>());
        p::vec_zero::<T, N>(empty, zero)
    }

    /// [`p::vec_list`], counted.
    #[inline(always)]
    pub fn vec_list<T, const N: usize>(site: &'static Site, empty: Vec<T>) -> p::VecList<T, N> {
        site.hit(array_bytes::<T>(N), align_of::<T>());
        p::vec_list::<T, N>(empty)
    }

    /// [`p::vec_from_array`], counted.
    #[inline(always)]
    pub fn vec_from_array<T, const N: usize>(
        site: &'static Site,
        empty: Vec<T>,
        a: [T; N],
    ) -> Vec<T> {
        site.hit(array_bytes::<T>(N), align_of::<T>());
        p::vec_from_array(empty, a)
    }

    /// [`p::string_from`], counted.
    #[inline(always)]
    pub fn string_from<const N: usize, F: FnOnce(&'static str) -> String>(
        site: &'static Site,
        std: F,
        s: &'static str,
    ) -> String {
        site.hit(N, 1);
        p::string_from::<N, F>(std, s)
    }
}
