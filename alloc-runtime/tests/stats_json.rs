//! With the `serde` feature, a `stats()` snapshot round-trips through JSON unchanged, and the
//! JSON names every field (`classes` as an array of 68 entries).
#![cfg(feature = "serde")]

use specalloc_runtime::{stats, Stats};

#[global_allocator]
static GLOBAL: specalloc_runtime::SpecAlloc = specalloc_runtime::SpecAlloc;

#[test]
fn stats_round_trip_through_json() {
    let keep: Vec<Box<[u64; 4]>> = (0..1000).map(|i| Box::new([i; 4])).collect();
    let s = stats();
    assert!(s.classes[4].live_objects >= 1000);

    let json = serde_json::to_string(&s).unwrap();
    let back: Stats = serde_json::from_str(&json).unwrap();
    assert_eq!(back, s);

    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["bytes_in_use"].as_u64(), Some(s.bytes_in_use as u64));
    assert_eq!(v["returned_to_os"].as_u64(), Some(s.returned_to_os));
    let classes = v["classes"].as_array().unwrap();
    assert_eq!(classes.len(), 68);
    assert_eq!(classes[4]["size"].as_u64(), Some(32));
    assert_eq!(
        classes[4]["live_objects"].as_u64(),
        Some(s.classes[4].live_objects)
    );
    drop(keep);
}

#[test]
fn wrong_class_count_is_an_error() {
    let mut v: serde_json::Value = serde_json::to_value(stats()).unwrap();
    v["classes"].as_array_mut().unwrap().pop();
    let err = serde_json::from_value::<Stats>(v).unwrap_err();
    assert!(err.to_string().contains("invalid length 67"), "{err}");
}
