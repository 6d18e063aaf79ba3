//! etcd's answers decoded exactly as the client decodes them, from bytes
//! rather than a connection: what the fuzzer drives (`fuzz/`, target
//! `etcd_answers`), with the `testing` feature only.

use std::io::BufReader;

use super::{wire, Kv, Result, Watch, WatchBatch};

/// A `/v3/kv/range` answer as [`Client::get`](super::Client::get) and
/// [`Client::list`](super::Client::list) read it: the keys found and the
/// store's revision.
pub fn range(text: &[u8]) -> Result<(Vec<Kv>, i64)> {
    let v: wire::Range = serde_json::from_slice(text).map_err(|e| super::bad("range", e))?;
    Ok((
        v.kvs.into_iter().map(Kv::from).collect(),
        v.header.revision.0,
    ))
}

/// A `/v3/kv/txn` answer as [`Client::put_if`](super::Client::put_if)
/// reads it: whether the compare held, the store's revision, and (after a
/// failed compare) the key's revision the failure branch read.
pub fn txn(text: &[u8]) -> Result<(bool, i64, i64)> {
    let v: wire::Txn = serde_json::from_slice(text).map_err(|e| super::bad("txn", e))?;
    Ok((v.succeeded, v.header.revision.0, v.current_revision()))
}

/// Lease answers (`grant`'s id, `keepalive`'s TTL) as the client reads
/// them.
pub fn lease(text: &[u8]) -> (Result<i64>, Result<Option<i64>>) {
    let grant = serde_json::from_slice::<wire::Grant>(text)
        .map(|g| g.id.0)
        .map_err(|e| super::bad("grant", e));
    let keep = serde_json::from_slice::<wire::KeepAlive>(text)
        .map(|k| k.result.map(|r| r.ttl.0))
        .map_err(|e| super::bad("keepalive", e));
    (grant, keep)
}

/// Every batch a watch stream of these bytes yields, until it ends or
/// fails (the error last).
pub fn watch_stream(bytes: &[u8], start: i64) -> Vec<Result<WatchBatch>> {
    let mut w = Watch {
        lines: Box::new(BufReader::new(std::io::Cursor::new(bytes.to_vec()))),
        start,
    };
    let mut out = Vec::new();
    loop {
        match w.next_batch() {
            Ok(Some(b)) => out.push(Ok(b)),
            Ok(None) => return out,
            Err(e) => {
                out.push(Err(e));
                return out;
            }
        }
    }
}
