//! Reloads, by SIGHUP or `POST /reload`: re-read the config, build the new
//! routing state off the request path, swap it whole; a bad config is
//! rejected with its error and the running state keeps serving.

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::app::App;
use crate::state::RoutingState;

impl App {
    /// Re-reads the config and swaps the routing state; on error the
    /// running state stays and the error is returned. Listeners, threads
    /// and the admin listener are fixed at start; the rest applies.
    pub fn reload(&self) -> anyhow::Result<()> {
        let result = (|| {
            let v = match (&self.config_path, &self.config_text) {
                (Some(p), _) => ketama_config::load(p)?,
                (None, Some(t)) => ketama_config::parse(t, "(built-in demo config)")?,
                (None, None) => anyhow::bail!("no config to reload from"),
            };
            let state = RoutingState::build(v, &self.health, &self.metrics)?;
            self.swap(state);
            Ok(())
        })();
        match &result {
            Ok(()) => {
                self.metrics.reloaded(true);
                tracing::info!("config reloaded");
            }
            Err(e) => {
                self.metrics.reloaded(false);
                tracing::error!("config reload rejected, keeping the running config: {e:#}");
            }
        }
        result
    }
}

/// Reloads the config on SIGHUP.
pub struct SighupReloader {
    /// Shared state.
    pub app: Arc<App>,
}

#[async_trait]
impl BackgroundService for SighupReloader {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        else {
            tracing::error!("cannot listen for SIGHUP; reload through the admin API");
            return;
        };
        loop {
            tokio::select! {
                _ = hup.recv() => { let _ = self.app.reload(); }
                _ = shutdown.changed() => return,
            }
        }
    }
}
