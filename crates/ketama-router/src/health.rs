//! Backend health: the state of each backend as active checks
//! ([`crate::checker`]) and as nginx's `max_fails`/`fail_timeout`, each
//! backend's state kept by server string across reloads. An unhealthy
//! backend is skipped by lookups; the ring is not rebuilt, so the keys of
//! healthy backends never move.
//!
//! Failures of one backend are logged the first time, then at most once
//! per [`LOG_EVERY`] with the count of those not logged, so a backend down
//! under load writes a few lines instead of one per request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How often repeated failures of one backend are logged.
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// Milliseconds since the process's first call: a monotonic clock in an
/// atomic.
pub fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

/// A backend's health.
#[derive(Debug)]
pub struct Health {
    healthy: AtomicBool,
    successes: AtomicU32,
    failures: AtomicU32,
    /// Passive: failed attempts in the current window, its start, and the
    /// time until which the backend is out of rotation.
    passive_fails: AtomicU32,
    window_start: AtomicU64,
    out_until: AtomicU64,
    /// Failure logging: when the last line was written and how many
    /// failures went unlogged since.
    logged_at: AtomicU64,
    unlogged: AtomicU64,
    /// When the active checks last flipped it or a failure took it out
    /// ([`now_ms`]; 0: never).
    changed_at: AtomicU64,
    /// The last active check: when ([`now_ms`]; 0: none yet), and its
    /// result and duration (bit 31: passed; the rest: milliseconds).
    checked_at: AtomicU64,
    check: AtomicU32,
    /// Failed attempts recorded since start (passive).
    failed_attempts: AtomicU64,
}

/// What [`Health::view`] reports, for the admin page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthView {
    /// Whether it takes traffic.
    pub healthy: bool,
    /// Milliseconds since it last changed between serving and not
    /// (`None`: it never changed since start).
    pub since_ms: Option<u64>,
    /// The last active check: passed, its duration and how long ago, in
    /// milliseconds.
    pub last_check: Option<(bool, u32, u64)>,
    /// Failed attempts since start (connect errors, timeouts, broken
    /// responses).
    pub failed_attempts: u64,
}

impl Default for Health {
    fn default() -> Self {
        Health {
            healthy: AtomicBool::new(true),
            successes: AtomicU32::new(0),
            failures: AtomicU32::new(0),
            passive_fails: AtomicU32::new(0),
            window_start: AtomicU64::new(0),
            out_until: AtomicU64::new(0),
            logged_at: AtomicU64::new(0),
            unlogged: AtomicU64::new(0),
            changed_at: AtomicU64::new(0),
            checked_at: AtomicU64::new(0),
            check: AtomicU32::new(0),
            failed_attempts: AtomicU64::new(0),
        }
    }
}

impl Health {
    /// Whether its active checks pass (recent failures aside).
    #[inline]
    pub fn passes_checks(&self) -> bool {
        self.healthy.load(Relaxed)
    }

    /// Whether the backend takes traffic: its active checks pass and no
    /// recent failures took it out of rotation.
    #[inline]
    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Relaxed) && {
            let until = self.out_until.load(Relaxed);
            until == 0 || now_ms() >= until
        }
    }

    /// Records a failed attempt (connect error, timeout) as nginx does: the
    /// `max_fails`-th failure within `fail_timeout` of the first takes the
    /// backend out of rotation for `fail_timeout`. `max_fails` 0 turns it
    /// off. Returns whether this failure took it out.
    pub fn record_failure(&self, max_fails: u32, fail_timeout: Duration) -> bool {
        self.failed_attempts.fetch_add(1, Relaxed);
        if max_fails == 0 {
            return false;
        }
        let now = now_ms();
        let window = fail_timeout.as_millis() as u64;
        let start = self.window_start.load(Relaxed);
        if start == 0 || now.saturating_sub(start) >= window {
            self.window_start.store(now, Relaxed);
            self.passive_fails.store(0, Relaxed);
        }
        let fails = self.passive_fails.fetch_add(1, Relaxed) + 1;
        if fails >= max_fails {
            self.changed_at.store(now, Relaxed);
            self.out_until.store(now + window, Relaxed);
            self.passive_fails.store(0, Relaxed);
            self.window_start.store(0, Relaxed);
            return true;
        }
        false
    }

    /// Records an answered request: the failure count starts over.
    #[inline]
    pub fn record_success(&self) {
        if self.passive_fails.load(Relaxed) != 0 {
            self.passive_fails.store(0, Relaxed);
        }
    }

    /// Whether a failure should be logged now, and how many were not
    /// logged before it: the first failure, then one per [`LOG_EVERY`].
    pub fn should_log(&self) -> Option<u64> {
        let now = now_ms();
        let last = self.logged_at.load(Relaxed);
        let due = last == 0 || now.saturating_sub(last) >= LOG_EVERY.as_millis() as u64;
        if due
            && self
                .logged_at
                .compare_exchange(last, now, Relaxed, Relaxed)
                .is_ok()
        {
            return Some(self.unlogged.swap(0, Relaxed));
        }
        self.unlogged.fetch_add(1, Relaxed);
        None
    }

    /// Records a check and how long it took; flips after `up` successes
    /// or `down` failures in a row. Returns whether the state changed.
    pub fn record_check(&self, ok: bool, took: Duration, up: u32, down: u32) -> bool {
        let ms = took.as_millis().min(0x7fff_ffff) as u32;
        self.check.store(ms | (ok as u32) << 31, Relaxed);
        self.checked_at.store(now_ms(), Relaxed);
        let changed = self.record(ok, up, down);
        if changed {
            self.changed_at.store(now_ms(), Relaxed);
        }
        changed
    }

    /// What the admin page shows of it; see [`HealthView`].
    pub fn view(&self) -> HealthView {
        let now = now_ms();
        let mut changed = self.changed_at.load(Relaxed);
        let until = self.out_until.load(Relaxed);
        if until != 0 && now >= until {
            // Back in rotation when its time out ran out.
            changed = changed.max(until);
        }
        let checked = self.checked_at.load(Relaxed);
        let check = self.check.load(Relaxed);
        HealthView {
            healthy: self.is_healthy(),
            since_ms: (changed != 0).then(|| now.saturating_sub(changed)),
            last_check: (checked != 0).then(|| {
                (
                    check >> 31 == 1,
                    check & 0x7fff_ffff,
                    now.saturating_sub(checked),
                )
            }),
            failed_attempts: self.failed_attempts.load(Relaxed),
        }
    }

    /// Records a check; flips after `up` successes or `down` failures in a
    /// row. Returns whether the state changed.
    pub fn record(&self, ok: bool, up: u32, down: u32) -> bool {
        if ok {
            self.failures.store(0, Relaxed);
            let n = self.successes.fetch_add(1, Relaxed) + 1;
            n >= up && !self.healthy.swap(true, Relaxed)
        } else {
            self.successes.store(0, Relaxed);
            let n = self.failures.fetch_add(1, Relaxed) + 1;
            n >= down && self.healthy.swap(false, Relaxed)
        }
    }
}

/// Health by server string, so that a reload does not forget which
/// backends are failing.
#[derive(Debug, Default)]
pub struct HealthRegistry(Mutex<HashMap<String, Arc<Health>>>);

impl HealthRegistry {
    /// The health of `server` (new ones start healthy).
    pub fn get(&self, server: &str) -> Arc<Health> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(server.to_string())
            .or_default()
            .clone()
    }
}
