//! A small etcd v3 client over etcd's JSON gateway (`POST /v3/kv/range`,
//! `/v3/kv/txn`, `/v3/watch`, `/v3/lease/...`), blocking, one HTTP/1.1
//! request per call.
//!
//! Why not gRPC: the Rust gRPC clients of etcd generate their code from
//! `.proto` files at build time and need `protoc`, a system tool a fresh
//! machine lacks; the gateway is part of every etcd since 3.3 (3.4 streams
//! watches over it, newline-delimited JSON), speaks the same API and needs
//! nothing but an HTTP client. Keys and values travel base64-encoded and
//! 64-bit integers as strings, as the gateway's JSON mapping has it.
//!
//! Endpoints are tried in order, starting from the last one that answered;
//! a connection error moves to the next. With a user, the client takes a
//! token from `/v3/auth/authenticate` and takes a new one when etcd says
//! it expired.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{json, Value};

mod cluster;
#[cfg(feature = "testing")]
pub mod decode;
mod send;
mod wire;

pub use cluster::MemberStatus;

/// What can go wrong talking to etcd.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// No endpoint answered.
    #[error(
        "cannot reach etcd: {reason} (is etcd running, and are the URLs and TLS files right?)"
    )]
    Unreachable {
        /// The endpoints tried.
        endpoints: String,
        /// The last endpoint's error, naming it.
        reason: String,
    },
    /// etcd answered with an HTTP error.
    #[error("etcd at {endpoint} answered {status} to {what}: {body}")]
    Status {
        /// The endpoint.
        endpoint: String,
        /// HTTP status.
        status: u16,
        /// The call.
        what: &'static str,
        /// etcd's message.
        body: String,
    },
    /// The answer is not what the gateway sends.
    #[error("etcd's answer to {what} is not what its v3 JSON gateway sends ({reason}); is this etcd 3.4 or later?")]
    BadAnswer {
        /// The call.
        what: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// A compare-and-swap found another revision.
    #[error("{key} changed meanwhile: its mod revision is {current}, not {expected}; read it again (ketama fleet status) and retry with --expect-revision {current}")]
    Conflict {
        /// The key.
        key: String,
        /// The revision the writer expected (0: absent).
        expected: i64,
        /// The key's revision now (0: absent).
        current: i64,
    },
    /// A watch started at a compacted revision.
    #[error("revision {wanted} was compacted (etcd keeps from {compacted}); read the keys again")]
    Compacted {
        /// The revision asked for.
        wanted: i64,
        /// The oldest revision etcd keeps.
        compacted: i64,
    },
    /// A TLS file could not be used.
    #[error("TLS file {path}: {reason}")]
    Tls {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        reason: String,
    },
}

/// Result with [`EtcdError`].
pub type Result<T, E = EtcdError> = std::result::Result<T, E>;

/// How to reach etcd.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Endpoint URLs (`http://127.0.0.1:2379`, `https://...`).
    pub endpoints: Vec<String>,
    /// User and password, for etcd with auth enabled.
    pub credentials: Option<(String, String)>,
    /// PEM file of the CA that signed etcd's certificate (https).
    pub ca_file: Option<PathBuf>,
    /// PEM files of a client certificate and its key (etcd's
    /// `--client-cert-auth`).
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Connect and per-request timeout.
    pub timeout: Duration,
    /// How long a watch may stay silent before it is opened again (etcd
    /// says nothing while nothing changes; re-opening from the last
    /// revision loses nothing, and it is how a half-open connection is
    /// noticed).
    pub watch_idle: Duration,
}

/// A key's value and revisions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Kv {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Vec<u8>,
    /// Revision of the key's last change.
    pub mod_revision: i64,
    /// The lease the key is attached to (0: none).
    pub lease: i64,
}

/// One change seen by a watch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The key and its new value (empty when deleted).
    pub kv: Kv,
    /// Whether the key was deleted.
    pub deleted: bool,
}

/// A watch's stream of changes. Each [`next_batch`](Watch::next_batch) blocks until
/// etcd sends a batch, the stream ends (`Ok(None)`: etcd went away or the
/// watch sat idle for [`Options::watch_idle`]) or fails.
pub struct Watch {
    lines: Box<dyn BufRead + Send>,
    start: i64,
}

/// A batch of changes at one revision.
#[derive(Clone, Debug, Default)]
pub struct WatchBatch {
    /// etcd's revision when it sent the batch.
    pub revision: i64,
    /// The changes (none for the creation notice).
    pub events: Vec<Event>,
}

