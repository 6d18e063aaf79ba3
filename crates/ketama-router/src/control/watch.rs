//! The watcher: read both keys, hand each new value to the routing
//! state's owner, watch from the next revision; a lost or compacted watch
//! reads both again. Every change goes through
//! [`RoutingCell::replace`], which decides what it changes.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ketama_config::parse_rollout;
use ketama_fleet::etcd::{EtcdError, Kv};
use ketama_fleet::Rejected;

use super::cache::{Applied, Cache};
use super::{Control, Source};
use crate::cell::{Refused, RoutingCell, Trigger};
use crate::metrics::Metrics;

/// What the watcher changes: the routing state's owner and the counters.
pub(super) struct Sink<'a> {
    pub cell: &'a RoutingCell,
    pub metrics: &'a Metrics,
}

impl Control {
    /// Applies a new value of the `config` key (skipped when already
    /// applied): validated as a local reload is, swapped in whole, or
    /// rejected with the error while the running state serves on.
    fn apply_config(&self, sink: &Sink<'_>, kv: Kv) {
        let applied = Applied::of(&kv);
        {
            let inner = self.lock();
            if inner.source != Source::LocalFile && inner.cache.config.as_ref() == Some(&applied) {
                return;
            }
        }
        let trigger = Trigger::EtcdConfig {
            text: applied.text.clone(),
            name: self.shared_name(applied.revision),
        };
        match sink.cell.replace(trigger) {
            Ok(_) => {
                tracing::info!(
                    revision = applied.revision,
                    "applied {}",
                    self.keys.config()
                );
                let mut inner = self.lock();
                inner.cache.config = Some(applied);
                inner.source = Source::Etcd;
                inner.rejected = None;
            }
            Err(e) => {
                self.reject(sink, "config", applied.revision, e);
                return;
            }
        }
        self.save();
    }

    /// Records a refused value of `key` (`config` or `rollout`): logged,
    /// counted, shown in `/status` and the registration; the running state
    /// serves on.
    fn reject(&self, sink: &Sink<'_>, key: &str, revision: i64, e: Refused) {
        let error = match e {
            Refused::NoMigration => format!(
                "no migration in the running config: add [migration] to {} first",
                self.keys.config()
            ),
            e => format!("{e:#}"),
        };
        tracing::error!(
            revision,
            "rejected {}{key}, keeping the running state: {error}",
            self.keys.prefix()
        );
        sink.metrics.control_rejected();
        self.lock().rejected = Some(Rejected {
            key: key.into(),
            revision,
            error,
        });
    }

    /// Applies a new value of the `rollout` key; a deleted key gives the
    /// config's own rollout back.
    fn apply_rollout(&self, sink: &Sink<'_>, kv: Option<Kv>) {
        let Some(kv) = kv else {
            if self.lock().cache.rollout.take().is_some() {
                tracing::info!(
                    "{} deleted: the config's rollout applies",
                    self.keys.rollout()
                );
                if let Err(e) = sink.cell.replace(Trigger::EtcdRollout(None)) {
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
        let result = match parse_rollout(applied.text.as_bytes()) {
            Ok(r) => sink.cell.replace(Trigger::EtcdRollout(Some(r))),
            Err(e) => Err(Refused::Config(e.into())),
        };
        match result {
            Ok(_) => {
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
                self.reject(sink, "rollout", applied.revision, e);
                return;
            }
        }
        self.save();
    }

    fn apply(&self, sink: &Sink<'_>, cache: Cache) {
        if let Some(c) = cache.config {
            self.apply_config(
                sink,
                Kv {
                    key: self.keys.config(),
                    value: c.text.into_bytes(),
                    mod_revision: c.revision,
                    lease: 0,
                },
            );
        }
        self.apply_rollout(
            sink,
            cache.rollout.map(|r| Kv {
                key: self.keys.rollout(),
                value: r.text.into_bytes(),
                mod_revision: r.revision,
                lease: 0,
            }),
        );
    }

    /// One watch session: read both keys, apply them, then apply each
    /// change as it comes. Returns on an etcd error (the caller backs off)
    /// or when the watch must start over (compaction).
    fn session(&self, sink: &Sink<'_>) -> Result<(), EtcdError> {
        let (cache, revision) = self.read_both()?;
        self.reconnected();
        self.apply(sink, cache);
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
                                self.apply_config(sink, e.kv);
                            } else {
                                tracing::warn!(
                                    "{} deleted: keeping the running config",
                                    self.keys.config()
                                );
                            }
                        } else if e.kv.key == self.keys.rollout() {
                            self.apply_rollout(sink, (!e.deleted).then_some(e.kv));
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

    /// How long to wait before attempt `attempt` (from 0) after an error:
    /// exponential from `retry_min_ms` to `retry_max_ms`, with jitter.
    pub(super) fn backoff(&self, attempt: u32) -> Duration {
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
    pub(super) fn watch_forever(&self, sink: &Sink<'_>) {
        let mut attempt = 0;
        loop {
            match self.session(sink) {
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
}
