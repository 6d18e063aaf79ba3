//! The routing plan a validated configuration describes: the route table
//! (ring or migration, label requirements), the backends in node order and
//! the label rules. Built the same way by a start, a reload and `--check`,
//! so a configuration that checks also starts.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use ketama::{Migration, Need, Node, RingBuilder, RingSettings, Rollout, RouteTable};

use crate::validate::{Matcher, Validated};
use crate::ConfigError;

/// A label rule with its requirement prepared on the route table.
#[derive(Clone, Debug)]
pub struct PlannedRule {
    /// When it applies.
    pub matcher: Matcher,
    /// The labels it requires, as configured.
    pub labels: Vec<String>,
    /// The requirement, prepared on every ring of the table.
    pub need: Need,
}

/// A backend of the plan, static or discovered, by its node index.
#[derive(Clone, Debug, PartialEq)]
pub struct PlannedBackend {
    /// The string it hashes as on the ring (the address as configured, or
    /// a discovered backend's identity; see [`crate::discovery`]).
    pub server: String,
    /// Where to connect.
    pub addr: SocketAddr,
    /// Its weight.
    pub weight: u32,
    /// Its labels.
    pub labels: Vec<String>,
    /// Administratively down.
    pub down: bool,
    /// Its own timeouts and passive-health settings, where it sets them
    /// (static backends only).
    pub overrides: Option<crate::model::BackendSection>,
    /// `None`: `backends[i]` of the file; `Some(i)`: found by
    /// `discovery[i]`.
    pub source: Option<usize>,
    /// Reached over TLS with this SNI (empty: none sent, unverified);
    /// `None`: plain.
    pub tls: Option<String>,
    /// Spoken to in HTTP/2 with prior knowledge (plain only).
    pub h2c: bool,
}

/// Everything routing needs, built from a [`Validated`] configuration
/// and the backends its discovery sources found.
#[derive(Debug)]
pub struct Plan {
    /// The one routing decision.
    pub table: RouteTable,
    /// Node index -> backend: the static ones in configuration order, then
    /// the discovered ones sorted by their string.
    pub backends: Vec<PlannedBackend>,
    /// Label rules, first match wins.
    pub rules: Vec<PlannedRule>,
    /// The routing key: its form over the request as normalized (during
    /// a key migration, the old side's).
    pub key: ketama::key::RequestKey,
    /// The new side's key during a key migration (`[migration.key]`):
    /// requests go through [`RouteTable::route_rekeyed`].
    pub new_key: Option<ketama::key::RequestKey>,
    /// This router's scope (data center), which picks its rollout.
    pub scope: Option<String>,
    /// Milliseconds the rings and requirements took to build.
    pub build_ms: f64,
}

impl Plan {
    /// Builds the rings and requirements of a validated configuration and
    /// the backends its sources discovered (none: the static ones only).
    /// Errors name the key to change (a weight that makes too many points
    /// names that backend's weight).
    pub fn build(v: &Validated, discovered: &[crate::Discovered]) -> Result<Plan, ConfigError> {
        Self::build_after(v, discovered, None)
    }

    /// [`build`](Self::build) for a reload: rings are rebuilt from the
    /// running plan's rings of the same settings
    /// ([`RingBuilder::rebuild`]), so backends that kept their weight keep
    /// their points without generating them again. The result is the same
    /// as `build`'s.
    pub fn rebuild(
        v: &Validated,
        discovered: &[crate::Discovered],
        previous: &Plan,
    ) -> Result<Plan, ConfigError> {
        Self::build_after(v, discovered, Some(previous))
    }

