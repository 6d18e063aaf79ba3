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

pub use history::Applied;
use history::History;

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

/// What asks for a new routing state.
#[derive(Debug)]
pub enum Trigger {
    /// SIGHUP or `POST /reload`: read the config source again.
    Reload,
    /// `PUT /rollout`: the operator's rollout, at once.
    AdminRollout(Rollout),
    /// The discovery sources' records changed.
    Discovered(Records),
    /// etcd's shared routing config changed: its text, and how errors
    /// name it.
    EtcdConfig {
        /// The value as written.
        text: String,
        /// `etcd /prefix/config@REV`.
        name: String,
    },
    /// etcd's rollout was written (`Some`) or deleted (`None`).
    EtcdRollout(Option<Rollout>),
}

impl Trigger {
    /// The trigger's name, for logs.
    pub fn name(&self) -> &'static str {
        match self {
            Trigger::Reload => "reload",
            Trigger::AdminRollout(_) => "admin rollout",
            Trigger::Discovered(_) => "discovery",
            Trigger::EtcdConfig { .. } => "etcd config",
            Trigger::EtcdRollout(_) => "etcd rollout",
        }
    }
}

/// Where the rollout in force came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RolloutOrigin {
    /// The config's `[migration]` (`global_bp`, `scopes`).
    Config,
    /// An operator's `PUT /rollout`.
    Admin,
    /// etcd's `PREFIX/rollout`.
    Etcd,
}

impl RolloutOrigin {
    /// The name `/status` shows.
    pub fn name(self) -> &'static str {
        match self {
            RolloutOrigin::Config => "config",
            RolloutOrigin::Admin => "admin",
            RolloutOrigin::Etcd => "etcd",
        }
    }
}

/// The rollout in force: the config's, or one set over it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RolloutInForce {
    /// Set over the config's (`None`: the config's own applies).
    pub rollout: Option<Rollout>,
    /// Where it came from.
    pub origin: RolloutOrigin,
}

impl RolloutInForce {
    /// The config's own.
    pub const CONFIG: RolloutInForce = RolloutInForce {
        rollout: None,
        origin: RolloutOrigin::Config,
    };

    /// The precedence rule: what is in force after `trigger`, given what
    /// was before. `controlled` says the router has `[control]` (its
    /// rollout is etcd's). `Err` names why the trigger is refused.
    pub fn after(&self, trigger: &Trigger, controlled: bool) -> Result<RolloutInForce, Refused> {
        Ok(match trigger {
            Trigger::Reload => match self.origin {
                RolloutOrigin::Etcd => self.clone(),
                RolloutOrigin::Admin | RolloutOrigin::Config => Self::CONFIG,
            },
            Trigger::AdminRollout(_) if controlled => return Err(Refused::RolloutFromEtcd),
            Trigger::AdminRollout(r) => RolloutInForce {
                rollout: Some(r.clone()),
                origin: RolloutOrigin::Admin,
            },
            Trigger::Discovered(_) | Trigger::EtcdConfig { .. } => self.clone(),
            Trigger::EtcdRollout(Some(r)) => RolloutInForce {
                rollout: Some(r.clone()),
                origin: RolloutOrigin::Etcd,
            },
            Trigger::EtcdRollout(None) => Self::CONFIG,
        })
    }
}

/// Why a change was refused; the running state keeps serving.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// `PUT /rollout` on a router whose rollout comes from etcd.
    #[error("this router's rollout comes from etcd: write it there with `ketama fleet rollout`")]
    RolloutFromEtcd,
    /// A rollout for a config without `[migration]`.
    #[error("no migration in the running config: add [migration] to the config first")]
    NoMigration,
    /// The config (read, combined with etcd's, or built) is invalid.
    #[error(transparent)]
    Config(#[from] anyhow::Error),
}

/// What a replace changed.
#[derive(Debug, Default)]
pub struct Change {
    /// Keys whose new value applies only after a restart (reloads only).
    pub restart_needed: Vec<&'static str>,
    /// The share of the keyspace whose backend moved (discovery changes
    /// only, on the first ring).
    pub moved_share: Option<f64>,
}

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
}

/// The settings a reload cannot change (the listeners and runtimes are
/// built once), as (key, value) pairs to compare.
pub fn fixed_settings(v: &Validated) -> Vec<(&'static str, String)> {
    let s = &v.config.server;
    vec![
        ("server.listen", format!("{:?}", v.listen)),
        ("tls.listen", format!("{:?}", v.tls_listen)),
        (
            "server.h2_max_concurrent_streams",
            s.h2_max_concurrent_streams.to_string(),
        ),
        ("server.threads", s.threads.to_string()),
        ("server.body_buffer_bytes", s.body_buffer_bytes.to_string()),
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

/// The routing state and everything it is built from; see the module
/// docs.
#[derive(Debug)]
pub struct RoutingCell {
    state: Arc<ArcSwap<RoutingState>>,
    inputs: Mutex<Inputs>,
    controlled: bool,
    health: Arc<HealthRegistry>,
    metrics: Arc<Metrics>,
    access_log: AccessLog,
    history: Mutex<History>,
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
            inputs: Mutex::new(inputs),
            controlled,
            health,
            metrics,
            access_log,
            history: Mutex::default(),
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

    /// The rollout in force and where it came from.
    pub fn rollout_in_force(&self) -> RolloutInForce {
        self.lock().rollout.clone()
    }

    /// The keys that changed in the config but need a restart to apply,
    /// since the last reload.
    pub fn restart_needed(&self) -> Vec<&'static str> {
        self.lock().restart_needed.clone()
    }

    /// Whether an etcd routing config is applied (else the router's own
    /// file routes).
    pub fn has_shared(&self) -> bool {
        self.lock().shared.is_some()
    }

    /// Whether `PUT /rollout` may set a rollout now: refused with
    /// `[control]` (the rule of [`RolloutInForce::after`]) or without a
    /// migration.
    pub fn admits_admin_rollout(&self) -> Result<(), Refused> {
        let probe = Trigger::AdminRollout(Rollout::default());
        self.lock().rollout.after(&probe, self.controlled)?;
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
    /// `ketama_reloads_total` and logged here.
    pub fn replace(&self, trigger: Trigger) -> Result<Change, Refused> {
        let counted = matches!(trigger, Trigger::Reload | Trigger::EtcdConfig { .. });
        let name = trigger.name();
        let result = self.replace_locked(trigger);
        if counted {
            self.metrics.reloaded(result.is_ok());
            let (error, restart_needed) = match &result {
                Ok(c) => (None, c.restart_needed.clone()),
                Err(e) => (Some(format!("{e:#}")), Vec::new()),
            };
            self.history
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(Applied {
                    at: std::time::SystemTime::now(),
                    trigger: name,
                    error,
                    restart_needed,
                });
        }
        result
    }

    /// The last reloads and etcd config changes, applied or refused,
    /// newest first.
    pub fn history(&self) -> Vec<Applied> {
        self.history
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .newest_first()
    }

    fn replace_locked(&self, trigger: Trigger) -> Result<Change, Refused> {
        let mut inputs = self.lock();
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
                self.store(state);
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
                self.store(state);
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
                self.store(state);
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
                self.store(state);
            }
        }
        Ok(change)
    }

    /// Swaps the new state in; requests in flight keep the one they
    /// started with. The old state goes when its last request ends, and
    /// the allocator's free pages go back to the system now.
    fn store(&self, state: RoutingState) {
        self.access_log
            .configure(state.validated.config.access_log.as_ref());
        drop(self.state.swap(Arc::new(state)));
        crate::memory::return_free_memory();
        self.stored.notify_waiters();
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
