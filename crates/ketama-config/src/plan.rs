//! The routing plan a validated configuration describes: the route table
//! (ring or migration, label requirements), the backends in node order and
//! the label rules. Built the same way by a start, a reload and `--check`,
//! so a configuration that checks also starts.

use std::sync::Arc;
use std::time::Instant;

use ketama::{Migration, Need, Node, RingBuilder, RingSettings, Rollout, RouteTable};

use crate::validate::{KeySource, Matcher, Validated};
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

/// Everything routing needs, built from a [`Validated`] configuration.
#[derive(Debug)]
pub struct Plan {
    /// The one routing decision.
    pub table: RouteTable,
    /// Node index -> the configured backend (`backends[i]`).
    pub backends: Vec<crate::model::BackendSection>,
    /// Node index -> its socket address.
    pub addrs: Vec<std::net::SocketAddr>,
    /// Label rules, first match wins.
    pub rules: Vec<PlannedRule>,
    /// Where the key comes from.
    pub key: KeySource,
    /// This router's scope (data center), which picks its rollout.
    pub scope: Option<String>,
    /// Milliseconds the rings and requirements took to build.
    pub build_ms: f64,
}

impl Plan {
    /// Builds the rings and requirements of a validated configuration.
    /// Errors name the key to change (a weight that makes too many points
    /// names that backend's weight).
    pub fn build(v: &Validated) -> Result<Plan, ConfigError> {
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
        let ring = build_ring(v, nodes.clone(), v.ring, "ring")?;
        let mut table = match (&v.new_ring, &c.migration) {
            (Some(settings), Some(m)) => {
                let new = build_ring(v, nodes, *settings, "migration.ring")?;
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
            backends: c.backends.clone(),
            addrs: v.addrs.clone(),
            rules,
            key: v.key.clone(),
            scope: c.migration.as_ref().and_then(|m| m.scope.clone()),
            build_ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }
}

/// Builds one ring, naming the key at fault on error.
fn build_ring(
    v: &Validated,
    nodes: Vec<Node>,
    settings: RingSettings,
    section: &str,
) -> Result<Arc<ketama::Ring>, ConfigError> {
    RingBuilder::from(settings)
        .build(nodes)
        .map(Arc::new)
        .map_err(|e| {
            let key = match &e {
                ketama::Error::TooManyPoints { index, .. } => format!("backends[{index}].weight"),
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
