//! The router's shared root: the current routing state (swapped whole on
//! reload) and what survives reloads (health, counters).

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use ketama_config::{ConfigError, Validated};

use crate::discovery::DiscoveryState;
use crate::health::HealthRegistry;
use crate::metrics::Metrics;
use crate::state::RoutingState;

/// The router's shared state.
#[derive(Debug)]
pub struct App {
    state: ArcSwap<RoutingState>,
    /// Backend health by server.
    pub health: HealthRegistry,
    /// Counters, never reset while the process runs.
    pub metrics: Metrics,
    /// What the discovery sources found, kept across reloads.
    pub discovery: DiscoveryState,
    /// Where reloads read the config from (`None`: the built-in demo text).
    pub config_path: Option<std::path::PathBuf>,
    /// The demo's config text, for reloads without a file.
    pub config_text: Option<String>,
    /// The settings the process started with that only a restart can
    /// change, by key.
    fixed: Vec<(&'static str, String)>,
    /// The keys whose running value differs from the config's, since the
    /// last reload.
    restart_needed: Mutex<Vec<&'static str>>,
    /// Steering through etcd, with `[control]`.
    pub control: Option<Arc<crate::control::Control>>,
    /// Held from reading the running state to swapping the new one by
    /// every rebuild (reload, etcd change, discovery), so that two never
    /// interleave and the older one wins.
    rebuilding: Mutex<()>,
}

/// The settings a reload cannot change (the listeners and runtimes are
/// built once), as (key, value) pairs to compare.
pub fn fixed_settings(v: &Validated) -> Vec<(&'static str, String)> {
    let s = &v.config.server;
    vec![
        ("server.listen", format!("{:?}", v.listen)),
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

impl App {
    /// Builds the app from a validated config, without discovered backends.
    pub fn new(
        v: Validated,
        config_path: Option<std::path::PathBuf>,
        config_text: Option<String>,
    ) -> Result<Self, ConfigError> {
        Self::with_discovery(v, config_path, config_text, DiscoveryState::default())
    }

    /// Builds the app from a validated config and what its discovery
    /// sources found so far.
    pub fn with_discovery(
        v: Validated,
        config_path: Option<std::path::PathBuf>,
        config_text: Option<String>,
        discovery: DiscoveryState,
    ) -> Result<Self, ConfigError> {
        let (health, metrics) = (HealthRegistry::default(), Metrics::default());
        for (source, result, n) in discovery.resolution_counts() {
            metrics.discovery_resolved(&source, result, n);
        }
        let fixed = fixed_settings(&v);
        let discovered = discovery.discovered(&v);
        let state = RoutingState::build(v, &health, &metrics, &discovered, None)?;
        crate::memory::return_free_memory();
        Ok(App {
            state: ArcSwap::from_pointee(state),
            health,
            metrics,
            discovery,
            config_path,
            config_text,
            fixed,
            restart_needed: Mutex::new(Vec::new()),
            control: None,
            rebuilding: Mutex::new(()),
        })
    }

    /// Compares a config's restart-only settings with the running ones;
    /// remembers and returns the keys that differ.
    pub fn note_restart_needed(&self, v: &Validated) -> Vec<&'static str> {
        let keys: Vec<&'static str> = fixed_settings(v)
            .into_iter()
            .zip(&self.fixed)
            .filter(|(new, old)| new.1 != old.1)
            .map(|(new, _)| new.0)
            .collect();
        *self
            .restart_needed
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = keys.clone();
        keys
    }

    /// The keys that changed in the config but need a restart to apply.
    pub fn restart_needed(&self) -> Vec<&'static str> {
        self.restart_needed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Attaches the control plane; the rollout set through etcd applies
    /// from now on, to this state and every one after.
    pub fn with_control(mut self, control: Arc<crate::control::Control>) -> Self {
        self.control = Some(control);
        self.keep_fleet_rollout(&self.state());
        self
    }

    /// The rollout set through etcd wins over the config's own, so that a
    /// config change or a rebuild never resets it.
    fn keep_fleet_rollout(&self, state: &RoutingState) {
        let rollout = self.control.as_ref().and_then(|c| c.rollout());
        if let (Some(r), Some(m)) = (rollout, state.plan.table.migration()) {
            m.set_rollout(r);
        }
    }

    /// Serialises rebuilds: hold the guard from reading the running state
    /// (or the config) to the swap.
    pub fn rebuilding(&self) -> std::sync::MutexGuard<'_, ()> {
        self.rebuilding.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Builds the routing state again from the running config (the
    /// rollout back to the config's, unless etcd sets one).
    pub fn rebuild(&self) -> anyhow::Result<()> {
        let _one = self.rebuilding();
        let old = self.state();
        let v = old.validated.clone();
        let discovered = self.discovery.discovered(&v);
        let state = RoutingState::build(v, &self.health, &self.metrics, &discovered, Some(&old))?;
        drop(old);
        self.swap(state);
        Ok(())
    }

    /// The current routing state (a reference count; no lock).
    pub fn state(&self) -> Arc<RoutingState> {
        self.state.load_full()
    }

    /// Replaces the routing state; requests in flight keep the one they
    /// started with. The old state is dropped here when nothing else holds
    /// it, and the allocator's free pages (the build's scratch, the old
    /// rings) go back to the system at once.
    pub fn swap(&self, state: RoutingState) {
        self.keep_fleet_rollout(&state);
        drop(self.state.swap(Arc::new(state)));
        crate::memory::return_free_memory();
    }
}
