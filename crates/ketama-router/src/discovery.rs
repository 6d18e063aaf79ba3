//! Backends from DNS: each `[[discovery]]` source is resolved around its
//! records' TTL (within its bounds), and a real change is handed to the
//! routing state's owner ([`RoutingCell::replace`] with
//! [`Trigger::Discovered`]), off the request path. What the answers mean
//! as backends, what each hashes as, and the flap guard are in
//! [`ketama_config::discovery`].
//!
//! Faults never empty the fleet: a timeout, SERVFAIL, NXDOMAIN or empty
//! answer keeps the source's last good set (counted, logged, shown in
//! `/status` with the error and its time); a resolution that would remove
//! more than `max_remove_share` of a source's weight is held until seen
//! `confirm` times in a row. Answers larger than a UDP datagram are read in
//! full (EDNS0, then TCP when the answer is truncated).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::service::Background;
use crate::service::ShutdownWatch;
use async_trait::async_trait;
use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::name_server::TokioConnectionProvider;
use hickory_resolver::proto::xfer::Protocol;
use hickory_resolver::{ResolveError, Resolver};
use ketama_config::discovery::{backends_of, DiscoverySource, FlapGuard, Query, Record, Verdict};
use ketama_config::{Discovered, Validated};
use serde_json::{json, Value};

use crate::cell::{Records, RoutingCell, Trigger};
use crate::metrics::Metrics;

/// How a resolution ended, as counted in
/// `ketama_discovery_resolutions_total{source,result}`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Records came back.
    Ok,
    /// No answer in time.
    Timeout,
    /// The server failed (SERVFAIL).
    ServFail,
    /// The name does not exist (NXDOMAIN).
    NxDomain,
    /// The name exists but has no such records.
    Empty,
    /// Anything else (connection refused, malformed answer...).
    Error(String),
}

impl Outcome {
    /// The metric label.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Timeout => "timeout",
            Outcome::ServFail => "servfail",
            Outcome::NxDomain => "nxdomain",
            Outcome::Empty => "empty",
            Outcome::Error(_) => "error",
        }
    }

    fn of(e: &ResolveError) -> Outcome {
        use hickory_resolver::proto::op::ResponseCode;
        use hickory_resolver::proto::ProtoErrorKind;
        if let Some(p) = e.proto() {
            match p.kind() {
                ProtoErrorKind::NoRecordsFound { response_code, .. } => {
                    return match *response_code {
                        ResponseCode::NXDomain => Outcome::NxDomain,
                        ResponseCode::ServFail => Outcome::ServFail,
                        ResponseCode::NoError => Outcome::Empty,
                        other => Outcome::Error(format!("answered {other}")),
                    }
                }
                ProtoErrorKind::Timeout => return Outcome::Timeout,
                _ => {}
            }
        }
        let text = e.to_string();
        if text.contains("timed out") || text.contains("timeout") {
            Outcome::Timeout
        } else {
            Outcome::Error(text)
        }
    }

    fn describe(&self) -> String {
        match self {
            Outcome::Error(e) => e.clone(),
            other => other.label().to_string(),
        }
    }
}

/// What is known of one source, kept across reloads (by its query).
#[derive(Debug, Default)]
pub struct SourceState {
    /// The last good answer (`None`: never resolved).
    pub records: Option<Vec<Record>>,
    guard: FlapGuard,
    last_success: Option<SystemTime>,
    last_error: Option<(String, SystemTime)>,
    next: Option<Instant>,
    next_wall: Option<SystemTime>,
    held: Option<Verdict>,
    counts: HashMap<&'static str, u64>,
}

/// Every source's state, and the share of keys the last change moved.
#[derive(Debug, Default)]
pub struct DiscoveryState {
    sources: Mutex<HashMap<String, SourceState>>,
    moved_share: AtomicU64,
}

