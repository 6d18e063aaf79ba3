//! Steering through etcd (`[control]`): the fleet's routing config
//! (`PREFIX/config`) and rollout (`PREFIX/rollout`) are watched and
//! applied as a local reload would apply them, this router registers under
//! `PREFIX/routers/ID` with a lease, and the last applied state is kept in
//! a cache file to start from when etcd is unreachable.
//!
//! Two threads, both blocking on etcd and never on the request path: the
//! watcher ([`watch`]: read both keys, hand them to the routing state's
//! owner, watch from the next revision) and the lease keeper ([`lease`]);
//! the cache file is [`cache`]. On any etcd error the router keeps
//! serving what it applied last, marks itself disconnected (`/status`,
//! `ketama_control_connected`) and retries with exponential backoff and
//! jitter.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use crate::service::Background;
use crate::service::ShutdownWatch;
use anyhow::Context as _;
use async_trait::async_trait;
use ketama::Rollout;
use ketama_config::{parse_rollout, Validated};
use ketama_fleet::etcd::{self, Client, EtcdError, Kv};
use ketama_fleet::{Keys, Rejected};

use crate::cell::{RoutingCell, Shared};
use crate::clock::utc;
use crate::metrics::Metrics;

pub mod cache;
mod lease;
mod watch;

pub use cache::{Applied, Cache};

/// Where the running routing config came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// etcd's `config` key.
    Etcd,
    /// The cache file (etcd was unreachable at start).
    Cache,
    /// The router's own file (no config in etcd or cache yet).
    LocalFile,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Etcd => "etcd",
            Source::Cache => "cache file",
            Source::LocalFile => "local file",
        }
    }
}

#[derive(Debug)]
struct Inner {
    cache: Cache,
    source: Source,
    rejected: Option<Rejected>,
    disconnected_since: Option<SystemTime>,
    last_error: Option<String>,
    lease: Option<i64>,
    reconnects: u64,
    /// The fleet's rollout plan as last read (`PREFIX/rollout-plan/state`),
    /// for `/status` and the page.
    plan: Option<serde_json::Value>,
}

/// The control plane of one router: its etcd client and what it knows of
/// etcd (applied revisions, connection, lease). The routing state itself
/// belongs to the [`RoutingCell`]; the watcher hands it every change.
#[derive(Debug)]
pub struct Control {
    client: Client,
    keys: Keys,
    id: String,
    settings: ketama_config::Control,
    /// This router's listeners, as registered.
    listen: Vec<String>,
    /// The counters its registration reports.
    metrics: Arc<Metrics>,
    connected: AtomicBool,
    inner: Mutex<Inner>,
}

/// This router's default id: host name and first listen address.
fn default_id(v: &Validated) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}-{}", v.listen[0]).replace(['/', ' '], "_")
}

/// The routing config at start, and where it came from.
pub struct Start {
    /// The control plane, for the services that need it.
    pub control: Arc<Control>,
    /// etcd's (or the cache file's) routing config to serve first; `None`:
    /// the router's own file routes.
    pub shared: Option<Shared>,
    /// etcd's (or the cache file's) rollout.
    pub rollout: Option<Rollout>,
}

