//! A multi-threaded producer/consumer: `P` producer threads build boxed
//! messages (strings and vectors) and send them over a bounded `mpsc`
//! channel; the main thread consumes them, keeps a window of the last 64 and
//! frees the rest — every message is freed on another thread than the one
//! that allocated it.

use std::collections::VecDeque;
use std::sync::mpsc;

use super::{hash_str, mix, rng, word};

/// Messages per unit of scale, shared among the producers.
const MESSAGES: u64 = 8_000;

// The program, compiled twice: `plain` as written, `annotated` under `#[specialize]`
// (see `super::plain_and_annotated!`). The suite runs `plain`.
pub use plain::run;

plain_and_annotated! {
    /// One message.
    struct Msg {
        id: u64,
        name: String,
        payload: Vec<u32>,
        tags: Vec<String>,
    }

    impl Msg {
        fn checksum(&self) -> u64 {
            let p = self
                .payload
                .iter()
                .fold(0u64, |a, &x| a.wrapping_add(x as u64));
            let t = self.tags.iter().fold(0u64, |a, s| mix(a, hash_str(s)));
            mix(mix(mix(self.id, hash_str(&self.name)), p), t)
        }
    }

    /// `MESSAGES * scale` messages from `P` producers through one consumer.
    pub fn run<const P: usize>(scale: u32) -> u64 {
        let total = MESSAGES * scale as u64;
        let per = total / P as u64;
        let (tx, rx) = mpsc::sync_channel::<Box<Msg>>(1024);
        let producers: Vec<_> = (0..P as u64)
            .map(|p| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    let mut r = rng(0x919e_0000 + p);
                    for i in 0..per {
                        let n = (r.next_u64() % 48) as usize;
                        let msg = Box::new(Msg {
                            id: p << 32 | i,
                            name: format!("{}-{p}-{i}", word(&mut r)),
                            payload: (0..n as u32).map(|x| x ^ i as u32).collect(),
                            tags: (0..r.next_u64() % 4).map(|_| word(&mut r)).collect(),
                        });
                        if tx.send(msg).is_err() {
                            break;
                        }
                    }
                })
            })
            .collect();
        drop(tx);
        // Arrival order varies between runs: a commutative sum.
        let (mut sum, mut count) = (0u64, 0u64);
        let mut window: VecDeque<Box<Msg>> = VecDeque::with_capacity(64);
        for msg in rx {
            sum = sum.wrapping_add(msg.checksum());
            count += 1;
            if window.len() == 64 {
                window.pop_front();
            }
            window.push_back(msg);
        }
        for p in producers {
            p.join().expect("producer");
        }
        // The window's content depends on the arrival order: not in the checksum.
        drop(window);
        mix(sum, count)
    }
}
