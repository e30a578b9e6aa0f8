//! The macros through the facade, with nothing but `specalloc` as a dependency: the re-exports
//! resolve, rewritten code gives the results the unannotated code gives, and (in CI's
//! `--features checked,no-size-specialized` run, or with `--features checked` alone) the
//! runtime's checked mode sees no wrong layout or double free from the specialised entry points.
//! The macros' own suite (expansion snapshots, trybuild, behaviour) is in `alloc-macros/tests`.

use specalloc::{alloc, specialize};

specalloc::install!(static GLOBAL);

const LEN: usize = 12;

trait Named: Send {
    fn name(&self) -> String;
}

struct Item(u32);

impl Named for Item {
    fn name(&self) -> String {
        format!("item{}", self.0)
    }
}

type Built = (Vec<Box<dyn Named>>, Vec<Vec<u64>>, Vec<String>, Vec<u8>);

#[specialize]
fn build(rounds: u32) -> Built {
    let mut named: Vec<Box<dyn Named>> = Vec::with_capacity(LEN);
    let mut vecs = Vec::with_capacity(4);
    let mut strings = Vec::with_capacity(LEN);
    for i in 0..rounds {
        named.push(Box::new(Item(i)));
        let mut v = vec![i as u64; LEN];
        v.extend([1, 2, 3]); // grows past the class capacity: realloc
        vecs.push(v);
        let mut s = "grown".to_string();
        s.push_str(&"x".repeat(i as usize));
        strings.push(s);
    }
    let mut zeros = vec![0u8; 40];
    zeros.truncate(10);
    zeros.shrink_to_fit(); // realloc down
    (named, vecs, strings, zeros)
}

#[test]
fn rewritten_code_matches_and_frees_cleanly() {
    for _ in 0..3 {
        let (named, vecs, strings, zeros) = build(50);
        assert_eq!(named[7].name(), "item7");
        assert_eq!(vecs[3].len(), LEN + 3);
        assert_eq!(vecs[3][..LEN], [3; LEN]);
        assert_eq!(strings[2], "grownxx");
        assert_eq!(zeros, [0; 10]);
        // Freed on another thread: the remote-free path.
        std::thread::spawn(move || drop((named, vecs, strings)))
            .join()
            .unwrap();
    }
}

#[test]
fn explicit_macro_through_the_facade() {
    let mut u = alloc!(uninit [u32; 6]);
    u.write([1; 6]);
    // SAFETY: written above.
    assert_eq!(unsafe { u.assume_init() }.iter().sum::<u32>(), 6);
    // SAFETY: all-zero is a valid `u128`.
    assert_eq!(unsafe { *alloc!(zeroed u128).assume_init() }, 0);
    let b: Box<dyn Named> = alloc!(box Item(4));
    assert_eq!(b.name(), "item4");
    assert_eq!(alloc!(vec [7u8; LEN]).len(), LEN);
}

/// Issue 22, item 7: `#[specialize(report)]` shows which sites are hot: `sites()` lists them by
/// hits, most first, equal hits in source order (file, line, column), and `site_report()`
/// prints that list with each site's share of the hits.
#[specialize(report)]
fn hot_and_cold(hot: u32, warm: u32) -> usize {
    let mut n = 0;
    for _ in 0..warm {
        let (b, s) = (Box::new(1u8), String::from("warm"));
        n += usize::from(*b) + s.len();
    }
    for _ in 0..hot {
        n += *Box::new(2usize);
    }
    n += Box::<[u8]>::from([1, 2, 3]).len() + Box::<[u8; 2]>::default().len();
    n
}

#[test]
fn the_report_lists_the_hottest_sites_first() {
    assert_eq!(hot_and_cold(9, 3), 3 * 5 + 9 * 2 + 3 + 2);
    let sites: Vec<_> = specalloc::sites()
        .into_iter()
        .filter(|s| s.file.ends_with("macros_facade.rs"))
        .collect();
    let order: Vec<_> = sites.iter().map(|s| (s.what, s.hits)).collect();
    assert_eq!(
        order,
        [
            ("Box::new", 9),
            ("Box::new", 3),
            ("String::from", 3),
            ("Box::from", 1),
            ("Box::default", 1)
        ]
    );
    // The two sites with 3 hits are on one line, and so are the two with 1: by column.
    assert_eq!(sites[1].line, sites[2].line);
    assert!(sites[1].column < sites[2].column);
    assert_eq!(sites[3].line, sites[4].line);
    assert!(sites[3].column < sites[4].column);
    let report = specalloc::site_report();
    let text = report.to_string();
    let mine: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("macros_facade.rs"))
        .collect();
    assert_eq!(mine.len(), 5, "{text}");
    assert!(mine[0].starts_with("  tests/macros_facade.rs:"), "{text}");
    assert!(mine[0].contains("Box::new of 8 B (align 8) -> "), "{text}");
    // The shares are of every counted site's hits in this binary: this test's alone here.
    assert_eq!(report.hits(), 17, "{text}");
    assert!(mine[0].ends_with(", 9 hits (52.9%)"), "{text}");
    assert!(mine[4].ends_with(", 1 hit (5.8%)"), "{text}");
    assert!(
        text.starts_with(&format!(
            "{} sites, {} hits, hottest first:\n",
            report.counted(),
            report.hits()
        )),
        "{text}"
    );
    let top = report.top(1).to_string();
    assert!(
        top.starts_with(&format!("the 1 hottest of {} sites", report.counted())),
        "{top}"
    );
    assert_eq!(top.lines().count(), 2, "{top}");
}
