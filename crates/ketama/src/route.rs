//! The routing decision, in one place: key, required labels and scope in;
//! the ring version that answers and the failover order out.
//!
//! A [`RouteTable`] owns a ring (or a [`Migration`] between two) and the
//! label requirements prepared on it. [`RouteTable::route`] is the whole
//! decision for a key:
//!
//! 1. the migration's rollout picks the version (`old` or `new`; `only`
//!    without a migration) from the key and the scope;
//! 2. that ring's scheme hashes the key;
//! 3. the answer is a [`Route`]: an owned cursor over that ring's failover
//!    order, under the label requirement if one was given, each serving
//!    node once.
//!
//! A caller filters further (health, nodes already tried, load) by
//! advancing the route with [`RouteTable::next`] or
//! [`RouteTable::next_where`]; the library never decides health. A route
//! allocates nothing for its first 16 nodes and can be kept across a
//! request's retries.
//!
//! ```
//! use std::sync::Arc;
//! use ketama::{Node, Ring, RouteTable, Version};
//!
//! let ring = Arc::new(Ring::new(vec![
//!     Node::new("10.0.0.1:443", 1).with_labels(["eu"]),
//!     Node::new("10.0.0.2:443", 1).with_labels(["us"]),
//!     Node::new("10.0.0.3:443", 2).with_labels(["eu"]),
//! ])?);
//! let mut table = RouteTable::new(ring);
//! let eu = table.need(&["eu"])?;
//!
//! let mut route = table.route(b"/images/cat.jpg", Some(eu), None)?;
//! assert_eq!(route.version(), Version::Only);
//! let first = table.next(&mut route)?.expect("two eu nodes");
//! let second = table.next_where(&mut route, |n| n != first)?.expect("two eu nodes");
//! assert!(table.node(&route, first).labels().any(|l| l == "eu"));
//! assert!(table.node(&route, second).labels().any(|l| l == "eu"));
//! assert_eq!(table.next(&mut route)?, None); // only two eu nodes
//! # Ok::<(), ketama::Error>(())
//! ```

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::migration::Migration;
use crate::ring::FailoverCursor;
use crate::scheme::Probe;
use crate::version::Version;
use crate::{Node, Requirement, RequirementCache, Ring};

mod hashed;
mod keyed;

pub use hashed::PeerHash;

/// Ids that bind needs and routes to the table that made them.
static NEXT_TABLE: AtomicU64 = AtomicU64::new(1);

/// Memory a table may spend on dedicated rings for sparse label
/// combinations, as a share of its rings' point bytes.
const REQUIREMENT_SHARE: usize = 4;

/// A ring or a migration, and label requirements prepared on its rings:
/// everything a routing decision needs. See the [module docs](self).
///
/// Cost: the rings, plus per prepared label set one bit per node per ring
/// (and a dedicated ring for sets holding under 1/32 of the weight, 1/16
/// on rings without a label index, within a memory cap of a quarter of the
/// rings' point bytes by default).
#[derive(Debug)]
pub struct RouteTable {
    id: u64,
    rings: Rings,
    caches: (RequirementCache, Option<RequirementCache>),
    needs: Vec<Prepared>,
    by_labels: HashMap<Vec<String>, u32>,
}

#[derive(Debug)]
enum Rings {
    Only(Arc<Ring>),
    Migration(Migration),
}

/// One label set prepared on the old (or only) ring and the new one.
#[derive(Debug)]
struct Prepared {
    old: Arc<Requirement>,
    new: Option<Arc<Requirement>>,
}

/// A label requirement prepared on a [`RouteTable`]'s rings (see
/// [`RouteTable::need`]). A handle: copying it is free, and it works only
/// with the table that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Need {
    table: u64,
    index: u32,
}

/// One key's routing decision: the version that answers and an owned
/// cursor over that ring's failover order. Advance it with
/// [`RouteTable::next`] on the table that made it.
///
/// Cost: about 130 bytes, no allocation for the first 16 nodes walked.
#[derive(Clone, Debug)]
pub struct Route {
    table: u64,
    version: Version,
    hash: u32,
    need: Option<u32>,
    cursor: FailoverCursor,
}

