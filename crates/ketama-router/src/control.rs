//! Steering through etcd (`[control]`): the fleet's routing config
//! (`PREFIX/config`) and rollout (`PREFIX/rollout`) are watched and
//! applied as a local reload would apply them, this router registers under
//! `PREFIX/routers/ID` with a lease, and the last applied state is kept in
//! a cache file to start from when etcd is unreachable.
//!
//! Two threads, both blocking on etcd and never on the request path: the
//! watcher (read both keys, apply, watch from the next revision; a lost or
//! compacted watch reads both again) and the lease keeper (grant, register,
//! renew every third of the TTL). On any etcd error the router keeps
//! serving what it applied last, marks itself disconnected (`/status`,
//! `ketama_control_connected`) and retries with exponential backoff and
//! jitter.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use async_trait::async_trait;
use ketama::Rollout;
use ketama_config::{parse_rollout, parse_shared, Validated};
use ketama_fleet::etcd::{self, Client, EtcdError, Kv};
use ketama_fleet::{Keys, Registration, Rejected};
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use serde::{Deserialize, Serialize};

use crate::app::App;

/// A key's applied value.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The value as written.
    pub text: String,
    /// Its mod revision.
    pub revision: i64,
}

impl Applied {
    fn of(kv: &Kv) -> Self {
        Applied {
            text: String::from_utf8_lossy(&kv.value).into_owned(),
            revision: kv.mod_revision,
        }
    }
}

/// What the cache file holds: the last applied config and rollout.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cache {
    /// The prefix they came from.
    pub prefix: String,
    /// `PREFIX/config`.
    pub config: Option<Applied>,
    /// `PREFIX/rollout`.
    pub rollout: Option<Applied>,
}

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
    /// The router's own file, validated (reloads replace it).
    local: Validated,
    cache: Cache,
    source: Source,
    rejected: Option<Rejected>,
    disconnected_since: Option<SystemTime>,
    last_error: Option<String>,
    lease: Option<i64>,
    reconnects: u64,
}

/// The control plane of one router.
#[derive(Debug)]
pub struct Control {
    client: Client,
    keys: Keys,
    id: String,
    settings: ketama_config::Control,
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

/// `time` as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn utc(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + (m <= 2) as i64;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn read_cache(path: &Path) -> Option<Cache> {
    let text = std::fs::read_to_string(path).ok()?;
    match serde_json::from_str(&text) {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::warn!(file = %path.display(), "ignoring an unreadable cache file: {e}");
            None
        }
    }
}

fn write_cache(path: &Path, cache: &Cache) -> std::io::Result<()> {
    // Written beside and renamed over: a crash never leaves half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(cache)?)?;
    std::fs::rename(&tmp, path)
}

/// The name a shared config's errors carry.
fn shared_name(keys: &Keys, revision: i64) -> String {
    format!("etcd {}@{revision}", keys.config())
}

/// The routing config at start, and where it came from.
pub struct Start {
    /// The control plane, to hand to the app.
    pub control: Arc<Control>,
    /// The config to serve first.
    pub validated: Validated,
}

