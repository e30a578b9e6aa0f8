//! Issue 15: the differential corpus. The same few hundred lines of ordinary code are compiled
//! three times, as written (`plain`), under `#[specialize]` (`special`) and under
//! `#[specialize(report)]` (`reported`), and must produce the same transcript byte for byte:
//! Debug and Display texts, panic messages (including `assert!`/`assert_eq!` texts, which show
//! the code), `capacity()` values, clone and drop counts. The binary installs specalloc with
//! `install!`, so the annotated copies run through the size-specialised routines; under
//! `--features no-size-specialized` (CI runs `--features checked,no-size-specialized`) they go
//! through the generic path, with the same transcript.

#![allow(clippy::vec_box)] // one allocation per box, on purpose

use std::cell::Cell;

specalloc::install!();

#[path = "differential/corpus.rs"]
#[macro_use]
mod corpus;
#[path = "differential/harness.rs"]
mod harness;

use harness::{assert_same, find, panic_text, BUF_LEN};

/// Frame sizes are compared only unoptimised (this is an optimised build).
const FRAMES_COMPARED: bool = false;

/// No counting wrapper here (`install!` declares `SpecAlloc` itself): the allocation counts of
/// the corpus read 0, and `tests/differential_not_installed.rs` checks them.
fn allocs() -> usize {
    0
}

/// As [`allocs`].
fn zeroed_allocs() -> usize {
    0
}

corpus!(plain);
corpus!(special, specalloc::specialize);
corpus!(reported, specalloc::specialize(report));

#[test]
fn annotated_code_behaves_exactly_like_plain_code() {
    let plain = plain::run();
    let special = special::run();
    let reported = reported::run();
    assert_same(&plain, &special, &reported);
    assert_eq!(plain.len(), special.len());
    assert_eq!(plain, reported);
    // The transcript says what std does.
    let find = |what: &str| find(&plain, what);
    assert_eq!(find("to_string"), "to_string: (\"seventeen chars!!\", 17)");
    assert_eq!(
        find("with_capacity(100)"),
        "with_capacity(100): (\"abc\", 100)"
    );
    assert_eq!(find("resize to capacity"), "resize to capacity: 100");
    assert_eq!(
        find("vec![Tracked; 5] clones"),
        "vec![Tracked; 5] clones: 4"
    );
    assert_eq!(
        find("vec![Tracked; 5] drops"),
        "vec![Tracked; 5] drops: (0, 5)"
    );
    assert_eq!(find("vec![Tracked; 0]"), "vec![Tracked; 0]: (0, 0, 1)");
    assert_eq!(
        find("capacity overflow"),
        "capacity overflow: \"capacity overflow\""
    );
    assert!(find("assert!").contains("assertion failed: one == Box::new(2)"));
    assert_eq!(find("static mut length"), "static mut length: 48");
    // Lengths the tokens cannot show to be constants: std's code, as written.
    assert_eq!(
        find("outer extern static length"),
        "outer extern static length: (24, 24, 24)"
    );
    assert_eq!(
        find("macro-bound SCREAMING_CASE length"),
        "macro-bound SCREAMING_CASE length: (10, 10, 10)"
    );
    // Issue 29: a `cfg`'d-out element vanishes as with std; shadowed names are the user's.
    assert_eq!(
        find("cfg'd-out tuple element"),
        "cfg'd-out tuple element: ((1, 2), 0)"
    );
    assert_eq!(
        find("vec![1, cfg'd-out 2, 3]"),
        "vec![1, cfg'd-out 2, 3]: ([1, 3], 2, 0)"
    );
    // (The local `format!` shows its argument as written: `String :: from("shown")`.)
    assert!(find("shadowed Box and vec!")
        .starts_with("shadowed Box and vec!: (7, \"the module's own Box\", 3, [1, 2], \"String"));
    assert!(find("future sizes").starts_with("future sizes: ("));
    // The annotated copies were rewritten (the reported one counted its sites).
    assert!(
        specalloc::sites().len() >= 20,
        "{}",
        specalloc::sites().len()
    );
}

/// Peak resident memory of the process, in KiB.
fn max_rss_kib() -> i64 {
    // SAFETY: `getrusage` fills the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, &mut u), 0);
        u.ru_maxrss
    }
}

/// Issue 22: `vec![0u8; 256 MiB]` takes zeroed memory, whose fresh pages are never touched,
/// annotated as plain: the peak RSS grows by far less than the vector's size (std's own
/// `vec!` checked too).
#[test]
fn a_large_zeroed_vector_leaves_its_pages_untouched() {
    for (what, make) in [
        ("plain", plain::huge_zero as fn() -> Vec<u8>),
        ("special", special::huge_zero),
        ("reported", reported::huge_zero),
    ] {
        let before = max_rss_kib();
        let v = make();
        assert_eq!((v.len(), v[12345]), (256 << 20, 0));
        let grown = max_rss_kib() - before;
        drop(v);
        assert!(grown < 64 << 10, "{what}: peak RSS grew by {grown} KiB");
    }
}

#[test]
fn the_annotated_copies_use_the_routines_when_installed() {
    assert!(specalloc::spec::installed());
    drop(reported::run());
    let sites = specalloc::sites();
    let routed = sites
        .iter()
        .filter(|s| {
            matches!(
                s.route,
                specalloc::SiteRoute::Class(_) | specalloc::SiteRoute::Tiny
            )
        })
        .count();
    if specalloc::spec::SIZE_SPECIALIZED {
        assert!(routed >= 10, "{sites:#?}");
    } else {
        assert_eq!(routed, 0);
    }
    // Issue 22, item 7: the reach forms were rewritten and counted, with the sizes std
    // allocates.
    let sized = |what: &str, size: usize| {
        let site = sites
            .iter()
            .find(|s| s.what == what && s.size == size)
            .unwrap_or_else(|| panic!("no {what} site of {size} B in {sites:#?}"));
        assert!(site.hits >= 1);
        let routed = !matches!(site.route, specalloc::SiteRoute::Generic);
        assert_eq!(routed, specalloc::spec::SIZE_SPECIALIZED, "{site}");
    };
    sized("Box::default", 8); // Box::<SeesCounter>::default()
    sized("Box::default", 24); // Box::<[u16; 12]>::default(), Box::<String>::default()
    sized("Box::from", 12); // Box::<[u32]>::from([1, 2, 3])
    sized("Box::from", 4); // Box::<[u8; 4]>::from([9; 4])
    sized("Box::from", 9); // Box::<str>::from("boxed str")
                           // Nine `Box::<T>::default()` sites of sized `T: Default` (two zero-sized, one in a future,
                           // one in a recursion); the four of `str`, `[u8]`, `dyn Shape` and an unbounded `T` took
                           // std's function.
    let defaults = sites.iter().filter(|s| s.what == "Box::default").count();
    assert_eq!(defaults, 9, "{sites:#?}");
}
