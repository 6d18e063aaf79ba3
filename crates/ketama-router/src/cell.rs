//! The one owner of the routing state.
//!
//! [`RoutingCell`] holds the current [`RoutingState`] behind `ArcSwap` and
//! the inputs it is built from: the router's own config as last read, the
//! fleet's shared routing config (with `[control]`), the backends the
//! discovery sources found, and the rollout in force with where it came
//! from. Every change, whatever triggered it, goes through
//! [`RoutingCell::replace`]: it alone builds, swaps, returns memory to the
//! system, counts reloads and decides what survives.
//!
//! What survives is one rule ([`RolloutInForce::after`]):
//!
//! | trigger | rollout afterwards |
//! |---|---|
//! | start | etcd's when `[control]` has one, else the config's |
//! | reload (file, SIGHUP, `POST /reload`) | the config's, unless etcd set one |
//! | `PUT /rollout` | the operator's (refused with `[control]`: etcd's wins) |
//! | discovery change, etcd config change | unchanged |
//! | etcd rollout written | etcd's |
//! | etcd rollout deleted | the config's |

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use arc_swap::ArcSwap;
use ketama::Rollout;
use ketama_config::discovery::{backends_of, Record};
use ketama_config::{ConfigError, Discovered, Routing, Validated};

use crate::access_log::AccessLog;
use crate::health::HealthRegistry;
use crate::metrics::Metrics;
use crate::state::{Files, RoutingState, StateReader};

mod history;
mod rollout;

pub use history::Applied;
use history::History;
pub use rollout::{Refused, RolloutInForce, RolloutOrigin, Trigger};

/// What the cell builds every state with, and tells about each new one:
/// the health registry and the counters (kept across states), and the
/// access log (given each state's `[access_log]`).
#[derive(Debug, Clone)]
pub struct Parts {
    /// Every backend's health, by address.
    pub health: Arc<HealthRegistry>,
    /// The counters.
    pub metrics: Arc<Metrics>,
    /// The access log.
    pub access_log: AccessLog,
}

/// Where reloads read the router's own config from.
#[derive(Clone, Debug)]
pub enum ConfigSource {
    /// A file, read again on every reload.
    File(PathBuf),
    /// Text held in memory (the built-in demo), named `name` in errors.
    Text {
        /// How errors name it.
        name: String,
        /// The TOML text.
        text: String,
    },
}

impl ConfigSource {
    /// Reads and validates the config.
    pub fn read(&self) -> Result<Validated, ConfigError> {
        match self {
            ConfigSource::File(p) => ketama_config::load(p),
            ConfigSource::Text { name, text } => ketama_config::parse(text, name),
        }
    }
}

/// A fleet's shared routing config as applied (etcd's `PREFIX/config`).
#[derive(Clone, Debug)]
pub struct Shared {
    /// The parsed routing sections.
    pub routing: Routing,
    /// How errors name it (`etcd /prefix/config@REV`).
    pub name: String,
}

impl Shared {
    /// Parses a shared config's text ([`ketama_config::parse_shared`]).
    pub fn parse(text: &str, name: &str) -> Result<Shared, ConfigError> {
        Ok(Shared {
            routing: ketama_config::parse_shared(text, name)?,
            name: name.to_string(),
        })
    }
}

/// The last good records of every discovery source, by source id.
pub type Records = BTreeMap<String, Vec<Record>>;

/// What a replace changed.
#[derive(Debug, Default)]
pub struct Change {
    /// Keys whose new value applies only after a restart (reloads only).
    pub restart_needed: Vec<&'static str>,
    /// The share of the keyspace whose backend moved (discovery changes
    /// only, on the first ring).
    pub moved_share: Option<f64>,
    /// Whether rings were built large enough that the allocator is worth
    /// purging afterwards (see [`LARGE_BUILD_POINTS`]).
    pub large: bool,
}

/// Points (all rings of a state together) from which a build's scratch
/// (16 bytes a point at the peak of its sort) is returned to the system
/// at once after the change, rather than by the allocator's own decay.
pub const LARGE_BUILD_POINTS: usize = 1 << 20;

