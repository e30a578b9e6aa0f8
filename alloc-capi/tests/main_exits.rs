//! A program whose `main` calls `pthread_exit` ends with its last thread: the background
//! trimmer (started with the second thread, by default or with an interval set) stops once no
//! thread with a heap is left, so it does not keep the process alive.

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn a_main_that_calls_pthread_exit_ends_with_its_last_thread() {
    let dir = common::scratch("main_exits");
    let Some(exe) = common::compile("cc", "main_exits.c", &dir, &[]) else {
        return;
    };
    for interval in [None, Some("100")] {
        let mut cmd = Command::new("timeout");
        cmd.arg("20").arg(&exe);
        if let Some(ms) = interval {
            cmd.env("SPECALLOC_BACKGROUND_PURGE_MS", ms);
        }
        let start = Instant::now();
        let o = common::preloaded(cmd);
        common::assert_ok(&format!("main_exits, interval {interval:?}"), &o);
        assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "done");
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the process outlived its threads by {:?}",
            start.elapsed()
        );
    }
}
