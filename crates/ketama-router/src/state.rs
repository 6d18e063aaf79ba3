//! The routing state: everything a request needs, built from a validated
//! config and swapped whole on every change by its one owner
//! ([`crate::cell::RoutingCell`]), so a request keeps the state it started
//! with and no request sees half a change. Services that only read it hold
//! a [`StateReader`].

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use ketama::load::{BalanceFactor, LoadTracker};
use ketama::{Need, Version};

use arc_swap::ArcSwap;
use http::HeaderName;
use ketama_config::{ConfigError, Discovered, Matcher, Plan, Validated};

use crate::health::{Health, HealthRegistry};
use crate::metrics::{BackendMetrics, Metrics};
use crate::tls::{ServerTls, UpstreamTls};

/// A read-only handle on the current routing state: what the proxy, the
/// connection guard and the health checker hold. Only the
/// [`RoutingCell`](crate::cell::RoutingCell) stores a new state.
#[derive(Clone, Debug)]
pub struct StateReader(Arc<ArcSwap<RoutingState>>);

impl StateReader {
    /// A reader of `cell` (the cell keeps the only writer).
    pub(crate) fn new(cell: Arc<ArcSwap<RoutingState>>) -> Self {
        StateReader(cell)
    }

    /// The current routing state: a reference count, no lock.
    #[inline]
    pub fn state(&self) -> Arc<RoutingState> {
        self.0.load_full()
    }
}

/// One backend, by its node index in the ring(s).
#[derive(Debug)]
pub struct Backend {
    /// The address as configured.
    pub server: String,
    /// Parsed.
    pub addr: SocketAddr,
    /// Shared health (kept across reloads).
    pub health: Arc<Health>,
    /// Shared counters (kept across reloads).
    pub metrics: Arc<BackendMetrics>,
    /// `server` as a ready header value (cloning it is a reference count).
    pub header: http::HeaderValue,
    /// Its timeouts and passive-health settings.
    pub limits: BackendLimits,
    /// Reached over TLS with this SNI (empty: none, unverified); `None`:
    /// plain. Shared: the engine's pool keys hold it by reference count.
    pub tls: Option<Arc<str>>,
    /// Spoken to in HTTP/2 with prior knowledge (`h2c`).
    pub h2c: bool,
}

/// A backend's timeouts and passive-health settings: its own where it
/// sets them, else `[server]`'s.
#[derive(Clone, Copy, Debug)]
pub struct BackendLimits {
    /// TCP connect.
    pub connect_timeout: Duration,
    /// Waiting for response bytes.
    pub read_timeout: Duration,
    /// Writing the request.
    pub write_timeout: Duration,
    /// Failures within `fail_timeout` that take it out of rotation.
    pub max_fails: u32,
    /// The failure window and the time out of rotation.
    pub fail_timeout: Duration,
}

/// How a label rule matches, with header names parsed once.
#[derive(Debug)]
pub enum RuleMatch {
    /// The Host header (port stripped) equals this, ignoring ASCII case.
    Host(String),
    /// The header has exactly this value.
    Header(HeaderName, String),
}

/// Everything a request needs.
#[derive(Debug)]
pub struct RoutingState {
    /// The route table, backends and rules.
    pub plan: Plan,
    /// Node index -> backend.
    pub backends: Vec<Backend>,
    /// The rules' matchers, in `plan.rules` order.
    pub rules: Vec<RuleMatch>,
    /// Bounded loads, when `[balance]` is on: the factor, the in-flight
    /// counts, and the serving weight per (rule, version), cached.
    pub balance: Option<Balance>,
    /// The config this was built from.
    pub validated: Validated,
    /// The TLS listeners' certificates and settings (`None` without
    /// `[tls]`).
    pub tls: Option<Arc<ServerTls>>,
    /// How backends with `tls = true` are reached.
    pub upstream_tls: Arc<UpstreamTls>,
    /// How a response's cache result is read (`[cache_status]`).
    pub cache: ketama_config::cache_status::CacheRules,
    /// `[migration] previous_owner_header`, lower case.
    pub previous_owner_header: Option<http::HeaderName>,
    /// Each ring's keys per backend, computed on first use (the admin
    /// page); a state's rings never change.
    shares: std::sync::OnceLock<Vec<Vec<u64>>>,
}

impl RoutingState {
    /// Whether [`RoutingState::keyspace_shares`] is computed already.
    pub fn keyspace_shares_ready(&self) -> bool {
        self.shares.get().is_some()
    }

    /// Keys of the 2^32 keyspace each backend serves on each ring, in
    /// [`RouteTable::versions`](ketama::RouteTable::versions) order
    /// (`ketama::analysis::keyspace`: `O(points)` once per state, then a
    /// reference).
    pub fn keyspace_shares(&self) -> &[Vec<u64>] {
        self.shares.get_or_init(|| {
            let table = &self.plan.table;
            table
                .versions()
                .iter()
                .map(|&v| ketama::analysis::keyspace(table.ring(v)))
                .collect()
        })
    }
}

/// Which TLS files a build reads again (the rest it takes from the
/// previous state, when their config sections are unchanged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Files {
    /// Every file: start and reloads (certificate rotation).
    All,
    /// `[upstream_tls]`'s: a new shared config from etcd.
    Upstream,
    /// None: discovery and rollout changes.
    Keep,
}