impl Watch {
    /// The next batch; `Ok(None)` when the stream ended.
    pub fn next_batch(&mut self) -> Result<Option<WatchBatch>> {
        loop {
            let mut line = String::new();
            match self.lines.read_line(&mut line) {
                Ok(0) => return Ok(None),
                Ok(_) => {}
                // A read timeout or a reset: the stream is over.
                Err(_) => return Ok(None),
            }
            if line.trim().is_empty() {
                continue;
            }
            let msg: wire::WatchLine = serde_json::from_str(&line).map_err(|e| bad("watch", e))?;
            if let Some(err) = msg.error {
                return Err(EtcdError::BadAnswer {
                    what: "watch",
                    reason: err.to_string(),
                });
            }
            let r = msg.result.ok_or_else(|| bad("watch", "no result"))?;
            let compacted = r.compact_revision.0;
            if compacted > 0 {
                return Err(EtcdError::Compacted {
                    wanted: self.start,
                    compacted,
                });
            }
            if r.canceled {
                return Ok(None);
            }
            let revision = r.header.revision.0;
            let events = r
                .events
                .into_iter()
                .map(|e| Event {
                    deleted: e.kind == "DELETE",
                    kv: e.kv.into(),
                })
                .collect();
            return Ok(Some(WatchBatch { revision, events }));
        }
    }
}

/// An etcd client; cheap to share (`Arc`), thread-safe.
pub struct Client {
    endpoints: Vec<String>,
    current: AtomicUsize,
    agent: ureq::Agent,
    watch_agent: ureq::Agent,
    credentials: Option<(String, String)>,
    token: Mutex<Option<String>>,
    /// How long a request may keep trying while the cluster elects a
    /// leader (the request timeout).
    patience: Duration,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoints", &self.endpoints)
            .finish_non_exhaustive()
    }
}

fn bad(what: &'static str, reason: impl std::fmt::Display) -> EtcdError {
    EtcdError::BadAnswer {
        what,
        reason: reason.to_string(),
    }
}

fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

/// One condition of a [`Client::txn`].
#[derive(Clone, Copy, Debug)]
pub enum Compare<'a> {
    /// The key's mod revision is this (0: the key is absent).
    ModRevision(&'a str, i64),
    /// The key's value is this.
    Value(&'a str, &'a [u8]),
}

/// The end of the range of every key starting with `prefix`.
pub fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

fn read_pem(path: &Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| EtcdError::Tls {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

fn tls_config(opts: &Options) -> Result<Option<Arc<rustls::ClientConfig>>> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let Some(ca) = &opts.ca_file else {
        return Ok(None);
    };
    let tls = |path: &Path, reason: String| EtcdError::Tls {
        path: path.to_path_buf(),
        reason,
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&read_pem(ca)?) {
        let cert = cert.map_err(|e| tls(ca, e.to_string()))?;
        roots.add(cert).map_err(|e| tls(ca, e.to_string()))?;
    }
    if roots.is_empty() {
        return Err(tls(ca, "no certificate in it".into()));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls(ca, e.to_string()))?
        .with_root_certificates(roots);
    let config = match &opts.client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(&read_pem(cert)?)
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| tls(cert, e.to_string()))?;
            let key_der = PrivateKeyDer::from_pem_slice(&read_pem(key)?)
                .map_err(|e| tls(key, e.to_string()))?;
            builder
                .with_client_auth_cert(chain, key_der)
                .map_err(|e| tls(cert, e.to_string()))?
        }
    };
    Ok(Some(Arc::new(config)))
}

impl Client {
    /// A client for `opts`; connects on the first call.
    pub fn new(opts: &Options) -> Result<Self> {
        let tls = tls_config(opts)?;
        let build = |read: Duration| {
            let mut b = ureq::AgentBuilder::new()
                .timeout_connect(opts.timeout)
                .timeout_read(read)
                .timeout_write(opts.timeout);
            if let Some(t) = &tls {
                b = b.tls_config(t.clone());
            }
            b.build()
        };
        Ok(Client {
            endpoints: opts
                .endpoints
                .iter()
                .map(|e| e.trim_end_matches('/').to_string())
                .collect(),
            current: AtomicUsize::new(0),
            agent: build(opts.timeout),
            watch_agent: build(opts.watch_idle),
            credentials: opts.credentials.clone(),
            token: Mutex::new(None),
            patience: opts.timeout,
        })
    }

    /// The endpoints, comma-separated (for messages).
    pub fn endpoints(&self) -> String {
        self.endpoints.join(",")
    }

