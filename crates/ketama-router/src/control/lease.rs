//! The lease keeper: this router's registration under
//! `PREFIX/routers/ID`, written under a lease renewed every third of its
//! TTL; a lost lease is granted again.

use std::time::{Duration, Instant};

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
            report: Some(ketama_fleet::Report {
                latency: self.metrics.duration_counts().to_vec(),
                ..crate::metrics::cache::report(&self.metrics.cache, self.settings.report_interval)
            }),
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

    /// Registers under a lease and renews it until the process ends;
    /// between renewals, writes the registration again every
    /// `report_interval` with fresh counters.
    pub(super) fn lease_forever(&self) {
        let ttl = self.settings.lease_ttl_s as i64;
        let period = Duration::from_millis(self.settings.lease_ttl_s * 1000 / 3);
        let every = self.settings.report_interval;
        let mut attempt = 0;
        let (mut renew_at, mut report_at) = (Instant::now(), Instant::now() + every);
        loop {
            let lease = self.lock().lease;
            let now = Instant::now();
            let result = match lease {
                None => self.client.grant(ttl).and_then(|id| {
                    self.lock().lease = Some(id);
                    (renew_at, report_at) = (now + period, now + every);
                    self.register()
                }),
                Some(id) if now >= renew_at => self.client.keep_alive(id).map(|left| {
                    renew_at = now + period;
                    if left == 0 {
                        self.lock().lease = None;
                    }
                }),
                Some(_) => {
                    report_at = now + every;
                    self.read_plan();
                    self.register()
                }
            };
            match result {
                Ok(()) => {
                    attempt = 0;
                    // Either thread's last call says whether etcd answers.
                    self.reconnected();
                    if self.lock().lease.is_some() {
                        let next = renew_at.min(report_at);
                        std::thread::sleep(next.saturating_duration_since(Instant::now()));
                    }
                }
                Err(e) => {
                    self.disconnected(&e);
                    std::thread::sleep(self.backoff(attempt));
                    attempt += 1;
                }
            }
        }
    }

    /// Reads the fleet's rollout plan state (once per report interval:
    /// the page shows it while a plan drives this router).
    fn read_plan(&self) {
        if let Ok((kv, _)) = self.client.get(&self.keys.plan_state()) {
            self.lock().plan = kv.and_then(|kv| serde_json::from_slice(&kv.value).ok());
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
