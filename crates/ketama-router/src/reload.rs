//! Reloads, by SIGHUP or `POST /reload`: re-read the config, build the new
//! routing state off the request path, swap it whole; a bad config is
//! rejected with its error and the running state keeps serving.

use std::sync::Arc;

use async_trait::async_trait;
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;

use crate::app::App;
use crate::signals::Early;
use crate::state::RoutingState;

impl App {
    /// Re-reads the config and swaps the routing state; on error the
    /// running state stays and the error is returned. Everything but the
    /// settings [`fixed_settings`](crate::app::fixed_settings) lists
    /// applies (the admin token and `auth` included, from the next
    /// request); those that changed are returned, logged and shown in
    /// `/status` as needing a restart (see the README's graceful upgrade).
    pub fn reload(&self) -> anyhow::Result<Vec<&'static str>> {
        let result = (|| {
            let _one = self.rebuilding();
            let v = match (&self.config_path, &self.config_text) {
                (Some(p), _) => ketama_config::load(p)?,
                (None, Some(t)) => ketama_config::parse(t, "(built-in demo config)")?,
                (None, None) => anyhow::bail!("no config to reload from"),
            };
            // An etcd-steered router keeps the fleet's routing sections.
            let v = match &self.control {
                Some(c) => c.effective(v)?,
                None => v,
            };
            for w in &v.warnings {
                tracing::warn!("{w}");
            }
            let restart = self.note_restart_needed(&v);
            let discovered = self.discovery.discovered(&v);
            let state = RoutingState::build(
                v,
                &self.health,
                &self.metrics,
                &discovered,
                Some(&self.state()),
            )?;
            self.swap(state);
            Ok(restart)
        })();
        match &result {
            Ok(restart) if restart.is_empty() => {
                self.metrics.reloaded(true);
                tracing::info!("config reloaded");
            }
            Ok(restart) => {
                self.metrics.reloaded(true);
                tracing::warn!(
                    restart_needed = ?restart,
                    "config reloaded; these settings changed but apply only after a restart (ketama-router --upgrade)"
                );
            }
            Err(e) => {
                self.metrics.reloaded(false);
                tracing::error!("config reload rejected, keeping the running config: {e:#}");
            }
        }
        result
    }
}

/// Reloads the config on SIGHUP; a SIGHUP that arrived during start-up
/// is applied as one reload when this service starts.
pub struct SighupReloader {
    /// Shared state.
    pub app: Arc<App>,
    /// What the early handlers saw.
    pub early: Early,
}

#[async_trait]
impl BackgroundService for SighupReloader {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
        if self.early.take_hup() {
            tracing::info!("SIGHUP arrived during start-up: reloading once now");
            let _ = self.app.reload();
        }
        let Ok(mut hup) = hup else {
            tracing::error!("cannot listen for SIGHUP; reload through the admin API");
            return;
        };
        loop {
            tokio::select! {
                _ = hup.recv() => {
                    // The early handler saw it too; this reload covers it.
                    self.early.take_hup();
                    let _ = self.app.reload();
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}