impl Need {
    /// Its index among the needs prepared on its table (0, 1, ...).
    pub fn index(self) -> u32 {
        self.index
    }
}

impl Route {
    /// The label requirement the route walks under, if any.
    pub fn need(&self) -> Option<Need> {
        self.need.map(|index| Need {
            table: self.table,
            index,
        })
    }

    /// The ring version answering this key.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The key's hash under that ring's scheme (under Envoy's and gRPC's,
    /// the 32 bits that stand for the 64-bit hash the route was made with:
    /// [`Scheme::hash_key`](crate::Scheme::hash_key)).
    pub fn hash(&self) -> u32 {
        self.hash
    }
}

impl RouteTable {
    /// A table routing every key on `ring`.
    pub fn new(ring: Arc<Ring>) -> Self {
        let cap = ring.points_heap_bytes() / REQUIREMENT_SHARE;
        RouteTable {
            id: NEXT_TABLE.fetch_add(1, Relaxed),
            caches: (RequirementCache::new(ring.clone(), cap), None),
            rings: Rings::Only(ring),
            needs: Vec::new(),
            by_labels: HashMap::new(),
        }
    }

    /// A table routing each key on the old or the new ring of `migration`,
    /// as its rollout decides.
    pub fn migrating(migration: Migration) -> Self {
        let (old, new) = (
            migration.ring(Version::Old).clone(),
            migration.ring(Version::New).clone(),
        );
        let (old_cap, new_cap) = (
            old.points_heap_bytes() / REQUIREMENT_SHARE,
            new.points_heap_bytes() / REQUIREMENT_SHARE,
        );
        RouteTable {
            id: NEXT_TABLE.fetch_add(1, Relaxed),
            caches: (
                RequirementCache::new(old, old_cap),
                Some(RequirementCache::new(new, new_cap)),
            ),
            rings: Rings::Migration(migration),
            needs: Vec::new(),
            by_labels: HashMap::new(),
        }
    }

    /// Sets the memory the table may spend on dedicated rings for sparse
    /// label combinations, per ring (applies to needs prepared after).
    pub fn with_requirement_cap(mut self, bytes: usize) -> Self {
        let (old, new) = self.caches;
        self.caches = (
            RequirementCache::new(old.ring().clone(), bytes),
            new.map(|c| RequirementCache::new(c.ring().clone(), bytes)),
        );
        self
    }

    /// The table's identity (needs, routes and trackers carry it).
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// How many label requirements have been prepared on the table.
    pub fn need_count(&self) -> usize {
        self.needs.len()
    }

    /// The requirement prepared `k`-th, on a version's ring.
    ///
    /// # Panics
    /// If `k` is not below [`need_count`](Self::need_count).
    pub fn requirement_at(&self, k: usize, v: Version) -> &Requirement {
        self.prepared(k as u32, v)
    }

    /// The migration, if the table has one.
    pub fn migration(&self) -> Option<&Migration> {
        match &self.rings {
            Rings::Only(_) => None,
            Rings::Migration(m) => Some(m),
        }
    }

    /// The ring of a version (`Only` and `Old` are the same ring).
    pub fn ring(&self, v: Version) -> &Arc<Ring> {
        match &self.rings {
            Rings::Only(r) => r,
            Rings::Migration(m) => m.ring(v),
        }
    }

