//! What a background service is: a task that runs for the process's life
//! on the control runtime ([`crate::process`]) until the process stops
//! (health checks, discovery, etcd control, reloads, the access log's
//! reopening, the cache totals).

use async_trait::async_trait;

/// Whether the process is stopping: a service's wait for its end.
pub type ShutdownWatch = tokio::sync::watch::Receiver<bool>;

/// A service that runs for the process's life on the control runtime.
#[async_trait]
pub trait Background: Send + Sync + 'static {
    /// Runs until `shutdown` says stop.
    async fn start(&self, shutdown: ShutdownWatch);
}
