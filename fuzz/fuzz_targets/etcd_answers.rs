//! Any bytes as an answer from etcd's JSON gateway, decoded exactly as
//! the fleet client decodes them (`ketama_fleet::etcd::decode`): a range,
//! a transaction, a lease answer, a watch stream. Nothing panics, every
//! failure is an error; and an answer built here from the fuzzer's keys,
//! values and revisions the way etcd writes them (base64 bytes, numbers
//! as strings) decodes back to exactly those.
#![no_main]

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use ketama_fleet::etcd::decode;
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let _ = decode::range(data);
    let _ = decode::txn(data);
    let _ = decode::lease(data);
    // A stream stops at its first error.
    let batches = decode::watch_stream(data, 1);
    if let Some((_, before)) = batches.split_last() {
        assert!(before.iter().all(|b| b.is_ok()));
    }

    // Round trip: split the input into (key, value) pairs.
    let mut kvs = Vec::new();
    for (i, chunk) in data.chunks(7).enumerate() {
        let (k, v) = chunk.split_at(chunk.len().min(3));
        let key = String::from_utf8_lossy(k).into_owned();
        kvs.push((key, v.to_vec(), i as i64 * 7 + 1));
    }
    let revision = data.len() as i64 * 13;
    let wire: Vec<_> = kvs
        .iter()
        .map(|(k, v, r)| json!({"key": B64.encode(k), "value": B64.encode(v), "mod_revision": r.to_string()}))
        .collect();
    let text = json!({"header": {"revision": revision.to_string()}, "kvs": wire}).to_string();
    let (got, rev) = decode::range(text.as_bytes()).expect("an answer as etcd writes it");
    assert_eq!(rev, revision);
    assert_eq!(got.len(), kvs.len());
    for (g, (k, v, r)) in got.iter().zip(&kvs) {
        assert_eq!((&g.key, &g.value, g.mod_revision), (k, v, *r));
    }
    let line = json!({"result": {"header": {"revision": revision.to_string()}, "events": kvs.iter().map(|(k, v, r)| json!({"kv": {"key": B64.encode(k), "value": B64.encode(v), "mod_revision": r.to_string()}})).collect::<Vec<_>>()}}).to_string();
    let batches = decode::watch_stream(format!("{line}\n").as_bytes(), 1);
    let b = batches[0].as_ref().expect("a watch line as etcd writes it");
    assert_eq!(b.revision, revision);
    assert_eq!(b.events.len(), kvs.len());
});