    /// The versions the table routes with: `[Only]`, or `[Old, New]`.
    pub fn versions(&self) -> &'static [Version] {
        match self.rings {
            Rings::Only(_) => &[Version::Only],
            Rings::Migration(_) => &[Version::Old, Version::New],
        }
    }

    /// Prepares (or finds, if already prepared) the requirement that a node
    /// carry every label in `labels`, on every ring of the table. Errors on
    /// a label a ring lacks (saying which ring) and on label requirements
    /// with schemes that cannot honour them.
    pub fn need<S: AsRef<str>>(&mut self, labels: &[S]) -> Result<Need> {
        let mut key: Vec<String> = labels.iter().map(|l| l.as_ref().to_string()).collect();
        key.sort();
        key.dedup();
        if let Some(&index) = self.by_labels.get(&key) {
            return Ok(Need {
                table: self.id,
                index,
            });
        }
        let on = |v: Version| {
            move |e: Error| match v {
                Version::New => Error::OnRing {
                    ring: v,
                    source: Box::new(e),
                },
                _ => e,
            }
        };
        let old = self.caches.0.get(&key).map_err(on(Version::Old))?;
        let new = match &self.caches.1 {
            Some(c) => Some(c.get(&key).map_err(on(Version::New))?),
            None => None,
        };
        let index = self.needs.len() as u32;
        self.needs.push(Prepared { old, new });
        self.by_labels.insert(key, index);
        Ok(Need {
            table: self.id,
            index,
        })
    }

    /// The requirement a need stands for on a version's ring.
    pub fn requirement(&self, need: Need, v: Version) -> Option<&Requirement> {
        if need.table != self.id {
            return None;
        }
        let p = self.needs.get(need.index as usize)?;
        match v {
            Version::New => p.new.as_deref(),
            _ => Some(&p.old),
        }
    }

    /// The version that routes `key` in `scope` (`None`: the global
    /// rollout): `Only` without a migration. Cost: one FNV-1a of the key
    /// with a migration, nothing without.
    #[inline]
    pub fn version(&self, key: &[u8], scope: Option<&str>) -> Version {
        match &self.rings {
            Rings::Only(_) => Version::Only,
            Rings::Migration(m) => m.version(key, scope),
        }
    }

    /// The routing decision for `key`: the version, then a failover walk on
    /// that ring from the key's hash, under `need` (none: every node
    /// eligible). Errors only on a need made by another table.
    ///
    /// Cost: the version's FNV-1a (with a migration), the scheme's key
    /// hash, one ring search; no allocation.
    #[inline]
    pub fn route(&self, key: &[u8], need: Option<Need>, scope: Option<&str>) -> Result<Route> {
        if let Some(n) = need {
            if n.table != self.id || n.index as usize >= self.needs.len() {
                return Err(Error::ForeignNeed);
            }
        }
        let version = self.version(key, scope);
        let p = self.ring(version).compat().probe(key);
        Ok(self.route_probe(version, p, need.map(|n| n.index)))
    }

    /// The route from probe `p` on `version`'s ring, under need `need`
    /// (checked by the caller).
    fn route_probe(&self, version: Version, p: Probe, need: Option<u32>) -> Route {
        let ring = self.ring(version);
        let cursor = match need {
            Some(i) => self.prepared(i, version).cursor_for_probe(p),
            None => ring.cursor_for_probe(p, ring.live()),
        };
        Route {
            table: self.id,
            version,
            hash: p.hash,
            need,
            cursor,
        }
    }

    /// The same key's route on the migration's other ring (`new` for a
    /// route on `old`, and back), under the same need: where the key would
    /// go if the rollout switched it, or, for a key the new ring routes,
    /// its previous owner. `Ok(None)` without a migration (`only`). Node
    /// indices of the answer are its ring's: compare nodes across rings by
    /// [`node`](Self::node), not by index.
    ///
    /// Cost: the other scheme's key hash and one ring search, plus one
    /// hash of the key to check it is the route's.
    ///
    /// # Errors
    /// [`Error::ForeignRoute`] for a route another table made;
    /// [`Error::KeyNotRouted`] for a key other than the route's.
    pub fn counterpart(&self, key: &[u8], route: &Route) -> Result<Option<Route>> {
        if route.table != self.id {
            return Err(Error::ForeignRoute);
        }
        let Some(other) = other_side(route.version) else {
            return Ok(None);
        };
        if self.ring(route.version).hash_key(key) != route.hash {
            return Err(Error::KeyNotRouted);
        }
        let p = self.ring(other).compat().probe(key);
        Ok(Some(self.route_probe(other, p, route.need)))
    }

    fn prepared(&self, index: u32, v: Version) -> &Requirement {
        let p = &self.needs[index as usize];
        match (v, &p.new) {
            (Version::New, Some(new)) => new,
            _ => &p.old,
        }
    }

    /// The route's next serving node (its index into the version's ring's
    /// nodes), each node once; `Ok(None)` when the walk is over: no
    /// backend is left. Cost: the points walked to reach the node.
    ///
    /// # Errors
    /// [`Error::ForeignRoute`] for a route another table made (never the
    /// same answer as "no node left").
    #[inline]
    pub fn next(&self, route: &mut Route) -> Result<Option<usize>> {
        if route.table != self.id {
            return Err(Error::ForeignRoute);
        }
        match route.need {
            Some(i) => self.prepared(i, route.version).advance(&mut route.cursor),
            None => self.ring(route.version).advance(&mut route.cursor),
        }
    }

    /// The route's next serving node for which `usable` holds: nodes it
    /// rejects are passed over (and not offered again).
    ///
    /// # Errors
    /// As [`next`](Self::next).
    #[inline]
    pub fn next_where(
        &self,
        route: &mut Route,
        mut usable: impl FnMut(usize) -> bool,
    ) -> Result<Option<usize>> {
        while let Some(n) = self.next(route)? {
            if usable(n) {
                return Ok(Some(n));
            }
        }
        Ok(None)
    }

    /// The node a route's index refers to.
    ///
    /// # Panics
    /// If `i` did not come from [`next`](Self::next) on this route.
    pub fn node(&self, route: &Route, i: usize) -> &Node {
        &self.ring(route.version).nodes()[i]
    }

    /// The first serving node of many keys at once, as [`route`](Self::route)
    /// then [`next`](Self::next) would answer: `out` is cleared and gets
    /// `(version, node index)` per key. Plain lookups (no need) go through
    /// the rings' batch search, whose memory accesses overlap.
    pub fn first_nodes<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        need: Option<Need>,
        scope: Option<&str>,
        out: &mut Vec<(Version, Option<usize>)>,
    ) -> Result<()> {
        out.clear();
        let wide = self
            .versions()
            .iter()
            .any(|&v| self.ring(v).compat().is_envoy());
        let plain = !wide
            && need.is_none_or(|n| {
                n.table == self.id
                    && self
                        .needs
                        .get(n.index as usize)
                        .is_some_and(|p| p.old.is_empty())
            });
        if !plain {
            for k in keys {
                let mut r = self.route(k.as_ref(), need, scope)?;
                out.push((r.version, self.next(&mut r)?));
            }
            return Ok(());
        }
        let versions: Vec<Version> = keys
            .iter()
            .map(|k| self.version(k.as_ref(), scope))
            .collect();
        out.extend(versions.iter().map(|&v| (v, None)));
        let mut hashes = Vec::with_capacity(keys.len());
        let mut at = Vec::with_capacity(keys.len());
        let mut found = Vec::with_capacity(keys.len());
        for &v in self.versions() {
            let ring = self.ring(v);
            hashes.clear();
            at.clear();
            for (i, k) in keys.iter().enumerate() {
                if versions[i] == v {
                    hashes.push(ring.hash_key(k.as_ref()));
                    at.push(i);
                }
            }
            ring.node_indices_for_hashes(&hashes, &mut found);
            for (&i, &n) in at.iter().zip(&found) {
                out[i].1 = n;
            }
        }
        Ok(())
    }
}

/// The migration's other ring for a route on `v`; none without one.
fn other_side(v: Version) -> Option<Version> {
    match v {
        Version::Only => None,
        Version::Old => Some(Version::New),
        Version::New => Some(Version::Old),
    }
}