/// The inputs the routing state is built from.
#[derive(Debug)]
struct Inputs {
    source: ConfigSource,
    /// The router's own config, as last read.
    local: Validated,
    /// etcd's routing config, when one is applied.
    shared: Option<Shared>,
    records: Records,
    rollout: RolloutInForce,
    /// The restart-only settings the process started with.
    fixed: Vec<(&'static str, String)>,
    restart_needed: Vec<&'static str>,
    /// The last reloads and etcd config changes.
    history: History,
}

impl Inputs {
    /// What readers are shown of these inputs.
    fn published(&self) -> Published {
        Published {
            rollout: self.rollout.clone(),
            restart_needed: self.restart_needed.clone(),
            has_shared: self.shared.is_some(),
            history: self.history.newest_first(),
        }
    }
}

/// The settings a reload cannot change (the listeners and runtimes are
/// built once; the connection limit's default counts the upstream pool),
/// as (key, value) pairs to compare. Every other `[server]` setting is
/// read from the routing state by each new connection or request.
pub fn fixed_settings(v: &Validated) -> Vec<(&'static str, String)> {
    let s = &v.config.server;
    vec![
        ("server.listen", format!("{:?}", v.listen)),
        ("tls.listen", format!("{:?}", v.tls_listen)),
        ("server.threads", s.threads.to_string()),
        ("server.work_stealing", s.work_stealing.to_string()),
        (
            "server.upstream_keepalive_pool_size",
            s.upstream_keepalive_pool_size.to_string(),
        ),
        (
            "server.grace_period_seconds",
            s.grace_period_seconds.to_string(),
        ),
        ("server.upgrade_sock", format!("{:?}", s.upgrade_sock)),
        ("admin.listen", v.admin_listen.to_string()),
        ("control", format!("{:?}", v.control)),
    ]
}

/// The keys of `fixed` whose value in `new` differs.
pub fn restart_needed(fixed: &[(&'static str, String)], new: &Validated) -> Vec<&'static str> {
    fixed_settings(new)
        .into_iter()
        .zip(fixed)
        .filter(|(new, old)| new.1 != old.1)
        .map(|(new, _)| new.0)
        .collect()
}

/// The backends `records` give under the sources of `v` (sources `v` no
/// longer has are ignored; answers are judged by `v`'s settings).
pub fn discovered(records: &Records, v: &Validated) -> Vec<Discovered> {
    v.discovery
        .iter()
        .filter_map(|src| {
            let r = records.get(&src.id())?;
            Some(backends_of(src, r, v.nginx_identity()))
        })
        .flatten()
        .collect()
}

/// What the admin API reads of the cell besides the routing state,
/// published whole with every change (`ArcSwap`), so a reader never waits
/// for a writer: `/status` during a 250 ms ring build answers as fast as
/// without one.
#[derive(Clone, Debug)]
pub struct Published {
    /// The rollout in force and where it came from.
    pub rollout: RolloutInForce,
    /// Keys that changed in the config but need a restart to apply,
    /// since the last reload.
    pub restart_needed: Vec<&'static str>,
    /// Whether an etcd routing config is applied (else the router's own
    /// file routes).
    pub has_shared: bool,
    /// The last reloads and etcd config changes, applied or refused,
    /// newest first.
    pub history: Vec<Applied>,
}

/// The routing state and everything it is built from; see the module
/// docs.
#[derive(Debug)]
pub struct RoutingCell {
    state: Arc<ArcSwap<RoutingState>>,
    /// The writers' side: every change holds it from start to end.
    inputs: Mutex<Inputs>,
    /// The readers' side, stored by the writers.
    published: ArcSwap<Published>,
    controlled: bool,
    health: Arc<HealthRegistry>,
    metrics: Arc<Metrics>,
    access_log: AccessLog,
    stored: tokio::sync::Notify,
}

impl RoutingCell {
    /// Builds the first routing state from the router's own config
    /// (`local`, as read from `source`), etcd's routing config when one
    /// applies, the discovery sources' first records and etcd's rollout.
    pub fn new(
        source: ConfigSource,
        local: Validated,
        shared: Option<Shared>,
        records: Records,
        etcd_rollout: Option<Rollout>,
        parts: Parts,
    ) -> anyhow::Result<Self> {
        let Parts {
            health,
            metrics,
            access_log,
        } = parts;
        let controlled = local.control.is_some();
        let rollout = match etcd_rollout {
            Some(r) => RolloutInForce {
                rollout: Some(r),
                origin: RolloutOrigin::Etcd,
            },
            None => RolloutInForce::CONFIG,
        };
        let inputs = Inputs {
            source,
            fixed: fixed_settings(&local),
            local,
            shared,
            records,
            rollout,
            restart_needed: Vec::new(),
            history: History::default(),
        };
        let v = effective(&inputs.local, inputs.shared.as_ref())?;
        let state = build(
            &inputs.records,
            &inputs.rollout,
            v,
            (&health, &metrics),
            None,
            Files::All,
        )?;
        crate::memory::return_free_memory();
        access_log.configure(state.validated.config.access_log.as_ref());
        Ok(RoutingCell {
            state: Arc::new(ArcSwap::from_pointee(state)),
            published: ArcSwap::from_pointee(inputs.published()),
            inputs: Mutex::new(inputs),
            controlled,
            health,
            metrics,
            access_log,
            stored: tokio::sync::Notify::new(),
        })
    }

    /// A read-only handle for services that only read the state.
    pub fn reader(&self) -> StateReader {
        StateReader::new(self.state.clone())
    }

    /// Wakes when a new state is stored: a waiter that must not miss one
    /// enables the future before it reads the state it compares with.
    pub fn stored(&self) -> tokio::sync::futures::Notified<'_> {
        self.stored.notified()
    }

    /// The current routing state (a reference count; no lock).
    pub fn state(&self) -> Arc<RoutingState> {
        self.state.load_full()
    }

    /// What the admin API shows besides the state (a reference count; no
    /// lock, never waits for a change in progress).
    pub fn published(&self) -> Arc<Published> {
        self.published.load_full()
    }

    /// The keys that changed in the config but need a restart to apply,
    /// since the last reload.
    pub fn restart_needed(&self) -> Vec<&'static str> {
        self.published().restart_needed.clone()
    }

    /// Whether an etcd routing config is applied (else the router's own
    /// file routes).
    pub fn has_shared(&self) -> bool {
        self.published().has_shared
    }

    /// The last reloads and etcd config changes, applied or refused,
    /// newest first.
    pub fn history(&self) -> Vec<Applied> {
        self.published().history.clone()
    }

    /// Whether `PUT /rollout` may set a rollout now: refused with
    /// `[control]` (the rule of [`RolloutInForce::after`]) or without a
    /// migration. Reads what is published: no lock.
    pub fn admits_admin_rollout(&self) -> Result<(), Refused> {
        let probe = Trigger::AdminRollout(Rollout::default());
        self.published().rollout.after(&probe, self.controlled)?;
        match self.state().plan.table.migration() {
            Some(_) => Ok(()),
            None => Err(Refused::NoMigration),
        }
    }

    fn parts(&self) -> (&HealthRegistry, &Metrics) {
        (&self.health, &self.metrics)
    }

    fn lock(&self) -> MutexGuard<'_, Inputs> {
        self.inputs.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The one way to change the routing state. Serialised: a change
    /// builds from the inputs as the previous one left them, so none is
    /// lost. On error nothing changes and the running state serves on.
    /// Reloads and etcd config changes are counted in
    /// `ketama_reloads_total` and kept in the history. What readers see is
    /// published before the writers' lock is let go; the allocator's free
    /// pages go back to the system after it, and only after a large build.
    pub fn replace(&self, trigger: Trigger) -> Result<Change, Refused> {
        let counted = matches!(trigger, Trigger::Reload | Trigger::EtcdConfig { .. });
        let name = trigger.name();
        let mut inputs = self.lock();
        let result = self.replace_locked(&mut inputs, trigger);
        if counted {
            self.metrics.reloaded(result.is_ok());
            let (error, restart_needed) = match &result {
                Ok(c) => (None, c.restart_needed.clone()),
                Err(e) => (Some(format!("{e:#}")), Vec::new()),
            };
            inputs.history.push(Applied {
                at: std::time::SystemTime::now(),
                trigger: name,
                error,
                restart_needed,
            });
        }
        self.published.store(Arc::new(inputs.published()));
        drop(inputs);
        if result.as_ref().is_ok_and(|c| c.large) {
            crate::memory::return_free_memory();
        }
        result
    }

    fn replace_locked(&self, inputs: &mut Inputs, trigger: Trigger) -> Result<Change, Refused> {
        let rollout = inputs.rollout.after(&trigger, self.controlled)?;
        let mut change = Change::default();
        match trigger {
            Trigger::AdminRollout(r) | Trigger::EtcdRollout(Some(r)) => {
                // A rollout changes no ring: set on the running migration.
                let state = self.state();
                let m = state.plan.table.migration().ok_or(Refused::NoMigration)?;
                m.set_rollout(r);
                inputs.rollout = rollout;
                return Ok(change);
            }
            Trigger::Reload => {
                let local = inputs.source.read().map_err(anyhow::Error::from)?;
                if local.config.tls.is_none() && !inputs.local.tls_listen.is_empty() {
                    // The TLS listeners stay open until a restart; without
                    // certificates they could only refuse every client.
                    return Err(Refused::Config(anyhow::anyhow!(
                        "{}: tls: the TLS listeners ({:?}) serve until a restart: keep [tls] and its certificates in the file, or restart without them",
                        local.file,
                        inputs.local.tls_listen
                    )));
                }
                let v = effective(&local, inputs.shared.as_ref())?;
                for w in &v.warnings {
                    tracing::warn!("{w}");
                }
                let old = self.state();
                let state = build(
                    &inputs.records,
                    &rollout,
                    v,
                    self.parts(),
                    Some(&old),
                    Files::All,
                )?;
                drop(old);
                change.restart_needed = restart_needed(&inputs.fixed, &local);
                inputs.local = local;
                inputs.restart_needed = change.restart_needed.clone();
                inputs.rollout = rollout;
                change.large = self.store(state);
            }
            Trigger::Discovered(records) => {
                let old = self.state();
                let v = old.validated.clone();
                let previous = std::mem::replace(&mut inputs.records, records);
                let built = build(
                    &inputs.records,
                    &rollout,
                    v,
                    self.parts(),
                    Some(&old),
                    Files::Keep,
                );
                let state = match built {
                    Ok(s) => s,
                    Err(e) => {
                        inputs.records = previous;
                        return Err(e.into());
                    }
                };
                // Exact where the rings share a uniform key hash; else no
                // figure (it would need sampling).
                let first = *state.plan.table.versions().first().expect("a ring");
                let (a, b) = (old.plan.table.ring(first), state.plan.table.ring(first));
                change.moved_share = ketama::analysis::diff(a, b).ok().map(|d| d.moved);
                drop(old);
                change.large = self.store(state);
            }
            Trigger::EtcdConfig { text, name } => {
                let shared = Shared::parse(&text, &name).map_err(anyhow::Error::from)?;
                let v = effective(&inputs.local, Some(&shared))?;
                let old = self.state();
                let state = build(
                    &inputs.records,
                    &rollout,
                    v,
                    self.parts(),
                    Some(&old),
                    Files::Upstream,
                )?;
                drop(old);
                inputs.shared = Some(shared);
                change.large = self.store(state);
            }
            Trigger::EtcdRollout(None) => {
                let old = self.state();
                let v = old.validated.clone();
                let state = build(
                    &inputs.records,
                    &rollout,
                    v,
                    self.parts(),
                    Some(&old),
                    Files::Keep,
                )?;
                drop(old);
                inputs.rollout = rollout;
                change.large = self.store(state);
            }
        }
        Ok(change)
    }

    /// Swaps the new state in; requests in flight keep the one they
    /// started with, and the old state goes when its last request ends.
    /// Returns whether its rings are large (see [`LARGE_BUILD_POINTS`]).
    fn store(&self, state: RoutingState) -> bool {
        self.access_log
            .configure(state.validated.config.access_log.as_ref());
        let table = &state.plan.table;
        let points: usize = table
            .versions()
            .iter()
            .map(|&v| table.ring(v).point_count())
            .sum();
        drop(self.state.swap(Arc::new(state)));
        self.stored.notify_waiters();
        points >= LARGE_BUILD_POINTS
    }
}

/// The router's own config with etcd's routing sections in place of its
/// own, when an etcd config applies.
fn effective(local: &Validated, shared: Option<&Shared>) -> anyhow::Result<Validated> {
    Ok(match shared {
        Some(s) => local.with_shared(s.routing.clone(), &s.name)?,
        None => local.clone(),
    })
}

/// Builds a state from `v` and the discovered `records` with `rollout`
/// in force, reusing what it can of `previous`.
fn build(
    records: &Records,
    rollout: &RolloutInForce,
    v: Validated,
    (health, metrics): (&HealthRegistry, &Metrics),
    previous: Option<&RoutingState>,
    files: Files,
) -> anyhow::Result<RoutingState> {
    let found = discovered(records, &v);
    let state = RoutingState::build_with(v, health, metrics, &found, previous, files)?;
    if let (Some(r), Some(m)) = (&rollout.rollout, state.plan.table.migration()) {
        m.set_rollout(r.clone());
    }
    Ok(state)
}

#[cfg(test)]
mod tests;
