//! Feature subsets without a ring per combination.
//!
//! Nodes carry labels (at most 64 distinct ones per ring, one bit each in a
//! u64 mask per node). A lookup may require a set of labels; a node is
//! eligible when it carries all of them. The answer is exactly the node a
//! dedicated ring built from only the eligible nodes (same configuration
//! order, scheme, weights and multiple) would give, collisions included.
//!
//! # How one ring serves every combination
//!
//! A dedicated ring's points are the eligible nodes' points, and where some
//! of them share a hash, the first eligible node in tie order wins. The
//! shared ring has every point; where nodes collided it keeps the winner
//! among all nodes, and [`Ring`] also keeps, for each collided point, every
//! node that generated it in tie order (a ring of `P` points has about
//! `P^2 / 2^33` such points: a few hundred bytes for CDN-sized rings). So
//! walking the shared ring from the key's point, the first point with an
//! eligible node (its owner, or for a collided point the first eligible
//! node in its list) is exactly the dedicated ring's answer; a `down`
//! winner is skipped as the dedicated ring would skip it.
//!
//! # Cost
//!
//! Memory: 8 bytes per node for the label mask plus the collision lists;
//! a [`Requirement`] adds one bit per node. Time: if the eligible nodes hold
//! a fraction `f` of the weight, the walk visits `1 / f` points on average
//! (consecutive entries, usually the same cache line). Below
//! [`DEDICATED_BELOW`] (1/16 of the weight) a requirement instead builds a
//! dedicated ring of the eligible nodes in the `Compact` layout when it is
//! made (cost: that ring's build time and at most `f` of the full ring's
//! points; a [`RequirementCache`] bounds the total), so no combination walks
//! more than about 16 points on average. The worst case for a walk is the
//! longest run of ineligible points, which the dedicated rings bound the
//! same way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::{Compat, Layout, Node, Ring};

/// Requirements whose eligible nodes hold less than this share of the
/// weight get a dedicated ring.
pub const DEDICATED_BELOW: f64 = 1.0 / 16.0;

/// The most distinct labels a ring holds.
pub const MAX_LABELS: usize = 64;

/// A ring's label names (bit `i` is `names[i]`) and each node's mask.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Labels {
    names: Vec<Box<str>>,
    masks: Box<[u64]>,
}

impl Labels {
    pub(crate) fn new(nodes: &[Node]) -> Result<Self> {
        let mut index: HashMap<&str, u32> = HashMap::new();
        let mut names = Vec::new();
        let mut masks = vec![0u64; nodes.len()];
        for (i, node) in nodes.iter().enumerate() {
            for l in node.labels() {
                let bit = match index.get(l) {
                    Some(&b) => b,
                    None => {
                        if names.len() == MAX_LABELS {
                            return Err(Error::TooManyLabels {
                                label: l.to_string(),
                                server: node.server().to_string(),
                            });
                        }
                        names.push(Box::from(l));
                        index.insert(l, names.len() as u32 - 1);
                        names.len() as u32 - 1
                    }
                };
                masks[i] |= 1 << bit;
            }
        }
        if names.is_empty() {
            masks.clear();
        }
        Ok(Labels {
            names,
            masks: masks.into_boxed_slice(),
        })
    }

    fn mask_of(&self, node: usize) -> u64 {
        self.masks.get(node).copied().unwrap_or(0)
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.masks.len() * 8 + self.names.iter().map(|n| n.len() + 16).sum::<usize>()
    }
}

/// A set of required labels, prepared for one ring: which nodes are
/// eligible and, for sparse combinations, a dedicated ring.
///
/// Cost: one bit per node, plus the dedicated ring if any.
#[derive(Clone, Debug)]
pub struct Requirement {
    mask: u64,
    eligible: Box<[u64]>,
    any_eligible: bool,
    weight_share: f64,
    /// A ring of the eligible nodes, and its node index -> the shared ring's.
    dedicated: Option<(Box<Ring>, Box<[u32]>)>,
}

impl Requirement {
    /// The share of the ring's weight the eligible nodes hold.
    pub fn weight_share(&self) -> f64 {
        self.weight_share
    }

