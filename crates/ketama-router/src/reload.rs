//! Reloads, by SIGHUP or `POST /reload`: the config is read again and the
//! routing state rebuilt by its owner ([`RoutingCell::replace`] with
//! [`Trigger::Reload`]); a bad config is rejected with its error and the
//! running state keeps serving.

use std::sync::Arc;

use crate::service::Background;
use crate::service::ShutdownWatch;
use async_trait::async_trait;

use crate::cell::{Refused, RoutingCell, Trigger};
use crate::signals::Early;

/// Re-reads the config and swaps the routing state; on error the running
/// state stays and the error is returned. Everything but the settings
/// [`fixed_settings`](crate::cell::fixed_settings) lists applies (the
/// admin token and `auth` included, from the next request); those that
/// changed are returned, logged and shown in `/status` as needing a
/// restart (see the docs' graceful upgrade).
pub fn reload(cell: &RoutingCell) -> Result<Vec<&'static str>, Refused> {
    let result = cell.replace(Trigger::Reload).map(|c| c.restart_needed);
    match &result {
        Ok(restart) if restart.is_empty() => tracing::info!("config reloaded"),
        Ok(restart) => tracing::warn!(
            restart_needed = ?restart,
            "config reloaded; these settings changed but apply only after a restart (ketama-router --upgrade)"
        ),
        Err(e) => tracing::error!("config reload rejected, keeping the running config: {e:#}"),
    }
    result
}

/// Reloads the config on SIGHUP; a SIGHUP that arrived during start-up
/// is applied as one reload when this service starts.
pub struct SighupReloader {
    /// The routing state's owner.
    pub cell: Arc<RoutingCell>,
    /// What the early handlers saw.
    pub early: Early,
}

#[async_trait]
impl Background for SighupReloader {
    async fn start(&self, mut shutdown: ShutdownWatch) {
        let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
        if self.early.take_hup() {
            tracing::info!("SIGHUP arrived during start-up: reloading once now");
            let cell = self.cell.clone();
            let _ = tokio::task::spawn_blocking(move || reload(&cell)).await;
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
                    let cell = self.cell.clone();
                    // The ring build is CPU work: off the runtime's threads.
                    let _ = tokio::task::spawn_blocking(move || reload(&cell)).await;
                }
                _ = shutdown.changed() => return,
            }
        }
    }
}
