//! The lease keeper: this router's registration under
//! `PREFIX/routers/ID`, written under a lease renewed every third of its
//! TTL; a lost lease is granted again.

use std::time::Duration;

use ketama_fleet::etcd::EtcdError;
use ketama_fleet::Registration;

use super::{Control, Source};

impl Control {
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
            listen: self.listen.clone(),
            pid: std::process::id(),
        }
    }

    /// Writes this router's registration under its lease (when it has
    /// one).
    pub(super) fn register(&self) -> Result<(), EtcdError> {
        let Some(lease) = self.lock().lease else {
            return Ok(());
        };
        let body = serde_json::to_vec(&self.registration()).unwrap_or_default();
        self.client
            .put(&self.keys.router(&self.id), &body, Some(lease))
            .map(drop)
    }

    /// Registers under a lease and renews it until the process ends.
    pub(super) fn lease_forever(&self) {
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

    /// Gives the lease back (the registration goes with it at once).
    pub(super) fn revoke(&self) {
        let lease = self.lock().lease.take();
        if let Some(id) = lease {
            let _ = self.client.revoke(id);
        }
    }
}