    fn authenticate(&self, base: &str) -> Result<Option<String>> {
        let Some((user, password)) = &self.credentials else {
            return Ok(None);
        };
        let mut token = self.token.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(t) = &*token {
            return Ok(Some(t.clone()));
        }
        let body = json!({"name": user, "password": password}).to_string();
        let resp = self
            .agent
            .post(&format!("{base}/v3/auth/authenticate"))
            .send_string(&body);
        let t = self.answer::<wire::Auth>(resp, base, "authenticate")?.token;
        *token = Some(t.clone());
        Ok(Some(t))
    }

    fn answer<T: serde::de::DeserializeOwned>(
        &self,
        resp: std::result::Result<ureq::Response, ureq::Error>,
        base: &str,
        what: &'static str,
    ) -> Result<T> {
        match resp {
            Ok(r) => {
                let text = r.into_string().map_err(|e| bad(what, e))?;
                serde_json::from_str(&text).map_err(|e| bad(what, e))
            }
            Err(ureq::Error::Status(status, r)) => Err(EtcdError::Status {
                endpoint: base.to_string(),
                status,
                what,
                body: r.into_string().unwrap_or_default().trim().to_string(),
            }),
            Err(e) => Err(EtcdError::Unreachable {
                endpoints: base.to_string(),
                reason: send::transport(base, &e),
            }),
        }
    }

