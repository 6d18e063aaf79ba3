//! A fleet of ketama-routers steered through etcd: one routing config and
//! one rollout for every router, each router registered under a lease.
//! Shared by the router (which watches and applies) and `ketama fleet`
//! (which writes and reads), without Pingora.
//!
//! Keys under a prefix (say `/ketama/prod/`):
//!
//! | key | value |
//! |---|---|
//! | `PREFIX/config` | the routing part of a router's TOML (ring, key, backends, label rules, migration, health, balance, discovery) |
//! | `PREFIX/rollout` | the JSON of the router's `PUT /rollout` (`{"global_bp": N, "scopes": {...}}`) |
//! | `PREFIX/routers/ID` | each router's [`Registration`], under a lease: it disappears when the router dies; it carries the router's [`Report`] of cache and answer counters |
//!
//! ```no_run
//! use ketama_fleet::{etcd, Keys};
//! let client = etcd::Client::new(&etcd::Options {
//!     endpoints: vec!["http://127.0.0.1:2379".into()],
//!     timeout: std::time::Duration::from_secs(2),
//!     watch_idle: std::time::Duration::from_secs(30),
//!     ..Default::default()
//! })?;
//! let keys = Keys::new("/ketama/prod/");
//! let (rollout, _) = client.get(&keys.rollout())?;
//! println!("rollout: {:?}", rollout.map(|kv| String::from_utf8_lossy(&kv.value).into_owned()));
//! for r in ketama_fleet::registrations(&client, &keys)? {
//!     println!("{} in {:?} applied config revision {}", r.id, r.scope, r.config_revision);
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod etcd;
pub mod plan;
pub mod report;
#[cfg(feature = "testing")]
pub mod testing;

use serde::{Deserialize, Serialize};

pub use report::{Report, RingCounts};

/// The fleet's keys under one prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keys {
    prefix: String,
}

impl Keys {
    /// Keys under `prefix` (a `/` is added if it does not end with one).
    pub fn new(prefix: &str) -> Self {
        let mut prefix = prefix.to_string();
        if !prefix.ends_with('/') {
            prefix.push('/');
        }
        Keys { prefix }
    }

    /// The prefix, ending with `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The routing config's key.
    pub fn config(&self) -> String {
        format!("{}config", self.prefix)
    }

    /// The rollout's key.
    pub fn rollout(&self) -> String {
        format!("{}rollout", self.prefix)
    }

    /// The prefix of every router's registration.
    pub fn routers(&self) -> String {
        format!("{}routers/", self.prefix)
    }

    /// One router's registration key.
    pub fn router(&self, id: &str) -> String {
        format!("{}routers/{id}", self.prefix)
    }

    /// The active rollout plan, as JSON (`ketama fleet plan`).
    pub fn plan_spec(&self) -> String {
        format!("{}rollout-plan/spec", self.prefix)
    }

    /// The plan's progress ([`plan::PlanState`]).
    pub fn plan_state(&self) -> String {
        format!("{}rollout-plan/state", self.prefix)
    }

    /// The running controller's id, under its lease.
    pub fn plan_lock(&self) -> String {
        format!("{}rollout-plan/lock", self.prefix)
    }

    /// A command for the running controller (pause, resume, abort).
    pub fn plan_command(&self) -> String {
        format!("{}rollout-plan/command", self.prefix)
    }

    /// The range a router watches: from `config` to just past `rollout`.
    /// It holds both keys and nothing under `routers/` (`rollout\0` sorts
    /// before `routers`), so registrations never wake a router; a key an
    /// operator adds between the two is ignored by the watcher.
    pub fn watch_range(&self) -> (String, Vec<u8>) {
        let mut end = self.rollout().into_bytes();
        end.push(0);
        (self.config(), end)
    }
}

/// What a router writes under `PREFIX/routers/ID` while it lives.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Registration {
    /// The router's id (`[control] id`, or host name and listen address).
    pub id: String,
    /// Its scope (data center).
    pub scope: Option<String>,
    /// Mod revision of the `config` key it applied (0: none, it serves its
    /// local file's routing sections).
    pub config_revision: i64,
    /// Mod revision of the `rollout` key it applied (0: none).
    pub rollout_revision: i64,
    /// The last config revision it rejected, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<Rejected>,
    /// Its proxy listeners.
    pub listen: Vec<String>,
    /// Its process id.
    pub pid: u32,
    /// Its cumulative cache and answer counters by ring, refreshed every
    /// `[control] report_interval_ms` (absent from routers before them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub report: Option<Report>,
}

/// A change a router refused to apply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    /// The key (`config` or `rollout`).
    pub key: String,
    /// Its mod revision.
    pub revision: i64,
    /// The validation error.
    pub error: String,
}

/// Every registered router, in id order (entries that do not parse are
/// skipped: another version may have written them).
pub fn registrations(client: &etcd::Client, keys: &Keys) -> etcd::Result<Vec<Registration>> {
    let (kvs, _) = client.list(&keys.routers())?;
    Ok(kvs
        .iter()
        .filter_map(|kv| serde_json::from_slice(&kv.value).ok())
        .collect())
}