    /// Whether lookups use a dedicated ring (sparse combinations).
    pub fn is_dedicated(&self) -> bool {
        self.dedicated.is_some()
    }

    /// Heap bytes this requirement holds.
    pub fn heap_bytes(&self) -> usize {
        self.eligible.len() * 8
            + self
                .dedicated
                .as_ref()
                .map_or(0, |(r, m)| r.points_heap_bytes() + m.len() * 4)
    }

    #[inline(always)]
    fn ok(&self, n: usize) -> bool {
        self.eligible[n / 64] & (1 << (n % 64)) != 0
    }
}

impl Ring {
    /// Prepares a requirement: lookups with it answer only with nodes that
    /// carry every label in `labels` (none: every node). Errors on a label
    /// the ring does not have, and on `PingoraV1` rings when labels are
    /// required. Builds a dedicated ring when the eligible nodes hold less
    /// than [`DEDICATED_BELOW`] of the weight; see the module docs.
    pub fn requirement<S: AsRef<str>>(&self, labels: &[S]) -> Result<Requirement> {
        self.requirement_with(labels, true)
    }

    /// [`requirement`](Self::requirement), choosing whether a sparse
    /// combination may get a dedicated ring (`false`: always walk the
    /// shared ring, no extra memory).
    pub fn requirement_with<S: AsRef<str>>(
        &self,
        labels: &[S],
        allow_dedicated: bool,
    ) -> Result<Requirement> {
        let mut mask = 0u64;
        for l in labels {
            let l = l.as_ref();
            let bit = self
                .labels
                .names
                .iter()
                .position(|n| &**n == l)
                .ok_or_else(|| {
                    let known: Vec<&str> = self.labels.names.iter().map(|n| &**n).collect();
                    Error::UnknownLabel {
                        label: l.to_string(),
                        known: if known.is_empty() {
                            "none".into()
                        } else {
                            known.join(",")
                        },
                    }
                })?;
            mask |= 1 << bit;
        }
        if mask != 0 && self.compat() == Compat::PingoraV1 {
            return Err(Error::RequirementWithPingoraV1);
        }
        let nodes = self.nodes();
        let mut eligible = vec![0u64; nodes.len().div_ceil(64)];
        let (mut total, mut chosen) = (0u64, 0u64);
        for (i, n) in nodes.iter().enumerate() {
            total += n.weight() as u64;
            if self.labels.mask_of(i) & mask == mask {
                eligible[i / 64] |= 1 << (i % 64);
                chosen += n.weight() as u64;
            }
        }
        let weight_share = if total == 0 {
            0.0
        } else {
            chosen as f64 / total as f64
        };
        let mut req = Requirement {
            mask,
            eligible: eligible.into_boxed_slice(),
            any_eligible: chosen > 0,
            weight_share,
            dedicated: None,
        };
        if allow_dedicated && mask != 0 && chosen > 0 && weight_share < DEDICATED_BELOW {
            let map: Vec<u32> = (0..nodes.len())
                .filter(|&i| req.ok(i))
                .map(|i| i as u32)
                .collect();
            let sub: Vec<Node> = map.iter().map(|&i| nodes[i as usize].clone()).collect();
            let ring = self.builder().layout(Layout::Compact).build(sub)?;
            req.dedicated = Some((Box::new(ring), map.into_boxed_slice()));
        }
        Ok(req)
    }

    /// The node for a key under a requirement; `None` when no eligible node
    /// can serve.
    #[inline]
    pub fn node_required(&self, key: &[u8], req: &Requirement) -> Option<&Node> {
        self.node_index_required_for_hash(Ring::hash_key(key), req)
            .map(|i| &self.nodes()[i])
    }

    /// The index of the node for a hash under a requirement.
    pub fn node_index_required_for_hash(&self, hash: u32, req: &Requirement) -> Option<usize> {
        if req.mask == 0 {
            return self.node_index_for_hash(hash);
        }
        if !req.any_eligible {
            return None;
        }
        if let Some((ring, map)) = &req.dedicated {
            return ring.node_index_for_hash(hash).map(|i| map[i] as usize);
        }
        self.walk_required(hash, req).next()
    }

