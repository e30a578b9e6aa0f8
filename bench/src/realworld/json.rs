//! A JSON document tree: build a `serde_json::Value` of records, print it,
//! parse it back, edit the parsed tree, summarise it and drop it.

use serde_json::{json, Map, Value};

use super::{hash_str, mix, rng, word};
use crate::harness::SplitMix64;

/// Records per document.
const RECORDS: usize = 300;

// The program, compiled twice: `plain` as written, `annotated` under `#[specialize]`
// (see `super::plain_and_annotated!`). The suite runs `plain`.
pub use plain::run;

plain_and_annotated! {
    /// One record: numbers, short strings, a nested object and arrays.
    fn record(r: &mut SplitMix64, id: usize) -> Value {
        let tags: Vec<Value> = (0..r.next_u64() % 6).map(|_| word(r).into()).collect();
        let history: Vec<Value> = (0..r.next_u64() % 5)
            .map(|i| json!({"ts": 1_700_000_000 + i * 60, "event": word(r), "ok": i % 2 == 0}))
            .collect();
        json!({
            "id": id,
            "name": format!("{} {}", word(r), word(r)),
            "score": (r.next_u64() % 10_000) as f64 / 100.0,
            "active": !r.next_u64().is_multiple_of(3),
            "tags": tags,
            "address": {"street": word(r), "city": word(r), "zip": format!("{:05}", r.next_u64() % 100_000)},
            "history": history,
        })
    }

    /// Edits a parsed document: renames a field, appends to arrays, drops some records.
    fn edit(doc: &mut Value) {
        let Some(records) = doc.get_mut("records").and_then(Value::as_array_mut) else {
            return;
        };
        records.retain(|rec| rec["id"].as_u64().is_some_and(|id| id % 7 != 3));
        for rec in records.iter_mut() {
            if let Some(obj) = rec.as_object_mut() {
                if let Some(name) = obj.remove("name") {
                    obj.insert("full_name".to_string(), name);
                }
                if let Some(Value::Array(tags)) = obj.get_mut("tags") {
                    tags.push(Value::String("edited".to_string()));
                }
            }
        }
    }

    /// A summary of a tree: node count, string bytes and integer sum, mixed.
    fn summarise(v: &Value) -> u64 {
        match v {
            Value::Null => 1,
            Value::Bool(b) => 2 + *b as u64,
            Value::Number(n) => n
                .as_u64()
                .unwrap_or_else(|| n.as_f64().unwrap_or(0.0) as u64),
            Value::String(s) => hash_str(s),
            Value::Array(a) => a.iter().fold(3, |h, x| mix(h, summarise(x))),
            Value::Object(o) => o
                .iter()
                .fold(5, |h, (k, x)| mix(mix(h, hash_str(k)), summarise(x))),
        }
    }

    /// `scale` documents, each built, printed, parsed back four times and edited.
    pub fn run(scale: u32) -> u64 {
        let mut h = 0;
        for round in 0..scale {
            let mut r = rng(0x15_0000 + round as u64);
            let mut doc = Map::new();
            doc.insert("version".to_string(), json!(round));
            let records: Vec<Value> = (0..RECORDS).map(|i| record(&mut r, i)).collect();
            doc.insert("records".to_string(), Value::Array(records));
            let doc = Value::Object(doc);
            let text = serde_json::to_string(&doc).expect("print");
            h = mix(h, text.len() as u64);
            drop(doc);
            for _ in 0..4 {
                let mut parsed: Value = serde_json::from_str(&text).expect("parse");
                edit(&mut parsed);
                h = mix(h, summarise(&parsed));
                let again = serde_json::to_string(&parsed).expect("print");
                h = mix(h, again.len() as u64);
            }
        }
        h
    }
}
