//! The router's shared root: the current routing state (swapped whole on
//! reload) and what survives reloads (health, counters).

use std::sync::Arc;

use arc_swap::ArcSwap;
use ketama_config::{ConfigError, Validated};

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
    /// Where reloads read the config from (`None`: the built-in demo text).
    pub config_path: Option<std::path::PathBuf>,
    /// The demo's config text, for reloads without a file.
    pub config_text: Option<String>,
}

impl App {
    /// Builds the app from a validated config.
    pub fn new(
        v: Validated,
        config_path: Option<std::path::PathBuf>,
        config_text: Option<String>,
    ) -> Result<Self, ConfigError> {
        let (health, metrics) = (HealthRegistry::default(), Metrics::default());
        let state = RoutingState::build(v, &health, &metrics)?;
        Ok(App {
            state: ArcSwap::from_pointee(state),
            health,
            metrics,
            config_path,
            config_text,
        })
    }

    /// The current routing state (a reference count; no lock).
    pub fn state(&self) -> Arc<RoutingState> {
        self.state.load_full()
    }

    /// Replaces the routing state; requests in flight keep the one they
    /// started with.
    pub fn swap(&self, state: RoutingState) {
        self.state.store(Arc::new(state));
    }
}