    /// Every distinct eligible serving node once, in the dedicated ring's
    /// order from the key's point (see [`Ring::failover`]).
    pub fn failover_required<'a>(
        &'a self,
        hash: u32,
        req: &'a Requirement,
    ) -> Box<dyn Iterator<Item = usize> + 'a> {
        if req.mask == 0 {
            let mut f = self.failover_for_hash(hash);
            return Box::new(std::iter::from_fn(move || f.next_index()));
        }
        if let Some((ring, map)) = &req.dedicated {
            let mut f = ring.failover_for_hash(hash);
            return Box::new(std::iter::from_fn(move || {
                f.next_index().map(|i| map[i] as usize)
            }));
        }
        let mut seen = vec![0u64; self.nodes().len().div_ceil(64)];
        Box::new(self.walk_required(hash, req).filter(move |&n| {
            let new = seen[n / 64] & (1 << (n % 64)) == 0;
            seen[n / 64] |= 1 << (n % 64);
            new
        }))
    }

    /// The serving eligible winners of the points from the key's point on,
    /// once round the ring (repeats included).
    fn walk_required<'a>(
        &'a self,
        hash: u32,
        req: &'a Requirement,
    ) -> impl Iterator<Item = usize> + 'a {
        let len = self.points.len();
        let live = req.any_eligible && len > 0;
        let start = if live { self.points.search(hash) } else { 0 };
        let steps = if live { len } else { 0 };
        (0..steps).filter_map(move |k| {
            let mut pos = start + k;
            if pos >= len {
                pos -= len;
            }
            let owner = self.points.node(pos);
            let winner = if req.ok(owner) {
                Some(owner)
            } else {
                self.collisions
                    .at(pos)
                    .and_then(|list| list.iter().map(|&n| n as usize).find(|&n| req.ok(n)))
            };
            winner.filter(|&w| !self.is_down(w))
        })
    }

    /// The label names of the ring, in bit order.
    pub fn label_names(&self) -> impl Iterator<Item = &str> {
        self.labels.names.iter().map(|n| &**n)
    }

    /// Heap bytes of the subset machinery: label masks and collision lists.
    pub fn subset_heap_bytes(&self) -> usize {
        self.labels.heap_bytes() + self.collisions.heap_bytes()
    }
}

/// Requirements by label combination, built on first use and kept while
/// their memory (dedicated rings included) fits under a cap. A requirement
/// that would not fit is built without a dedicated ring (it walks the
/// shared ring, costing one bit per node) and, once even those no longer
/// fit, is returned without being kept. Thread-safe; the lock is held only
/// to find or insert an entry, never during a lookup.
#[derive(Debug)]
pub struct RequirementCache {
    cap_bytes: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    map: HashMap<Vec<String>, Arc<Requirement>>,
    bytes: usize,
}

impl RequirementCache {
    /// A cache holding at most `cap_bytes` of requirements.
    pub fn new(cap_bytes: usize) -> Self {
        RequirementCache {
            cap_bytes,
            inner: Mutex::new(CacheInner::default()),
        }
    }

    /// The requirement for `labels` on `ring`, from the cache or built.
    pub fn get<S: AsRef<str>>(&self, ring: &Ring, labels: &[S]) -> Result<Arc<Requirement>> {
        let mut key: Vec<String> = labels.iter().map(|l| l.as_ref().to_string()).collect();
        key.sort();
        key.dedup();
        if let Some(r) = self.lock().map.get(&key) {
            return Ok(r.clone());
        }
        let used = self.lock().bytes;
        let mut req = ring.requirement(&key)?;
        if used + req.heap_bytes() > self.cap_bytes {
            req = ring.requirement_with(&key, false)?;
        }
        let req = Arc::new(req);
        let mut inner = self.lock();
        if inner.bytes + req.heap_bytes() <= self.cap_bytes {
            inner.bytes += req.heap_bytes();
            inner.map.insert(key, req.clone());
        }
        Ok(req)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        // A panic elsewhere while holding the lock leaves a usable map.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Heap bytes currently held.
    pub fn heap_bytes(&self) -> usize {
        self.lock().bytes
    }
}