    fn post<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &Value,
        what: &'static str,
    ) -> Result<T> {
        let body = body.to_string();
        self.send(what, |base, token| {
            let mut req = self.agent.post(&format!("{base}{path}"));
            if let Some(t) = token {
                req = req.set("Authorization", t);
            }
            self.answer(req.send_string(&body), base, what)
        })
    }

    /// A key's value and mod revision (`None`: absent), and the store's
    /// revision at the read.
    pub fn get(&self, key: &str) -> Result<(Option<Kv>, i64)> {
        let v: wire::Range = self.post(
            "/v3/kv/range",
            &json!({"key": b64(key.as_bytes())}),
            "range",
        )?;
        let revision = v.header.revision.0;
        Ok((v.kvs.into_iter().next().map(Kv::from), revision))
    }

    /// Every key starting with `prefix`, in key order, and the store's
    /// revision at the read.
    pub fn list(&self, prefix: &str) -> Result<(Vec<Kv>, i64)> {
        let v: wire::Range = self.post(
            "/v3/kv/range",
            &json!({"key": b64(prefix.as_bytes()), "range_end": b64(&prefix_end(prefix))}),
            "range",
        )?;
        let revision = v.header.revision.0;
        Ok((v.kvs.into_iter().map(Kv::from).collect(), revision))
    }

    /// Writes a key (attached to `lease` when given); returns the new
    /// revision.
    pub fn put(&self, key: &str, value: &[u8], lease: Option<i64>) -> Result<i64> {
        let mut body = json!({"key": b64(key.as_bytes()), "value": b64(value)});
        if let Some(l) = lease {
            body["lease"] = json!(l.to_string());
        }
        let v: wire::Written = self.post("/v3/kv/put", &body, "put")?;
        Ok(v.header.revision.0)
    }

    /// Writes a key only if its mod revision is still `expected` (0: the
    /// key must be absent): a compare-and-swap in one transaction. Returns
    /// the new revision, or [`EtcdError::Conflict`] with the current one.
    pub fn put_if(&self, key: &str, value: &[u8], expected: i64) -> Result<i64> {
        let k = b64(key.as_bytes());
        let body = json!({
            "compare": [{"key": k, "target": "MOD", "result": "EQUAL", "mod_revision": expected.to_string()}],
            "success": [{"request_put": {"key": k, "value": b64(value)}}],
            "failure": [{"request_range": {"key": k}}],
        });
        let v: wire::Txn = self.post("/v3/kv/txn", &body, "txn")?;
        if v.succeeded {
            return Ok(v.header.revision.0);
        }
        Err(EtcdError::Conflict {
            key: key.to_string(),
            expected,
            current: v.current_revision(),
        })
    }

    /// One transaction: when every compare holds (`Compare::ModRevision`:
    /// the key's mod revision, 0 for absent; `Compare::Value`: its value),
    /// writes every put (`(key, value, lease)`) and deletes every key in
    /// `deletes`, atomically. `Ok(Some(revision))` when it was applied,
    /// `Ok(None)` when a compare failed (nothing was written).
    pub fn txn(
        &self,
        compares: &[Compare<'_>],
        puts: &[(&str, &[u8], Option<i64>)],
        deletes: &[&str],
    ) -> Result<Option<i64>> {
        let compare: Vec<Value> = compares
            .iter()
            .map(|c| match c {
                Compare::ModRevision(key, rev) => json!({
                    "key": b64(key.as_bytes()), "target": "MOD", "result": "EQUAL",
                    "mod_revision": rev.to_string(),
                }),
                Compare::Value(key, value) => json!({
                    "key": b64(key.as_bytes()), "target": "VALUE", "result": "EQUAL",
                    "value": b64(value),
                }),
            })
            .collect();
        let mut success: Vec<Value> = puts
            .iter()
            .map(|(k, v, lease)| {
                let mut put = json!({"key": b64(k.as_bytes()), "value": b64(v)});
                if let Some(l) = lease {
                    put["lease"] = json!(l.to_string());
                }
                json!({"request_put": put})
            })
            .collect();
        success.extend(
            deletes
                .iter()
                .map(|k| json!({"request_delete_range": {"key": b64(k.as_bytes())}})),
        );
        let body = json!({"compare": compare, "success": success});
        let v: wire::Txn = self.post("/v3/kv/txn", &body, "txn")?;
        Ok(v.succeeded.then_some(v.header.revision.0))
    }

    /// Deletes a key; returns the new revision.
    pub fn delete(&self, key: &str) -> Result<i64> {
        let body = json!({"key": b64(key.as_bytes())});
        let v: wire::Written = self.post("/v3/kv/deleterange", &body, "delete")?;
        Ok(v.header.revision.0)
    }

    /// Grants a lease of `ttl` seconds; returns its id.
    pub fn grant(&self, ttl: i64) -> Result<i64> {
        let v: wire::Grant = self.post(
            "/v3/lease/grant",
            &json!({"TTL": ttl.to_string()}),
            "lease grant",
        )?;
        let id = v.id.0;
        if id == 0 {
            return Err(bad("lease grant", "no lease id"));
        }
        Ok(id)
    }

    /// Renews a lease; returns its TTL in seconds (0: the lease is gone,
    /// grant a new one).
    pub fn keep_alive(&self, id: i64) -> Result<i64> {
        let v: wire::KeepAlive = self.post(
            "/v3/lease/keepalive",
            &json!({"ID": id.to_string()}),
            "lease keepalive",
        )?;
        Ok(v.result.map_or(0, |r| r.ttl.0))
    }

    /// A lease's seconds left and the TTL it was granted with; `None`
    /// when it expired (its keys are gone).
    pub fn lease_ttl(&self, id: i64) -> Result<Option<(i64, i64)>> {
        let v: wire::TimeToLive = self.post(
            "/v3/lease/timetolive",
            &json!({"ID": id.to_string()}),
            "lease timetolive",
        )?;
        Ok((v.ttl.0 >= 0).then_some((v.ttl.0, v.granted.0)))
    }

    /// Revokes a lease and the keys attached to it.
    pub fn revoke(&self, id: i64) -> Result<()> {
        self.post::<wire::Written>(
            "/v3/lease/revoke",
            &json!({"ID": id.to_string()}),
            "lease revoke",
        )
        .map(drop)
    }

    /// Watches the keys in `[key, range_end)` (`range_end` empty: `key`
    /// alone) from revision `start`.
    pub fn watch(&self, key: &str, range_end: &[u8], start: i64) -> Result<Watch> {
        let mut create = json!({"key": b64(key.as_bytes()), "start_revision": start.to_string()});
        if !range_end.is_empty() {
            create["range_end"] = json!(b64(range_end));
        }
        let body = json!({"create_request": create}).to_string();
        let reader = self.send("watch", |base, token| {
            let mut req = self.watch_agent.post(&format!("{base}/v3/watch"));
            if let Some(t) = token {
                req = req.set("Authorization", t);
            }
            match req.send_string(&body) {
                Ok(r) => Ok(r.into_reader()),
                Err(ureq::Error::Status(status, r)) => Err(EtcdError::Status {
                    endpoint: base.to_string(),
                    status,
                    what: "watch",
                    body: r.into_string().unwrap_or_default(),
                }),
                Err(e) => Err(EtcdError::Unreachable {
                    endpoints: base.to_string(),
                    reason: send::transport(base, &e),
                }),
            }
        })?;
        let mut w = Watch {
            lines: Box::new(BufReader::new(reader)),
            start,
        };
        // The first message confirms the watch (or reports compaction).
        match w.next_batch()? {
            Some(_) => Ok(w),
            None => Err(EtcdError::Unreachable {
                endpoints: self.endpoints(),
                reason: format!("{}: the watch stream ended at once", self.endpoints()),
            }),
        }
    }
}
