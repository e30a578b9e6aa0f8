//! What both differential binaries (`tests/differential.rs`, installed, and
//! `tests/differential_not_installed.rs`, under a counting wrapper) give the corpus and do with
//! its transcripts: `panic_text`, `BUF_LEN`, and the three-way comparison.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Read under `unsafe` as a length (issue 15, case 8): a `static mut` is no const.
pub static mut BUF_LEN: usize = 48;

/// Read through an `unsafe extern` block's `safe static` as a length: no const either.
#[no_mangle]
pub static SPECALLOC_CORPUS_LEN: usize = 24;

unsafe extern "C" {
    /// The same static through an `unsafe extern` block outside the annotated modules.
    #[link_name = "SPECALLOC_CORPUS_LEN"]
    pub safe static SPECALLOC_OUTER_LEN: usize;
}

thread_local! {
    static LAST_PANIC: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Runs `f`, returning its panic message (or "no panic").
pub fn panic_text<R>(f: impl FnOnce() -> R) -> String {
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(move |info| {
            let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                s.to_string()
            } else if let Some(s) = info.payload().downcast_ref::<String>() {
                s.clone()
            } else {
                "<non-string payload>".to_string()
            };
            LAST_PANIC.with(|l| *l.borrow_mut() = msg);
        }));
    });
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(_) => "no panic".to_string(),
        Err(_) => LAST_PANIC.with(|l| l.borrow().clone()),
    }
}

/// Asserts that the three transcripts are the same, line for line, saying where they differ.
pub fn assert_same(plain: &[String], special: &[String], reported: &[String]) {
    for ((p, s), r) in plain.iter().zip(special).zip(reported) {
        if p != s || p != r {
            // The corpus's panic hook keeps assertion texts to itself: say it here.
            eprintln!("plain:    {p}\nspecial:  {s}\nreported: {r}");
        }
    }
    assert_eq!(plain, special);
    assert_eq!(plain, reported);
}

/// The transcript's line that starts with `what` (printed, for the log).
pub fn find(transcript: &[String], what: &str) -> String {
    let l = transcript
        .iter()
        .find(|l| l.starts_with(what))
        .unwrap_or_else(|| panic!("no {what}"))
        .clone();
    eprintln!("{l}");
    l
}
