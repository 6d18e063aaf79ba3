//! The JSON gateway's answers as typed values: every field read is
//! declared here, a missing one takes its documented default (etcd leaves
//! out zero values), and a malformed one is an error, never a silent 0
//! (0 means "absent" to [`Client::put_if`](super::Client::put_if)).

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde::{Deserialize, Deserializer};

use super::Kv;

/// A 64-bit integer as the gateway writes it: a decimal string (a JSON
/// number is accepted too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct I64(pub i64);

/// An unsigned one (member ids use all 64 bits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct U64(pub u64);

/// A number written as a decimal string or a JSON number.
fn gateway_number<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + std::str::FromStr,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw<T> {
        Text(String),
        Number(T),
    }
    match Raw::<T>::deserialize(d)? {
        Raw::Number(n) => Ok(n),
        Raw::Text(s) => s
            .parse()
            .map_err(|_| serde::de::Error::custom(format!("{s:?} is not a 64-bit integer"))),
    }
}

impl<'de> Deserialize<'de> for I64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        gateway_number(d).map(I64)
    }
}

impl<'de> Deserialize<'de> for U64 {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        gateway_number(d).map(U64)
    }
}

/// Bytes as the gateway writes them: base64.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bytes(pub Vec<u8>);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        B64.decode(s.as_bytes())
            .map(Bytes)
            .map_err(|e| serde::de::Error::custom(format!("not base64: {e}")))
    }
}

/// A response header.
#[derive(Debug, Default, Deserialize)]
pub struct Header {
    /// The store's revision.
    #[serde(default)]
    pub revision: I64,
}

/// A key-value pair.
#[derive(Debug, Deserialize)]
pub struct WireKv {
    #[serde(default)]
    key: Bytes,
    #[serde(default)]
    value: Bytes,
    /// Revision of the key's last change.
    #[serde(default)]
    pub mod_revision: I64,
    /// The lease it is attached to (0: none).
    #[serde(default)]
    lease: I64,
}

impl From<WireKv> for Kv {
    fn from(w: WireKv) -> Kv {
        Kv {
            key: String::from_utf8_lossy(&w.key.0).into_owned(),
            value: w.value.0,
            mod_revision: w.mod_revision.0,
            lease: w.lease.0,
        }
    }
}

/// `/v3/kv/range`.
#[derive(Debug, Deserialize)]
pub struct Range {
    /// Its header.
    #[serde(default)]
    pub header: Header,
    /// The keys found.
    #[serde(default)]
    pub kvs: Vec<WireKv>,
}

/// `/v3/kv/put`, `/v3/lease/revoke`: only the header matters.
#[derive(Debug, Deserialize)]
pub struct Written {
    /// Its header.
    #[serde(default)]
    pub header: Header,
}

/// `/v3/kv/txn`.
#[derive(Debug, Deserialize)]
pub struct Txn {
    /// Its header.
    #[serde(default)]
    pub header: Header,
    /// Whether the compare held.
    #[serde(default)]
    pub succeeded: bool,
    /// The branch's responses.
    #[serde(default)]
    pub responses: Vec<TxnResponse>,
}

impl Txn {
    /// After a failed compare: the revision the failure branch read for
    /// the key (0: absent).
    pub fn current_revision(&self) -> i64 {
        self.responses
            .first()
            .and_then(|r| r.response_range.as_ref())
            .and_then(|r| r.kvs.first())
            .map_or(0, |kv| kv.mod_revision.0)
    }
}

/// One response of a transaction's branch.
#[derive(Debug, Deserialize)]
pub struct TxnResponse {
    /// A range's answer, when the operation was a range.
    #[serde(default)]
    pub response_range: Option<Range>,
}

/// `/v3/lease/grant`.
#[derive(Debug, Deserialize)]
pub struct Grant {
    /// The lease id.
    #[serde(rename = "ID", default)]
    pub id: I64,
}

/// `/v3/lease/keepalive`.
#[derive(Debug, Deserialize)]
pub struct KeepAlive {
    /// The answer (absent when the lease is gone).
    #[serde(default)]
    pub result: Option<KeepAliveResult>,
}

/// What a keep-alive says of the lease.
#[derive(Debug, Deserialize)]
pub struct KeepAliveResult {
    /// Seconds left (0: gone).
    #[serde(rename = "TTL", default)]
    pub ttl: I64,
}

/// `/v3/lease/timetolive`.
#[derive(Debug, Deserialize)]
pub struct TimeToLive {
    /// Seconds left (-1: expired or never granted).
    #[serde(rename = "TTL", default)]
    pub ttl: I64,
    /// The TTL it was granted with.
    #[serde(rename = "grantedTTL", default)]
    pub granted: I64,
}

/// `/v3/auth/authenticate`.
#[derive(Debug, Deserialize)]
pub struct Auth {
    /// The token to send.
    pub token: String,
}

/// One line of a watch stream.
#[derive(Debug, Deserialize)]
pub struct WatchLine {
    /// An error instead of a result.
    #[serde(default)]
    pub error: Option<serde_json::Value>,
    /// The result.
    #[serde(default)]
    pub result: Option<WatchResult>,
}

/// A watch message.
#[derive(Debug, Deserialize)]
pub struct WatchResult {
    /// Its header.
    #[serde(default)]
    pub header: Header,
    /// Set when the start revision was compacted away.
    #[serde(default)]
    pub compact_revision: I64,
    /// Whether etcd cancelled the watch.
    #[serde(default)]
    pub canceled: bool,
    /// The changes.
    #[serde(default)]
    pub events: Vec<WireEvent>,
}

/// One change.
#[derive(Debug, Deserialize)]
pub struct WireEvent {
    /// `PUT` (left out, as a zero value) or `DELETE`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// The key and value.
    pub kv: WireKv,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_garbage() {
        let r: Range = serde_json::from_str(r#"{"header":{"revision":"42"}}"#).unwrap();
        assert_eq!((r.header.revision.0, r.kvs.len()), (42, 0));
        let r: Range = serde_json::from_str(
            r#"{"header":{"revision":7},"kvs":[{"key":"YQ==","mod_revision":"3"}]}"#,
        )
        .unwrap();
        let kv: Kv = r.kvs.into_iter().next().unwrap().into();
        assert_eq!(
            (kv.key.as_str(), kv.value.len(), kv.mod_revision),
            ("a", 0, 3)
        );
        // A malformed number is an error, never 0 (which means "absent").
        assert!(serde_json::from_str::<Range>(r#"{"header":{"revision":"4x"}}"#).is_err());
        assert!(serde_json::from_str::<Range>(r#"{"kvs":[{"key":"!!"}]}"#).is_err());
        assert!(serde_json::from_str::<Grant>(r#"{"ID":true}"#).is_err());
        let t: Txn = serde_json::from_str(r#"{"succeeded":false,"responses":[{"response_range":{"kvs":[{"mod_revision":"9"}]}}]}"#).unwrap();
        assert!(!t.succeeded);
        assert_eq!(
            t.responses[0].response_range.as_ref().unwrap().kvs[0]
                .mod_revision
                .0,
            9
        );
    }
}
