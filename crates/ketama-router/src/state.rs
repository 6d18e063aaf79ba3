//! Routing state: everything a request needs, built from a validated
//! config and swapped whole on reload (`ArcSwap`), so a request keeps the
//! state it started with and no request sees half a change.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use arc_swap::ArcSwap;
use ketama::migration::Version;
use ketama::{Migration, Node, Requirement, Ring, RingBuilder, Rollout};

use crate::config::{KeySource, Validated};

/// A backend's health, kept across reloads (by server string) so that a
/// reload does not forget which backends are failing.
#[derive(Debug)]
pub struct Health {
    healthy: AtomicBool,
    successes: AtomicU32,
    failures: AtomicU32,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            healthy: AtomicBool::new(true),
            successes: AtomicU32::new(0),
            failures: AtomicU32::new(0),
        }
    }
}

impl Health {
    /// Whether the backend takes traffic.
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Relaxed)
    }

    /// Records a check; flips after `up` successes or `down` failures in a
    /// row. Returns whether the state changed.
    pub fn record(&self, ok: bool, up: u32, down: u32) -> bool {
        if ok {
            self.failures.store(0, Relaxed);
            let n = self.successes.fetch_add(1, Relaxed) + 1;
            n >= up && !self.healthy.swap(true, Relaxed)
        } else {
            self.successes.store(0, Relaxed);
            let n = self.failures.fetch_add(1, Relaxed) + 1;
            n >= down && self.healthy.swap(false, Relaxed)
        }
    }
}

/// Response counts of one backend by status class, kept across reloads.
#[derive(Debug, Default)]
pub struct BackendMetrics {
    /// Index 0: no response (error); 1 to 5: 1xx to 5xx.
    pub by_class: [AtomicU64; 6],
}

impl BackendMetrics {
    /// Counts a response status (0 for none).
    pub fn count(&self, status: u16) {
        let class = (status / 100) as usize;
        self.by_class[if (1..=5).contains(&class) { class } else { 0 }].fetch_add(1, Relaxed);
    }
}

/// One backend in the routing state, by its node index in the ring(s).
#[derive(Debug)]
pub struct Backend {
    /// The address as configured.
    pub server: String,
    /// Parsed.
    pub addr: SocketAddr,
    /// Shared health.
    pub health: Arc<Health>,
    /// Shared counters.
    pub metrics: Arc<BackendMetrics>,
    /// `server` as a ready header value (cloning it is a reference count).
    pub header: http::HeaderValue,
}

/// When a label rule applies.
#[derive(Debug)]
pub enum Matcher {
    /// The Host header (port stripped) equals this.
    Host(String),
    /// The header (lowercase name) has this value.
    Header(String, String),
}

/// A label rule with its requirement prepared on each ring.
#[derive(Debug)]
pub struct Rule {
    /// When it applies.
    pub matcher: Matcher,
    /// The labels, for display.
    pub labels: Vec<String>,
    /// On the old (or only) ring.
    pub old: Requirement,
    /// On the new ring, with a migration.
    pub new: Option<Requirement>,
}

/// Everything a request needs.
#[derive(Debug)]
pub struct RoutingState {
    /// The only ring, or the old one of a migration.
    pub ring: Arc<Ring>,
    /// The migration, if any.
    pub migration: Option<Migration>,
    /// This router's scope (data center).
    pub scope: Option<String>,
    /// Backends by node index (both rings share the nodes).
    pub backends: Vec<Backend>,
    /// Label rules, first match wins.
    pub rules: Vec<Rule>,
    /// Where the key comes from.
    pub key: KeySource,
    /// Failovers after a connect failure.
    pub retries: usize,
    /// Whether to add the x-ketama headers.
    pub response_headers: bool,
    /// Share of requests traced.
    pub trace_sample: f64,
    /// Largest request head proxied.
    pub max_header_bytes: usize,
    /// Milliseconds the ring(s) took to build.
    pub build_ms: f64,
    /// The config this was built from.
    pub validated: Validated,
}

/// Health and counters by server string, so reloads keep them.
#[derive(Debug, Default)]
pub struct Registry {
    health: Mutex<HashMap<String, Arc<Health>>>,
    metrics: Mutex<HashMap<String, Arc<BackendMetrics>>>,
}

impl Registry {
    fn health(&self, server: &str) -> Arc<Health> {
        lock(&self.health)
            .entry(server.to_string())
            .or_default()
            .clone()
    }

    fn metrics(&self, server: &str) -> Arc<BackendMetrics> {
        lock(&self.metrics)
            .entry(server.to_string())
            .or_default()
            .clone()
    }

