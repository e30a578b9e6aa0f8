//! Collection churn with short strings: a `BTreeMap<u64, String>` and a
//! `HashMap<String, u64>` index under inserts, removals, in-place `String`
//! growth (realloc) and `BTreeMap::append`.

use std::collections::{BTreeMap, HashMap};

use super::{hash_str, mix, rng, word};

/// Operations per round.
const OPS: usize = 20_000;
/// Key space (the maps stay bounded).
const KEYS: u64 = 8192;

/// `scale` rounds of 20,000 random operations on a fresh pair of maps.
pub fn run(scale: u32) -> u64 {
    let mut h = 0;
    for round in 0..scale {
        let mut r = rng(0xb7ee_0000 + round as u64);
        let mut map: BTreeMap<u64, String> = BTreeMap::new();
        let mut index: HashMap<String, u64> = HashMap::new();
        let mut lists: Vec<Vec<String>> = Vec::new();
        let mut pending: BTreeMap<u64, String> = BTreeMap::new();
        for _ in 0..OPS {
            let k = r.next_u64() % KEYS;
            match r.next_u64() % 10 {
                0..=3 => {
                    let w = word(&mut r);
                    index.insert(w.clone(), k);
                    if let Some(old) = map.insert(k, w) {
                        index.remove(&old);
                    }
                }
                4 | 5 => {
                    if let Some(w) = map.remove(&k) {
                        index.remove(&w);
                    }
                }
                6 => {
                    // Grow a value in place: realloc of a short string.
                    let w = word(&mut r);
                    let s = map.entry(k).or_default();
                    s.push('-');
                    s.push_str(&w);
                    if s.len() > 64 {
                        s.truncate(8);
                        s.shrink_to_fit();
                    }
                }
                7 => {
                    // Batches appended to a pending map (append rebuilds
                    // the whole tree, so the big map takes them rarely).
                    let mut batch: BTreeMap<u64, String> = (0..16)
                        .map(|_| (r.next_u64() % KEYS, word(&mut r)))
                        .collect();
                    pending.append(&mut batch);
                    if pending.len() > 512 {
                        map.append(&mut pending);
                    }
                }
                _ => {
                    // A list grown by pushes, kept a while, then dropped.
                    let n = (r.next_u64() % 24) as usize;
                    lists.push((0..n).map(|_| word(&mut r)).collect());
                    if lists.len() > 64 {
                        let old = lists.swap_remove((r.next_u64() % 64) as usize);
                        h = mix(h, old.len() as u64);
                    }
                }
            }
        }
        map.append(&mut pending);
        for (k, v) in &map {
            h = mix(h, k ^ hash_str(v));
        }
        // The index's order is random (RandomState): a commutative sum.
        let ix = index
            .iter()
            .fold(0u64, |a, (w, k)| a.wrapping_add(hash_str(w) ^ k));
        h = mix(mix(h, ix), index.len() as u64);
    }
    h
}