/// Bounded loads of one routing state.
#[derive(Debug)]
pub struct Balance {
    /// `c`, in percent.
    pub factor: BalanceFactor,
    /// Requests in flight per backend.
    pub loads: Arc<LoadTracker>,
    /// Per (rule + 1, version): the healthy eligible weight and when it was
    /// computed (ms, `health::now_ms`); recomputed at most every 100 ms, as
    /// health changes.
    weights: Vec<[(AtomicU64, AtomicU64); 3]>,
}

/// How long a computed serving weight is used.
const WEIGHT_FRESH_MS: u64 = 100;

impl RoutingState {
    /// The total weight of the healthy backends eligible for `need` on a
    /// version's ring: the `W` of the load bound. `O(1)` but every 100 ms,
    /// when it is `O(backends)`.
    pub fn serving_weight(&self, need: Option<Need>, v: Version) -> u64 {
        let Some(b) = &self.balance else { return 0 };
        let slot = &b.weights[need
            .map_or(0, |n| n.index() as usize + 1)
            .min(b.weights.len() - 1)][v as usize];
        let now = crate::health::now_ms();
        let at = slot.1.load(Relaxed);
        if at != 0 && now.saturating_sub(at) < WEIGHT_FRESH_MS {
            return slot.0.load(Relaxed);
        }
        let w = self
            .plan
            .table
            .serving_weight(need, v, |n| self.backends[n].health.is_healthy());
        slot.0.store(w, Relaxed);
        slot.1.store(now, Relaxed);
        w
    }
}

impl RoutingState {
    /// Builds the plan (rings, requirements) of a validated config and the
    /// backends its discovery sources found, attaches each backend's
    /// health and counters, and reads the TLS files `files` says (every
    /// file without a previous state).
    pub fn build_with(
        v: Validated,
        health: &HealthRegistry,
        metrics: &Metrics,
        discovered: &[Discovered],
        previous: Option<&RoutingState>,
        files: Files,
    ) -> Result<Self, ConfigError> {
        let keep = |same: bool, wanted: bool| match previous {
            Some(p) if same && !wanted => Some(p),
            _ => None,
        };
        let tls = match keep(
            previous.is_some_and(|p| p.validated.config.tls == v.config.tls),
            files == Files::All,
        ) {
            Some(p) => p.tls.clone(),
            None => ServerTls::load(&v)?.map(Arc::new),
        };
        let upstream_tls = match keep(
            previous.is_some_and(|p| p.validated.config.upstream_tls == v.config.upstream_tls),
            files != Files::Keep,
        ) {
            Some(p) => p.upstream_tls.clone(),
            None => Arc::new(UpstreamTls::load(&v)?),
        };
        let plan = match previous {
            Some(p) => Plan::rebuild(&v, discovered, &p.plan)?,
            None => Plan::build(&v, discovered)?,
        };
        let server = &v.config.server;
        let ms = Duration::from_millis;
        let backends = plan
            .backends
            .iter()
            .map(|b| {
                let own = b.overrides.as_ref();
                Backend {
                    server: b.server.clone(),
                    addr: b.addr,
                    health: health.get(&b.server),
                    metrics: metrics.backend(&b.server),
                    // Server strings are addresses or DNS names: valid
                    // header values; anything else gets none.
                    header: http::HeaderValue::from_str(&b.server)
                        .unwrap_or_else(|_| http::HeaderValue::from_static("-")),
                    tls: b.tls.as_deref().map(Arc::from),
                    h2c: b.h2c,
                    limits: BackendLimits {
                        connect_timeout: ms(own
                            .and_then(|o| o.connect_timeout_ms)
                            .unwrap_or(server.connect_timeout_ms)),
                        read_timeout: ms(own
                            .and_then(|o| o.read_timeout_ms)
                            .unwrap_or(server.read_timeout_ms)),
                        write_timeout: ms(own
                            .and_then(|o| o.write_timeout_ms)
                            .unwrap_or(server.write_timeout_ms)),
                        max_fails: own.and_then(|o| o.max_fails).unwrap_or(server.max_fails),
                        fail_timeout: ms(own
                            .and_then(|o| o.fail_timeout_ms)
                            .unwrap_or(server.fail_timeout_ms)),
                    },
                }
            })
            .collect();
        let header = |name: &str, key: &str| {
            HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| v.error(key, format!("{name:?} is not a valid header name")))
        };
        let mut rules = Vec::with_capacity(plan.rules.len());
        for (i, r) in plan.rules.iter().enumerate() {
            rules.push(match &r.matcher {
                Matcher::Host(h) => RuleMatch::Host(h.clone()),
                Matcher::Header(h, value) => RuleMatch::Header(
                    header(h, &format!("label_rules[{i}].header"))?,
                    value.clone(),
                ),
            });
        }
        let balance = v.balance.map(|factor| Balance {
            factor,
            loads: Arc::new(LoadTracker::new(&plan.table)),
            weights: (0..=plan.rules.len())
                .map(|_| std::array::from_fn(|_| (AtomicU64::new(0), AtomicU64::new(0))))
                .collect(),
        });
        let cache = v.config.cache_status.rules();
        let previous_owner_header = match v
            .config
            .migration
            .as_ref()
            .and_then(|m| m.previous_owner_header.as_deref())
        {
            Some(h) => Some(header(h, "migration.previous_owner_header")?),
            None => None,
        };
        Ok(RoutingState {
            plan,
            backends,
            rules,
            balance,
            validated: v,
            tls,
            upstream_tls,
            cache,
            previous_owner_header,
            shares: std::sync::OnceLock::new(),
        })
    }
}