fn secs(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl DiscoveryState {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, SourceState>> {
        self.sources.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Every source's last good records, by source id: what the routing
    /// state is built from.
    pub fn records(&self) -> Records {
        self.lock()
            .iter()
            .filter_map(|(id, s)| Some((id.clone(), s.records.clone()?)))
            .collect()
    }

    /// The backends the sources of `v` last found (sources `v` no longer
    /// has are ignored; their answers are judged by `v`'s settings).
    pub fn discovered(&self, v: &Validated) -> Vec<Discovered> {
        crate::cell::discovered(&self.records(), v)
    }

    /// Records the share of the keyspace a change moved.
    pub fn set_moved_share(&self, moved: f64) {
        self.moved_share.store(moved.to_bits(), Relaxed);
    }

    /// The share of the keyspace the last change of the backend set moved.
    pub fn moved_share(&self) -> f64 {
        f64::from_bits(self.moved_share.load(Relaxed))
    }

    /// The `/status` document's `discovery` part.
    pub fn status(&self, v: &Validated) -> Value {
        let sources = self.lock();
        let nginx = v.nginx_identity();
        let list: Vec<Value> = v
            .discovery
            .iter()
            .map(|src| {
                let st = sources.get(&src.id());
                let backends = st
                    .and_then(|s| s.records.as_ref())
                    .map(|r| backends_of(src, r, nginx));
                json!({
                    "source": src.id(),
                    "index": src.index,
                    "resolved": backends.is_some(),
                    "answers": st.and_then(|s| s.records.as_ref()).map_or(0, |r| r.len()),
                    "backends": backends.as_ref().map_or(0, |b| b.len()),
                    "last_success": st.and_then(|s| s.last_success).map(secs),
                    "last_error": st.and_then(|s| s.last_error.as_ref()).map(|e| e.0.clone()),
                    "last_error_at": st.and_then(|s| s.last_error.as_ref()).map(|e| secs(e.1)),
                    "next_resolution": st.and_then(|s| s.next_wall).map(secs),
                    "held": st.and_then(|s| s.held.as_ref()).map(|h| match h {
                        Verdict::Hold { seen, confirm, removed_share } => json!({"seen": seen, "confirm": confirm, "removed_share": removed_share}),
                        Verdict::Apply => Value::Null,
                    }),
                    "resolutions": st.map(|s| json!(s.counts)).unwrap_or(json!({})),
                })
            })
            .collect();
        json!({"sources": list, "moved_share": self.moved_share()})
    }

    /// Backends per source of `v` (0 for one never resolved), for
    /// `/metrics`.
    pub fn backend_counts(&self, v: &Validated) -> Vec<(String, usize)> {
        let sources = self.lock();
        v.discovery
            .iter()
            .map(|src| {
                let n = sources
                    .get(&src.id())
                    .and_then(|s| s.records.as_ref())
                    .map_or(0, |r| backends_of(src, r, v.nginx_identity()).len());
                (src.id(), n)
            })
            .collect()
    }

    /// Resolutions so far by (source, result), for replaying into the
    /// metrics once they exist.
    pub fn resolution_counts(&self) -> Vec<(String, &'static str, u64)> {
        self.lock()
            .iter()
            .flat_map(|(id, s)| s.counts.iter().map(move |(k, n)| (id.clone(), *k, *n)))
            .collect()
    }

    /// Records one resolution of `src`; returns whether its backends
    /// changed (and were applied).
    fn record(
        &self,
        src: &DiscoverySource,
        nginx: bool,
        result: Result<(Vec<Record>, Duration), Outcome>,
    ) -> bool {
        let mut sources = self.lock();
        let st = sources.entry(src.id()).or_default();
        let now = SystemTime::now();
        let (outcome, wait) = match &result {
            Ok((_, ttl)) => (Outcome::Ok, src.interval(*ttl)),
            Err(o) => (o.clone(), src.min_interval),
        };
        *st.counts.entry(outcome.label()).or_default() += 1;
        st.next = Some(Instant::now() + wait);
        st.next_wall = Some(now + wait);
        let (records, _) = match result {
            Ok(r) if !r.0.iter().all(|x| x.addrs.is_empty()) => r,
            Ok(_) | Err(_) => {
                let why = match &outcome {
                    Outcome::Ok => "empty: no record has an address".to_string(),
                    o => o.describe(),
                };
                tracing::warn!(
                    source = src.id(),
                    error = why,
                    "discovery failed; keeping the last good backends"
                );
                st.last_error = Some((why, now));
                st.guard.reset();
                st.held = None;
                return false;
            }
        };
        st.last_success = Some(now);
        let new = backends_of(src, &records, nginx);
        let current = st.records.as_ref().map(|r| backends_of(src, r, nginx));
        if current.as_ref() == Some(&new) {
            st.guard.reset();
            st.held = None;
            st.records = Some(records); // same backends, fresher answer
            return false;
        }
        let verdict = match &current {
            None => Verdict::Apply,
            Some(cur) => st.guard.judge(src, cur, &new),
        };
        if let Verdict::Hold {
            seen,
            confirm,
            removed_share,
        } = verdict
        {
            tracing::warn!(
                source = src.id(),
                seen,
                confirm,
                removed_share,
                "discovery would remove much of the source's weight; holding until confirmed"
            );
            st.held = Some(verdict);
            // Look again soon, to confirm or not.
            st.next = Some(Instant::now() + src.min_interval);
            st.next_wall = Some(now + src.min_interval);
            return false;
        }
        st.held = None;
        tracing::info!(
            source = src.id(),
            backends = new.len(),
            before = current.as_ref().map_or(0, |c| c.len()),
            "discovered backends changed"
        );
        st.records = Some(records);
        true
    }

    fn due(&self, src: &DiscoverySource) -> Option<Instant> {
        self.lock().get(&src.id()).and_then(|s| s.next)
    }
}

/// A resolver for a source: its name servers (UDP, then TCP for truncated
/// answers) or the system's; no cache (every resolution asks), EDNS0 on.
fn resolver(src: &DiscoverySource) -> Result<Resolver<TokioConnectionProvider>, String> {
    let mut opts = ResolverOpts::default();
    opts.cache_size = 0;
    opts.edns0 = true;
    opts.timeout = src.timeout;
    opts.attempts = 1;
    opts.ndots = 0;
    let builder = if src.resolvers.is_empty() {
        Resolver::builder_tokio()
            .map_err(|e| format!("cannot read the system's resolver config: {e}"))?
    } else {
        let mut cfg = ResolverConfig::new();
        for &r in &src.resolvers {
            cfg.add_name_server(NameServerConfig::new(r, Protocol::Udp));
            cfg.add_name_server(NameServerConfig::new(r, Protocol::Tcp));
        }
        Resolver::builder_with_config(cfg, TokioConnectionProvider::default())
    };
    Ok(builder.with_options(opts).build())
}

/// A fully qualified form of a configured name (no search domains).
fn fqdn(name: &str) -> String {
    if name.ends_with('.') {
        name.to_string()
    } else {
        format!("{name}.")
    }
}

/// Asks DNS for a source's records; the addresses of SRV targets come
/// from lookups of the targets. Returns the records and the shortest TTL.
pub async fn resolve(src: &DiscoverySource) -> Result<(Vec<Record>, Duration), Outcome> {
    let r = resolver(src).map_err(Outcome::Error)?;
    let work = async {
        let now = Instant::now();
        let ttl_of = |until: Instant| until.saturating_duration_since(now);
        match &src.query {
            Query::Host { name, port } => {
                let ips = r.lookup_ip(fqdn(name)).await.map_err(|e| Outcome::of(&e))?;
                let ttl = ttl_of(ips.valid_until());
                let addrs: Vec<IpAddr> = ips.iter().collect();
                if addrs.is_empty() {
                    return Err(Outcome::Empty);
                }
                Ok((
                    vec![Record {
                        target: name.clone(),
                        port: *port,
                        priority: 0,
                        weight: 0,
                        addrs,
                    }],
                    ttl,
                ))
            }
            Query::Srv(name) => {
                let srv = r
                    .srv_lookup(fqdn(name))
                    .await
                    .map_err(|e| Outcome::of(&e))?;
                let mut ttl = ttl_of(srv.as_lookup().valid_until());
                let mut records = Vec::new();
                for rec in srv.iter() {
                    records.push(Record {
                        target: rec.target().to_ascii(),
                        port: rec.port(),
                        priority: rec.priority(),
                        weight: rec.weight(),
                        addrs: Vec::new(),
                    });
                }
                if records.is_empty() {
                    return Err(Outcome::Empty);
                }
                // Each distinct target's addresses, asked once.
                let mut targets: Vec<String> = records.iter().map(|r| r.target.clone()).collect();
                targets.sort();
                targets.dedup();
                // All at once, each within what the source's deadline leaves
                // after the SRV query (2 x timeout_ms): a target that does
                // not answer costs its own time, not every other target's.
                let budget = src.timeout * 2;
                let lookups = futures_util::future::join_all(targets.iter().map(|t| async {
                    match tokio::time::timeout(budget, r.lookup_ip(fqdn(t))).await {
                        Ok(l) => l.map_err(|e| e.to_string()),
                        Err(_) => Err(format!("no answer within {} ms", budget.as_millis())),
                    }
                }))
                .await;
                let mut addrs: HashMap<String, Vec<IpAddr>> = HashMap::new();
                for (t, l) in targets.iter().zip(lookups) {
                    match l {
                        Ok(ips) => {
                            ttl = ttl.min(ttl_of(ips.valid_until()));
                            addrs.insert(t.clone(), ips.iter().collect());
                        }
                        // A target that does not resolve serves nothing; the
                        // others still do.
                        Err(e) => {
                            tracing::warn!(target = t, error = e, "SRV target did not resolve")
                        }
                    }
                }
                for rec in &mut records {
                    rec.addrs = addrs.get(&rec.target).cloned().unwrap_or_default();
                }
                Ok((records, ttl))
            }
        }
    };
    match tokio::time::timeout(src.timeout * 3, work).await {
        Ok(r) => r,
        Err(_) => Err(Outcome::Timeout),
    }
}

/// Resolves every source of `v` once (at start), recording the results.
/// Sources that fail are logged; the router starts with the rest.
pub async fn resolve_all(state: &DiscoveryState, v: &Validated) {
    for src in &v.discovery {
        let result = resolve(src).await;
        if let Err(e) = &result {
            tracing::warn!(
                source = src.id(),
                error = e.describe(),
                "discovery source did not resolve at start; starting without it"
            );
        }
        state.record(src, v.nginx_identity(), result);
    }
}

/// Hands the sources' records to the routing state's owner; records the
/// share of keys that moved.
pub fn apply(cell: &RoutingCell, discovery: &DiscoveryState) {
    match cell.replace(Trigger::Discovered(discovery.records())) {
        Ok(change) => {
            let moved = change.moved_share.unwrap_or(0.0);
            discovery.set_moved_share(moved);
            tracing::info!(
                backends = cell.state().backends.len(),
                moved_share = moved,
                "routing state rebuilt from discovery"
            );
        }
        Err(e) => tracing::error!("discovered backends rejected, keeping the running state: {e:#}"),
    }
}

/// Re-resolves every source when it is due and applies changes.
pub struct Discovery {
    /// The routing state's owner: the sources come from its config, a
    /// change goes to it.
    pub cell: Arc<RoutingCell>,
    /// What the sources found.
    pub discovery: Arc<DiscoveryState>,
    /// The counters (resolutions).
    pub metrics: Arc<Metrics>,
}

#[async_trait]
impl Background for Discovery {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        loop {
            // Enabled before the sources are read, so a reload that adds
            // one while this pass resolves wakes the next wait.
            let stored = self.cell.stored();
            tokio::pin!(stored);
            stored.as_mut().enable();
            // Only the sources are kept across the awaits, not the state.
            let (sources, nginx) = {
                let state = self.cell.state();
                (
                    state.validated.discovery.clone(),
                    state.validated.nginx_identity(),
                )
            };
            let now = Instant::now();
            let mut changed = false;
            // With no source due sooner, wake only for a new state (a
            // reload may bring sources) or, at the latest, in a minute.
            let mut next = now + Duration::from_secs(60);
            for src in &sources {
                let due = self.discovery.due(src).unwrap_or(now);
                if due <= now {
                    let result = resolve(src).await;
                    let label = match &result {
                        Ok(_) => "ok",
                        Err(o) => o.label(),
                    };
                    self.metrics.discovery_resolved(&src.id(), label, 1);
                    changed |= self.discovery.record(src, nginx, result);
                }
                if let Some(d) = self.discovery.due(src) {
                    next = next.min(d);
                }
            }
            if changed {
                let (cell, discovery) = (self.cell.clone(), self.discovery.clone());
                // The ring build is CPU work: off the runtime's threads.
                let _ = tokio::task::spawn_blocking(move || apply(&cell, &discovery)).await;
            }
            tokio::select! {
                _ = tokio::time::sleep_until(tokio::time::Instant::from_std(next.max(Instant::now() + Duration::from_millis(10)))) => {}
                _ = stored => {}
                _ = shutdown.changed() => return,
            }
        }
    }
}