    /// Every backend's counters ever seen, by server.
    pub fn all_metrics(&self) -> Vec<(String, Arc<BackendMetrics>)> {
        let mut v: Vec<_> = lock(&self.metrics)
            .iter()
            .map(|(k, m)| (k.clone(), m.clone()))
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RoutingState {
    /// Builds the rings, requirements and backends of a validated config.
    pub fn build(v: Validated, registry: &Registry) -> anyhow::Result<Self> {
        let started = Instant::now();
        let c = &v.config;
        let nodes: Vec<Node> = c
            .backends
            .iter()
            .map(|b| {
                Node::new(b.address.clone(), b.weight)
                    .with_down(b.down)
                    .with_labels(b.labels.iter().cloned())
            })
            .collect();
        let builder = |(compat, layout, m): (ketama::Compat, ketama::Layout, u32)| {
            RingBuilder::new()
                .compat(compat)
                .layout(layout)
                .point_multiple(m)
        };
        let ring = Arc::new(builder(v.ring).build(nodes.clone())?);
        let migration = match (&v.new_ring, &c.migration) {
            (Some(r), Some(m)) => {
                let new = Arc::new(builder(*r).build(nodes)?);
                let mut rollout = Rollout::new(m.global_bp)?;
                for (name, bp) in &m.scopes {
                    rollout = rollout.with_scope(name.clone(), *bp)?;
                }
                Some(Migration::new(ring.clone(), new, rollout))
            }
            _ => None,
        };
        let mut rules = Vec::new();
        for r in &c.label_rules {
            let matcher = match (&r.host, &r.header, &r.value) {
                (Some(h), _, _) => Matcher::Host(h.to_ascii_lowercase()),
                (None, Some(h), Some(val)) => Matcher::Header(h.to_ascii_lowercase(), val.clone()),
                _ => unreachable!("validated"),
            };
            let new = match &migration {
                Some(m) => Some(m.new_ring().requirement(&r.require)?),
                None => None,
            };
            rules.push(Rule {
                matcher,
                labels: r.require.clone(),
                old: ring.requirement(&r.require)?,
                new,
            });
        }
        let backends = c
            .backends
            .iter()
            .map(|b| Backend {
                server: b.address.clone(),
                addr: b.address.parse().expect("validated"),
                health: registry.health(&b.address),
                metrics: registry.metrics(&b.address),
                header: http::HeaderValue::from_str(&b.address)
                    .expect("an IP:PORT is a valid header value"),
            })
            .collect();
        Ok(RoutingState {
            scope: c.migration.as_ref().and_then(|m| m.scope.clone()),
            ring,
            migration,
            backends,
            rules,
            key: v.key.clone(),
            retries: c.server.retries,
            response_headers: c.server.response_headers,
            trace_sample: c.server.trace_sample,
            max_header_bytes: c.server.max_header_bytes,
            build_ms: started.elapsed().as_secs_f64() * 1e3,
            validated: v,
        })
    }

    /// The ring a version refers to.
    pub fn ring_of(&self, v: Option<Version>) -> &Ring {
        match (&self.migration, v) {
            (Some(m), Some(v)) => m.ring(v),
            _ => &self.ring,
        }
    }
}

/// The router's shared state: the current routing state and what survives
/// reloads.
#[derive(Debug)]
pub struct App {
    /// The current routing state.
    pub state: ArcSwap<RoutingState>,
    /// Health and counters by server.
    pub registry: Registry,
    /// Where reloads read the config from (`None`: the built-in demo text).
    pub config_path: Option<std::path::PathBuf>,
    /// The demo's config text, for reloads without a file.
    pub config_text: Option<String>,
    /// Lookups without a migration.
    pub only_lookups: AtomicU64,
    /// Reloads done and rejected.
    pub reloads: (AtomicU64, AtomicU64),
}

impl App {
    /// Builds the app from a validated config.
    pub fn new(
        v: Validated,
        config_path: Option<std::path::PathBuf>,
        config_text: Option<String>,
    ) -> anyhow::Result<Self> {
        let registry = Registry::default();
        let state = RoutingState::build(v, &registry)?;
        Ok(App {
            state: ArcSwap::from_pointee(state),
            registry,
            config_path,
            config_text,
            only_lookups: AtomicU64::new(0),
            reloads: (AtomicU64::new(0), AtomicU64::new(0)),
        })
    }

    /// Re-reads the config and swaps the routing state; on error the
    /// running state stays and the error is returned. Listeners, threads
    /// and the admin API are fixed at start; the rest applies.
    pub fn reload(&self) -> anyhow::Result<()> {
        let result = (|| {
            let v = match (&self.config_path, &self.config_text) {
                (Some(p), _) => crate::config::load(p)?,
                (None, Some(t)) => crate::config::parse(t, "(built-in demo config)")?,
                (None, None) => anyhow::bail!("no config to reload from"),
            };
            let state = RoutingState::build(v, &self.registry)?;
            self.state.store(Arc::new(state));
            Ok(())
        })();
        match &result {
            Ok(()) => {
                self.reloads.0.fetch_add(1, Relaxed);
                tracing::info!("config reloaded");
            }
            Err(e) => {
                self.reloads.1.fetch_add(1, Relaxed);
                tracing::error!("config reload rejected, keeping the running config: {e:#}");
            }
        }
        result
    }
}