impl Control {
    /// Connects (once, within the configured timeout) and picks the config
    /// to start from: etcd's, else the cache file's, else the local
    /// file's own routing sections; with none of them, an error that says
    /// what to do.
    pub fn start(local: Validated) -> anyhow::Result<Start> {
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
        let id = settings.id.clone().unwrap_or_else(|| default_id(&local));
        let control = Arc::new(Control {
            client,
            keys,
            id,
            settings,
            connected: AtomicBool::new(false),
            inner: Mutex::new(Inner {
                local: local.clone(),
                cache: Cache::default(),
                source: Source::LocalFile,
                rejected: None,
                disconnected_since: None,
                last_error: None,
                lease: None,
                reconnects: 0,
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
                    .and_then(read_cache)
                    .filter(|c| c.prefix == control.keys.prefix());
                (cached.unwrap_or_default(), Source::Cache)
            }
        };
        let validated = match &cache.config {
            Some(applied) => match control.combine(&local, applied) {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::error!("{e:#}");
                    control.lock().rejected = Some(Rejected {
                        key: "config".into(),
                        revision: applied.revision,
                        error: format!("{e:#}"),
                    });
                    None
                }
            },
            None => None,
        };
        let (validated, source) = match validated {
            Some(v) => (v, source),
            None if local.has_backends() => {
                tracing::warn!(
                    "no routing config from {} ({}): serving {}'s own backends",
                    control.keys.config(),
                    source.name(),
                    local.file
                );
                (local.clone(), Source::LocalFile)
            }
            None => anyhow::bail!(
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
        {
            let mut inner = control.lock();
            inner.source = source;
            inner.cache = Cache {
                prefix: control.keys.prefix().to_string(),
                config: cache.config.filter(|_| source != Source::LocalFile),
                rollout: cache.rollout,
            };
        }
        Ok(Start { control, validated })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The local file with the shared routing config in place of its own.
    fn combine(&self, local: &Validated, applied: &Applied) -> anyhow::Result<Validated> {
        let name = shared_name(&self.keys, applied.revision);
        let routing = parse_shared(&applied.text, &name)?;
        Ok(local.with_shared(routing, &name)?)
    }

    /// What a reload of the local file serves: the file's local sections
    /// with the applied shared config (the file's own routing sections when
    /// none is applied).
    pub fn effective(&self, local: Validated) -> anyhow::Result<Validated> {
        let applied = self.lock().cache.config.clone();
        let v = match &applied {
            Some(a) => self.combine(&local, a)?,
            None => local.clone(),
        };
        self.lock().local = local;
        Ok(v)
    }

    /// The rollout set through the `rollout` key, if any: it wins over the
    /// config's `global_bp` and `scopes`, across config changes.
    pub fn rollout(&self) -> Option<Rollout> {
        let text = self.lock().cache.rollout.clone()?;
        parse_rollout(text.text.as_bytes()).ok()
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
        })
    }

    /// (config revision, rollout revision, rejected count is kept by the
    /// metrics) for the metrics.
    pub fn revisions(&self) -> (i64, i64) {
        let inner = self.lock();
        (
            inner.cache.config.as_ref().map_or(0, |a| a.revision),
            inner.cache.rollout.as_ref().map_or(0, |a| a.revision),
        )
    }

    fn registration(&self) -> Registration {
        let inner = self.lock();
        Registration {
            id: self.id.clone(),
            scope: self.settings.scope.clone(),
            config_revision: match inner.source {
                Source::LocalFile => 0,
                _ => inner.cache.config.as_ref().map_or(0, |a| a.revision),
            },
            rollout_revision: inner.cache.rollout.as_ref().map_or(0, |a| a.revision),
            rejected: inner.rejected.clone(),
            listen: inner.local.listen.iter().map(|a| a.to_string()).collect(),
            pid: std::process::id(),
        }
    }

    /// Writes this router's registration under its lease (when it has
    /// one).
    fn register(&self) -> Result<(), EtcdError> {
        let Some(lease) = self.lock().lease else {
            return Ok(());
        };
        let body = serde_json::to_vec(&self.registration()).unwrap_or_default();
        self.client
            .put(&self.keys.router(&self.id), &body, Some(lease))
            .map(drop)
    }

    fn save(&self) {
        let Some(path) = &self.settings.cache_file else {
            return;
        };
        let cache = self.lock().cache.clone();
        if let Err(e) = write_cache(path, &cache) {
            tracing::warn!(file = %path.display(), "cannot write the cache file: {e}");
        }
    }

    /// Applies a new value of the `config` key (skipped when already
    /// applied): validated as a local reload is, swapped in whole, or
    /// rejected with the error while the running state serves on.
    fn apply_config(&self, app: &App, kv: Kv) {
        let applied = Applied::of(&kv);
        {
            let inner = self.lock();
            if inner.source != Source::LocalFile && inner.cache.config.as_ref() == Some(&applied) {
                return;
            }
        }
        let _one = app.rebuilding();
        let local = self.lock().local.clone();
        let result = self.combine(&local, &applied).and_then(|v| {
            let discovered = app.discovery.discovered(&v);
            let state = crate::state::RoutingState::build(
                v,
                &app.health,
                &app.metrics,
                &discovered,
                Some(&app.state()),
            )?;
            app.swap(state);
            Ok(())
        });
        match result {
            Ok(()) => {
                tracing::info!(
                    revision = applied.revision,
                    "applied {}",
                    self.keys.config()
                );
                app.metrics.reloaded(true);
                let mut inner = self.lock();
                inner.cache.config = Some(applied);
                inner.source = Source::Etcd;
                inner.rejected = None;
            }
            Err(e) => {
                app.metrics.reloaded(false);
                self.reject(app, "config", applied.revision, e);
                return;
            }
        }
        self.save();
    }

    /// Records a refused value of `key` (`config` or `rollout`): logged,
    /// counted, shown in `/status` and the registration; the running state
    /// serves on.
    fn reject(&self, app: &App, key: &str, revision: i64, e: anyhow::Error) {
        tracing::error!(
            revision,
            "rejected {}{key}, keeping the running state: {e:#}",
            self.keys.prefix()
        );
        app.metrics.control_rejected();
        self.lock().rejected = Some(Rejected {
            key: key.into(),
            revision,
            error: format!("{e:#}"),
        });
    }

    /// Applies a new value of the `rollout` key; a deleted key gives the
    /// config's own rollout back.
    fn apply_rollout(&self, app: &App, kv: Option<Kv>) {
        let Some(kv) = kv else {
            if self.lock().cache.rollout.take().is_some() {
                tracing::info!(
                    "{} deleted: the config's rollout applies",
                    self.keys.rollout()
                );
                if let Err(e) = app.rebuild() {
                    tracing::error!("cannot rebuild after the rollout was deleted: {e:#}");
                }
                self.save();
            }
            return;
        };
        let applied = Applied::of(&kv);
        if self.lock().cache.rollout.as_ref() == Some(&applied) {
            return;
        }
        let result = parse_rollout(applied.text.as_bytes())
            .map_err(anyhow::Error::from)
            .and_then(|r| {
                let state = app.state();
                let m = state.plan.table.migration().with_context(|| {
                    format!(
                        "no migration in the running config: add [migration] to {} first",
                        self.keys.config()
                    )
                })?;
                m.set_rollout(r);
                Ok(())
            });
        match result {
            Ok(()) => {
                tracing::info!(
                    revision = applied.revision,
                    "applied {}",
                    self.keys.rollout()
                );
                let mut inner = self.lock();
                inner.cache.rollout = Some(applied);
                if inner.rejected.as_ref().is_some_and(|r| r.key == "rollout") {
                    inner.rejected = None;
                }
            }
            Err(e) => {
                self.reject(app, "rollout", applied.revision, e);
                return;
            }
        }
        self.save();
    }

    fn apply(&self, app: &App, cache: Cache) {
        if let Some(c) = cache.config {
            self.apply_config(
                app,
                Kv {
                    key: self.keys.config(),
                    value: c.text.into_bytes(),
                    mod_revision: c.revision,
                },
            );
        }
        self.apply_rollout(
            app,
            cache.rollout.map(|r| Kv {
                key: self.keys.rollout(),
                value: r.text.into_bytes(),
                mod_revision: r.revision,
            }),
        );
    }

    /// One watch session: read both keys, apply them, then apply each
    /// change as it comes. Returns on an etcd error (the caller backs off)
    /// or when the watch must start over (compaction).
    fn session(&self, app: &App) -> Result<(), EtcdError> {
        let (cache, revision) = self.read_both()?;
        self.reconnected();
        self.apply(app, cache);
        // What etcd holds now is what a restart without etcd starts from.
        self.save();
        let _ = self.register();
        let (from, to) = self.keys.watch_range();
        let mut next = revision + 1;
        let mut watch = self.client.watch(&from, &to, next)?;
        loop {
            match watch.next_batch()? {
                Some(batch) => {
                    for e in batch.events {
                        if e.kv.key == self.keys.config() {
                            if !e.deleted {
                                self.apply_config(app, e.kv);
                            } else {
                                tracing::warn!(
                                    "{} deleted: keeping the running config",
                                    self.keys.config()
                                );
                            }
                        } else if e.kv.key == self.keys.rollout() {
                            self.apply_rollout(app, (!e.deleted).then_some(e.kv));
                        }
                    }
                    next = next.max(batch.revision + 1);
                    let _ = self.register();
                    self.reconnected();
                }
                // Silent for watch_idle, or etcd went away: open it again
                // from where it was (an error here ends the session).
                None => {
                    watch = self.client.watch(&from, &to, next)?;
                    self.reconnected();
                }
            }
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let (min, max) = self.settings.retry;
        let exp = min.saturating_mul(1 << attempt.min(16)).min(max);
        // Full jitter over the upper half: routers that lost etcd together
        // do not come back together.
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() as u64);
        let half = exp / 2;
        half + Duration::from_nanos(nanos % (half.as_nanos() as u64 + 1))
    }

    /// The watcher: sessions until the process ends.
    fn watch_forever(&self, app: &App) {
        let mut attempt = 0;
        loop {
            match self.session(app) {
                Ok(()) => attempt = 0,
                Err(EtcdError::Compacted { .. }) => {
                    tracing::warn!("watch revision compacted: reading the keys again");
                    attempt = 0;
                }
                Err(e) => {
                    if self.is_connected() {
                        tracing::warn!("lost etcd, serving the last applied config: {e}");
                    }
                    self.disconnected(&e);
                    std::thread::sleep(self.backoff(attempt));
                    attempt += 1;
                }
            }
        }
    }

    /// The lease keeper: registers under a lease and renews it every third
    /// of its TTL; a lost lease is granted again.
    fn lease_forever(&self) {
        let ttl = self.settings.lease_ttl_s as i64;
        let period = Duration::from_millis(self.settings.lease_ttl_s * 1000 / 3);
        let mut attempt = 0;
        loop {
            let lease = self.lock().lease;
            let result = match lease {
                None => self.client.grant(ttl).and_then(|id| {
                    self.lock().lease = Some(id);
                    self.register()
                }),
                Some(id) => self.client.keep_alive(id).map(|left| {
                    if left == 0 {
                        self.lock().lease = None;
                    }
                }),
            };
            match result {
                Ok(()) => {
                    attempt = 0;
                    // Either thread's last call says whether etcd answers.
                    self.reconnected();
                    std::thread::sleep(if self.lock().lease.is_some() {
                        period
                    } else {
                        Duration::ZERO
                    });
                }
                Err(e) => {
                    self.disconnected(&e);
                    std::thread::sleep(self.backoff(attempt));
                    attempt += 1;
                }
            }
        }
    }
}

/// The background service that runs the watcher and the lease keeper.
pub struct ControlService {
    /// Shared state.
    pub app: Arc<App>,
}

#[async_trait]
impl BackgroundService for ControlService {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let Some(control) = self.app.control.clone() else {
            return;
        };
        let (app, c) = (self.app.clone(), control.clone());
        let _ = std::thread::Builder::new()
            .name("ketama etcd watch".into())
            .spawn(move || c.watch_forever(&app));
        let c = control.clone();
        let _ = std::thread::Builder::new()
            .name("ketama etcd lease".into())
            .spawn(move || c.lease_forever());
        let _ = shutdown.changed().await;
        // The registration goes with the lease; a clean stop says so at
        // once instead of after the TTL.
        let lease = control.lock().lease;
        if let Some(id) = lease {
            let _ = tokio::task::spawn_blocking(move || control.client.revoke(id)).await;
        }
    }
}