    fn build_after(
        v: &Validated,
        discovered: &[crate::Discovered],
        previous: Option<&Plan>,
    ) -> Result<Plan, ConfigError> {
        let started = Instant::now();
        let reuse = |settings: RingSettings| {
            let table = &previous?.table;
            table
                .versions()
                .iter()
                .map(|&ver| table.ring(ver))
                .find(|r| r.settings() == settings)
        };
        let c = &v.config;
        let backends = union(v, discovered);
        let nodes: Vec<Node> = backends
            .iter()
            .map(|b| {
                let n = Node::new(b.server.clone(), b.weight)
                    .with_down(b.down)
                    .with_labels(b.labels.iter().cloned());
                match b.overrides.as_ref().and_then(|o| o.id) {
                    Some(id) => n.with_id(id),
                    None => n,
                }
            })
            .collect();
        let ring = build_ring(v, &backends, nodes.clone(), v.ring, reuse(v.ring), "ring")?;
        let mut table = match (&v.new_ring, &c.migration) {
            (Some(settings), Some(m)) => {
                let new = build_ring(
                    v,
                    &backends,
                    nodes,
                    *settings,
                    reuse(*settings),
                    "migration.ring",
                )?;
                let mut rollout = Rollout::new(m.global_bp)
                    .map_err(|e| v.error("migration.global_bp", e.to_string()))?;
                for (name, bp) in &m.scopes {
                    rollout = rollout
                        .with_scope(name.clone(), *bp)
                        .map_err(|e| v.error(format!("migration.scopes.{name}"), e.to_string()))?;
                }
                RouteTable::migrating(Migration::new(ring, new, rollout))
            }
            _ => RouteTable::new(ring),
        };
        let mut rules = Vec::with_capacity(v.rules.len());
        for (i, (matcher, labels)) in v.rules.iter().enumerate() {
            let need = table
                .need(labels)
                .map_err(|e| v.error(format!("label_rules[{i}].require"), e.to_string()))?;
            rules.push(PlannedRule {
                matcher: matcher.clone(),
                labels: labels.clone(),
                need,
            });
        }
        Ok(Plan {
            table,
            backends,
            rules,
            key: v.key.clone(),
            new_key: v.new_key.clone(),
            scope: v.scope().map(str::to_string),
            build_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }
}

/// The static backends in configuration order, then the discovered ones
/// (sorted by their string) that are not already there: a discovered
/// address that is a static backend's is that backend, and a string seen
/// twice is one backend (the first source's).
fn union(v: &Validated, discovered: &[crate::Discovered]) -> Vec<PlannedBackend> {
    let mut out: Vec<PlannedBackend> = v
        .config
        .backends
        .iter()
        .zip(&v.addrs)
        .map(|(b, &addr)| PlannedBackend {
            server: b.address.clone(),
            addr,
            weight: b.weight,
            labels: b.labels.clone(),
            down: b.down,
            overrides: Some(b.clone()),
            source: None,
            tls: b.tls.then(|| b.sni.clone().unwrap_or_default()),
            h2c: b.h2c,
        })
        .collect();
    let static_addrs: HashSet<SocketAddr> = v.addrs.iter().copied().collect();
    let mut servers: HashSet<String> = out.iter().map(|b| b.server.clone()).collect();
    let mut found: Vec<&crate::Discovered> = discovered.iter().collect();
    found.sort_by(|a, b| (&a.server, a.source).cmp(&(&b.server, b.source)));
    for d in found {
        if static_addrs.contains(&d.addr) || !servers.insert(d.server.clone()) {
            continue;
        }
        out.push(PlannedBackend {
            server: d.server.clone(),
            addr: d.addr,
            weight: d.weight,
            labels: d.labels.clone(),
            down: false,
            overrides: None,
            source: Some(d.source),
            tls: d.tls.clone(),
            h2c: d.h2c,
        });
    }
    out
}

/// Builds one ring, naming the key at fault on error.
fn build_ring(
    v: &Validated,
    backends: &[PlannedBackend],
    nodes: Vec<Node>,
    settings: RingSettings,
    previous: Option<&Arc<ketama::Ring>>,
    section: &str,
) -> Result<Arc<ketama::Ring>, ConfigError> {
    // A reload's rebuild merges on every core the machine has (up to 4):
    // it runs off the request path, and the ring is the same either way.
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let builder = RingBuilder::from(settings).threads(threads);
    match previous {
        Some(old) => builder.rebuild(old, nodes),
        None => builder.build(nodes),
    }
    .map(Arc::new)
    .map_err(|e| {
        let key = match &e {
            ketama::Error::TooManyPoints { index, .. } => {
                match backends.get(*index).and_then(|b| b.source) {
                    Some(src) => format!("discovery[{src}].weight"),
                    None => format!("backends[{index}].weight"),
                }
            }
            ketama::Error::TooManyNodesForCompat { .. } => format!("{section}.compat"),
            ketama::Error::TooManyNodesForLayout { .. } => format!("{section}.layout"),
            ketama::Error::TooManyLabels { .. } => "backends".to_string(),
            _ => section.to_string(),
        };
        v.error(key, format!("cannot build the {section} ({settings}): {e}"))
    })
}

impl Validated {
    /// An error about `key` in this configuration's file.
    pub fn error(&self, key: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError {
            file: self.file.clone(),
            key: key.into(),
            message: message.into(),
        }
    }
}