impl Control {
    /// Connects (once, within the configured timeout) and picks the config
    /// to start from: etcd's, else the cache file's, else the local
    /// file's own routing sections; with none of them, an error that says
    /// what to do.
    pub fn start(local: &Validated, metrics: Arc<Metrics>) -> anyhow::Result<Start> {
        let settings = local
            .control
            .clone()
            .context("start called without [control]")?;
        let client = Client::new(&etcd::Options {
            endpoints: settings.endpoints.clone(),
            credentials: settings.credentials.clone(),
            ca_file: settings.ca_file.clone(),
            client_cert: settings.client_cert.clone(),
            timeout: settings.timeout,
            watch_idle: settings.watch_idle,
        })
        .with_context(|| format!("{}: control", local.file))?;
        let keys = Keys::new(&settings.prefix);
        let id = settings.id.clone().unwrap_or_else(|| default_id(local));
        let control = Arc::new(Control {
            client,
            keys,
            id,
            settings,
            listen: local.listen.iter().map(|a| a.to_string()).collect(),
            metrics,
            connected: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                cache: Cache::default(),
                source: Source::LocalFile,
                rejected: None,
                disconnected_since: None,
                last_error: None,
                lease: None,
                reconnects: 0,
                plan: None,
            }),
        });
        let (cache, source) = match control.read_both() {
            Ok((cache, _)) => {
                control.connected.store(true, Relaxed);
                (cache, Source::Etcd)
            }
            Err(e) => {
                tracing::warn!("etcd unreachable at start: {e}");
                control.disconnected(&e);
                let cached = control
                    .settings
                    .cache_file
                    .as_deref()
                    .and_then(cache::read_cache)
                    .filter(|c| c.prefix == control.keys.prefix());
                (cached.unwrap_or_default(), Source::Cache)
            }
        };
        let shared = match &cache.config {
            Some(applied) => {
                let name = control.shared_name(applied.revision);
                match Shared::parse(&applied.text, &name)
                    .and_then(|s| local.with_shared(s.routing.clone(), &name).map(|_| s))
                {
                    Ok(s) => Some(s),
                    Err(e) => {
                        tracing::error!("{e:#}");
                        control.lock().rejected = Some(Rejected {
                            key: "config".into(),
                            revision: applied.revision,
                            error: format!("{e:#}"),
                        });
                        None
                    }
                }
            }
            None => None,
        };
        let source = match (&shared, local.has_backends()) {
            (Some(_), _) => source,
            (None, true) => {
                tracing::warn!(
                    "no routing config from {} ({}): serving {}'s own backends",
                    control.keys.config(),
                    source.name(),
                    local.file
                );
                Source::LocalFile
            }
            (None, false) => anyhow::bail!(
                "no routing config: {} is {} and {} has no backends of its own; push one with `ketama fleet push`, start etcd, or add [[backends]] to the file",
                control.keys.config(),
                if source == Source::Etcd {
                    "empty or invalid"
                } else {
                    "unreachable, with no cache file to start from (control.cache_file),"
                },
                local.file
            ),
        };
        let rollout = cache
            .rollout
            .as_ref()
            .and_then(|a| parse_rollout(a.text.as_bytes()).ok());
        {
            let mut inner = control.lock();
            inner.source = source;
            inner.cache = Cache {
                prefix: control.keys.prefix().to_string(),
                config: cache.config.filter(|_| source != Source::LocalFile),
                rollout: cache.rollout.filter(|_| rollout.is_some()),
            };
        }
        Ok(Start {
            control,
            shared,
            rollout,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The name a shared config's errors carry.
    fn shared_name(&self, revision: i64) -> String {
        format!("etcd {}@{revision}", self.keys.config())
    }

    /// The `rollout` key's applied revision (0: none).
    pub fn rollout_revision(&self) -> i64 {
        self.lock().cache.rollout.as_ref().map_or(0, |a| a.revision)
    }

    /// The `rollout` key.
    pub fn rollout_key(&self) -> String {
        self.keys.rollout()
    }

    /// Reads both keys; the revision is the store's at the first read
    /// (a watch from the next one misses nothing).
    fn read_both(&self) -> Result<(Cache, i64), EtcdError> {
        let (config, revision) = self.client.get(&self.keys.config())?;
        let (rollout, _) = self.client.get(&self.keys.rollout())?;
        let applied = |kv: Option<Kv>| kv.as_ref().map(Applied::of);
        let cache = Cache {
            prefix: self.keys.prefix().to_string(),
            config: applied(config),
            rollout: applied(rollout),
        };
        Ok((cache, revision))
    }

    fn disconnected(&self, e: &EtcdError) {
        let was = self.connected.swap(false, Relaxed);
        let mut inner = self.lock();
        if was || inner.disconnected_since.is_none() {
            inner.disconnected_since = Some(SystemTime::now());
        }
        inner.last_error = Some(e.to_string());
    }

    fn reconnected(&self) {
        if !self.connected.swap(true, Relaxed) {
            let mut inner = self.lock();
            if inner.disconnected_since.take().is_some() {
                inner.reconnects += 1;
                tracing::info!("etcd reachable again");
            }
        }
    }

    /// Whether the last etcd call succeeded.
    pub fn is_connected(&self) -> bool {
        self.connected.load(Relaxed)
    }

    /// The `/status` object.
    pub fn status(&self) -> serde_json::Value {
        let inner = self.lock();
        let since = inner.disconnected_since;
        serde_json::json!({
            "etcd": self.settings.endpoints,
            "endpoint": self.client.endpoint(),
            "prefix": self.keys.prefix(),
            "id": self.id,
            "scope": self.settings.scope,
            "connected": self.is_connected(),
            "disconnected_since": since.map(utc),
            "disconnected_for_s": since.and_then(|t| t.elapsed().ok()).map(|d| d.as_secs()),
            "last_error": inner.last_error,
            "source": inner.source.name(),
            "config_revision": inner.cache.config.as_ref().map_or(0, |a| a.revision),
            "rollout_revision": inner.cache.rollout.as_ref().map_or(0, |a| a.revision),
            "rejected": inner.rejected,
            "reconnects": inner.reconnects,
            "plan": inner.plan.as_ref().map(plan_summary),
        })
    }

    /// The applied (config, rollout) revisions, 0 for none, for the
    /// metrics.
    pub fn revisions(&self) -> (i64, i64) {
        let inner = self.lock();
        (
            inner.cache.config.as_ref().map_or(0, |a| a.revision),
            inner.cache.rollout.as_ref().map_or(0, |a| a.revision),
        )
    }

    fn save(&self) {
        let Some(path) = &self.settings.cache_file else {
            return;
        };
        let cache = self.lock().cache.clone();
        if let Err(e) = cache::write_cache(path, &cache) {
            tracing::warn!(file = %path.display(), "cannot write the cache file: {e}");
        }
    }
}

/// What `/status` shows of a rollout plan's state: where it is, why, and
/// its last check.
fn plan_summary(state: &serde_json::Value) -> serde_json::Value {
    let last = state["checks"].as_array().and_then(|c| c.last());
    serde_json::json!({
        "status": state["status"],
        "stage": state["stage"].as_u64().map(|s| s + 1),
        "step": state["step"].as_u64().map(|s| s + 1),
        "reason": state["reason"],
        "owner": state["owner"],
        "last_check": last.map(|c| serde_json::json!({
            "verdict": c["verdict"],
            "reasons": c["reasons"],
            "hit_ratio": c["figures"]["hit_ratio"],
            "baseline_hit_ratio": c["figures"]["baseline_hit_ratio"],
            "origin_rps": c["figures"]["origin_rps"],
        })),
    })
}

/// The background service that runs the watcher and the lease keeper.
pub struct ControlService {
    /// The control plane (`None`: no `[control]`, nothing to run).
    pub control: Option<Arc<Control>>,
    /// The routing state's owner, which applies what etcd says.
    pub cell: Arc<RoutingCell>,
    /// The counters (rejected values).
    pub metrics: Arc<Metrics>,
}

#[async_trait]
impl Background for ControlService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let Some(control) = self.control.clone() else {
            return;
        };
        let (cell, metrics, c) = (self.cell.clone(), self.metrics.clone(), control.clone());
        let _ = std::thread::Builder::new()
            .name("ketama etcd watch".into())
            .spawn(move || {
                c.watch_forever(&watch::Sink {
                    cell: &cell,
                    metrics: &metrics,
                })
            });
        let c = control.clone();
        let _ = std::thread::Builder::new()
            .name("ketama etcd lease".into())
            .spawn(move || c.lease_forever());
        let _ = shutdown.changed().await;
        // The registration goes with the lease; a clean stop says so at
        // once instead of after the TTL.
        let _ = tokio::task::spawn_blocking(move || control.revoke()).await;
    }
}
