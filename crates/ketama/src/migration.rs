//! Ring migrations: the old and the new ring side by side, each key routed
//! by one of them according to a rollout in basis points.
//!
//! # The decision
//!
//! A key goes to the new ring when its *rollout bucket* is below the
//! rollout's basis points (0 to 10,000) for the router's scope:
//!
//! ```text
//! h      = FNV-1a 64 of the key bytes
//!          (offset 0xcbf29ce484222325, prime 0x100000001b3)
//! m      = SplitMix64 finalizer of h:
//!          z = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
//!          z = (z ^ (z >> 27)) * 0x94d049bb133111eb
//!          m = z ^ (z >> 31)                  (wrapping u64 arithmetic)
//! bucket = ((m >> 32) * 10_000) >> 32         (0 ..= 9_999)
//! new    = bucket < bp
//! ```
//!
//! This is fixed: every process, machine and release computes the same
//! bucket for a key, so a fleet agrees on which keys have moved. It uses no
//! CRC-32, so it does not correlate with where the key lands on either ring.
//! It is monotone: raising `bp` only moves keys from the old ring to the
//! new, lowering it (rollback) moves exactly those keys back; 0 is the old
//! ring for every key and 10,000 the new ring for every key.
//!
//! # Live changes
//!
//! The rollout sits behind an `ArcSwap`: [`Migration::set_rollout`] swaps
//! it from any thread while lookups read it without a lock.

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;

use crate::mix::{fnv1a64, mix64};
use crate::version::Version;
use crate::{Node, Ring};

/// Basis points: 1/100 of a percent; 10,000 is everything.
pub const FULL: u16 = 10_000;

/// The rollout bucket of a key, 0 to 9,999; see the module docs.
pub fn rollout_bucket(key: &[u8]) -> u16 {
    (((mix64(fnv1a64(key)) >> 32) * FULL as u64) >> 32) as u16
}

/// The share of keys routed by the new ring, in basis points: globally and
/// per scope (a data center name), the scope's value overriding.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rollout {
    global_bp: u16,
    scopes: HashMap<String, u16>,
}

/// A basis-point value above 10,000.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("rollout {bp} for {scope} is over 10000 basis points (100%): give 0 to 10000")]
pub struct BadRollout {
    /// The value.
    pub bp: u32,
    /// `global` or `scope NAME`.
    pub scope: String,
}

impl Rollout {
    /// A rollout of `global_bp` everywhere.
    pub fn new(global_bp: u32) -> Result<Self, BadRollout> {
        Ok(Rollout {
            global_bp: check(global_bp, "global")?,
            scopes: HashMap::new(),
        })
    }

    /// Overrides the rollout for one scope.
    pub fn with_scope(mut self, scope: impl Into<String>, bp: u32) -> Result<Self, BadRollout> {
        let scope = scope.into();
        let bp = check(bp, &format!("scope {scope}"))?;
        self.scopes.insert(scope, bp);
        Ok(self)
    }

    /// The global basis points.
    pub fn global_bp(&self) -> u16 {
        self.global_bp
    }

    /// The per-scope overrides.
    pub fn scopes(&self) -> &HashMap<String, u16> {
        &self.scopes
    }

    /// The basis points in force for a scope (`None`: global).
    pub fn bp_for(&self, scope: Option<&str>) -> u16 {
        scope
            .and_then(|s| self.scopes.get(s).copied())
            .unwrap_or(self.global_bp)
    }
}

fn check(bp: u32, scope: &str) -> Result<u16, BadRollout> {
    if bp > FULL as u32 {
        return Err(BadRollout {
            bp,
            scope: scope.to_string(),
        });
    }
    Ok(bp as u16)
}

/// An old and a new ring and the rollout between them. It decides which
/// ring a key uses; [`RouteTable`](crate::RouteTable) makes the whole
/// routing decision with it (ring, labels, failover).
///
/// Cost per decision: one FNV-1a over the key and a lock-free load of the
/// rollout. No counters: callers count what they serve.
#[derive(Debug)]
pub struct Migration {
    old: Arc<Ring>,
    new: Arc<Ring>,
    rollout: ArcSwap<Rollout>,
}

impl Migration {
    /// Starts a migration from `old` to `new` at `rollout`.
    pub fn new(old: Arc<Ring>, new: Arc<Ring>, rollout: Rollout) -> Self {
        Migration {
            old,
            new,
            rollout: ArcSwap::from_pointee(rollout),
        }
    }

    /// The ring being replaced.
    pub fn old(&self) -> &Arc<Ring> {
        &self.old
    }

    /// The ring being rolled out.
    pub fn new_ring(&self) -> &Arc<Ring> {
        &self.new
    }

    /// The rollout in force.
    pub fn rollout(&self) -> Arc<Rollout> {
        self.rollout.load_full()
    }

    /// Replaces the rollout; lookups on other threads see it at once, and
    /// never wait for it.
    pub fn set_rollout(&self, rollout: Rollout) {
        self.rollout.store(Arc::new(rollout));
    }

    /// Which ring routes `key` in `scope` (`None`: the global rollout).
    #[inline]
    pub fn version(&self, key: &[u8], scope: Option<&str>) -> Version {
        let bp = self.rollout.load().bp_for(scope);
        if rollout_bucket(key) < bp {
            Version::New
        } else {
            Version::Old
        }
    }

    /// The ring for a version (`Only` is the old ring).
    pub fn ring(&self, v: Version) -> &Arc<Ring> {
        match v {
            Version::Only | Version::Old => &self.old,
            Version::New => &self.new,
        }
    }

    /// The node for `key` in `scope` and the ring version that chose it
    /// (`None` for the node when that ring has no serving node).
    pub fn node(&self, key: &[u8], scope: Option<&str>) -> (Option<&Node>, Version) {
        let v = self.version(key, scope);
        (self.ring(v).node(key), v)
    }
}

/// For each rollout in `steps` (basis points), the expected share of the
/// keyspace whose server changes against the old ring, from the share
/// moved between the rings (exact: [`crate::analysis::migration_plan`];
/// estimated: [`crate::analysis::diff_sampled`]). `O(steps)`.
pub fn plan_for(moved: f64, steps: &[u16]) -> Vec<(u16, f64)> {
    steps
        .iter()
        .map(|&bp| (bp, bp as f64 / FULL as f64 * moved))
        .collect()
}
