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
//! # Bound to one ring
//!
//! A [`Requirement`] holds the `Arc<Ring>` it was prepared for and answers
//! lookups itself, and a [`RequirementCache`] belongs to one ring: there is
//! no way to ask one ring with a requirement prepared on another.
//!
//! ```compile_fail
//! # use std::sync::Arc;
//! # use ketama::{Node, Ring, RequirementCache};
//! let a = Arc::new(Ring::new(vec![Node::new("a:1", 1).with_labels(["eu"])])?);
//! let b = Arc::new(Ring::new(vec![Node::new("b:1", 1).with_labels(["eu"])])?);
//! let cache = RequirementCache::new(a, 1 << 20);
//! // A cache serves its own ring only: it takes no ring to look up on.
//! let req = cache.get(&b, &["eu"])?;
//! # Ok::<(), ketama::Error>(())
//! ```
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
use crate::ring::FailoverCursor;
use crate::{Layout, Node, Ring, RingBuilder};

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

    pub(crate) fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(|n| &**n)
    }

    /// The mask of these label names, or the error naming the first one
    /// the ring lacks.
    fn mask<S: AsRef<str>>(&self, labels: &[S]) -> Result<u64> {
        let mut mask = 0u64;
        for l in labels {
            let l = l.as_ref();
            let bit = self.names.iter().position(|n| &**n == l).ok_or_else(|| {
                let known: Vec<&str> = self.names().collect();
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
        Ok(mask)
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.masks.len() * 8 + self.names.iter().map(|n| n.len() + 16).sum::<usize>()
    }
}

/// A set of node indices: one bit per node.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct NodeSet(Box<[u64]>);

impl NodeSet {
    fn with_capacity(nodes: usize) -> Self {
        NodeSet(vec![0u64; nodes.div_ceil(64)].into_boxed_slice())
    }

    fn insert(&mut self, n: usize) {
        self.0[n / 64] |= 1 << (n % 64);
    }

    #[inline(always)]
    pub(crate) fn contains(&self, n: usize) -> bool {
        self.0[n / 64] & (1 << (n % 64)) != 0
    }

    fn heap_bytes(&self) -> usize {
        self.0.len() * 8
    }
}

/// A set of required labels, prepared for one ring, which it holds: which
/// nodes are eligible and, for sparse combinations, a dedicated ring.
/// Lookups under the requirement are its own methods.
///
/// Cost: one bit per node, plus the dedicated ring if any.
///
/// ```
/// use std::sync::Arc;
/// use ketama::{Node, Requirement, Ring};
/// let ring = Arc::new(Ring::new(vec![
///     Node::new("10.0.0.1:443", 1).with_labels(["eu"]),
///     Node::new("10.0.0.2:443", 1).with_labels(["us"]),
/// ])?);
/// let eu = Requirement::new(&ring, &["eu"])?;
/// assert_eq!(eu.node(b"/a").unwrap().server(), "10.0.0.1:443");
/// # Ok::<(), ketama::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Requirement {
    ring: Arc<Ring>,
    mask: u64,
    eligible: NodeSet,
    /// Eligible nodes of nonzero weight that are not down: the most a walk
    /// can yield.
    serving: usize,
    weight_share: f64,
    /// A ring of the eligible nodes, and its node index -> the shared ring's.
    dedicated: Option<(Box<Ring>, Box<[u32]>)>,
}

impl Requirement {
    /// Prepares a requirement on `ring`: lookups with it answer only with
    /// nodes that carry every label in `labels` (none: every node). Errors
    /// on a label the ring does not have, and, when labels are required, on
    /// schemes that cannot honour them ([`Compat::requirement_obstacle`](crate::Compat::requirement_obstacle)). Builds a dedicated ring when the eligible nodes
    /// hold less than [`DEDICATED_BELOW`] of the weight; see the module
    /// docs.
    pub fn new<S: AsRef<str>>(ring: &Arc<Ring>, labels: &[S]) -> Result<Self> {
        Self::with_dedicated(ring, labels, true)
    }

    /// [`new`](Self::new), choosing whether a sparse combination may get a
    /// dedicated ring (`false`: always walk the shared ring, no extra
    /// memory).
    pub fn with_dedicated<S: AsRef<str>>(
        ring: &Arc<Ring>,
        labels: &[S],
        allow_dedicated: bool,
    ) -> Result<Self> {
        let mask = ring.labels.mask(labels)?;
        if mask != 0 {
            if let Some(why) = ring.compat().requirement_obstacle() {
                return Err(Error::RequirementUnsupported {
                    compat: ring.compat(),
                    why,
                });
            }
        }
        let nodes = ring.nodes();
        let mut eligible = NodeSet::with_capacity(nodes.len());
        let (mut total, mut chosen, mut serving) = (0u64, 0u64, 0usize);
        for (i, n) in nodes.iter().enumerate() {
            total += n.weight() as u64;
            if ring.labels.mask_of(i) & mask == mask {
                eligible.insert(i);
                chosen += n.weight() as u64;
                serving += (n.weight() > 0 && !n.is_down()) as usize;
            }
        }
        let weight_share = if total == 0 {
            0.0
        } else {
            chosen as f64 / total as f64
        };
        let mut req = Requirement {
            ring: ring.clone(),
            mask,
            eligible,
            serving,
            weight_share,
            dedicated: None,
        };
        if allow_dedicated && mask != 0 && chosen > 0 && weight_share < DEDICATED_BELOW {
            let map: Vec<u32> = (0..nodes.len())
                .filter(|&i| req.eligible.contains(i))
                .map(|i| i as u32)
                .collect();
            let sub: Vec<Node> = map.iter().map(|&i| nodes[i as usize].clone()).collect();
            let dedicated = RingBuilder::from(ring.settings())
                .layout(Layout::Compact)
                .build(sub)?;
            req.dedicated = Some((Box::new(dedicated), map.into_boxed_slice()));
        }
        Ok(req)
    }

    /// The ring this requirement was prepared for.
    pub fn ring(&self) -> &Arc<Ring> {
        &self.ring
    }

    /// Whether it requires no label (every node eligible).
    pub fn is_empty(&self) -> bool {
        self.mask == 0
    }

    /// Whether node `i` of the ring carries every required label.
    pub fn is_eligible(&self, i: usize) -> bool {
        i < self.ring.nodes().len() && (self.mask == 0 || self.eligible.contains(i))
    }

    /// The share of the ring's weight the eligible nodes hold.
    pub fn weight_share(&self) -> f64 {
        self.weight_share
    }

    /// Whether lookups use a dedicated ring (sparse combinations).
    pub fn is_dedicated(&self) -> bool {
        self.dedicated.is_some()
    }

    /// Heap bytes this requirement holds (not counting the shared ring).
    pub fn heap_bytes(&self) -> usize {
        self.eligible.heap_bytes()
            + self
                .dedicated
                .as_ref()
                .map_or(0, |(r, m)| r.points_heap_bytes() + m.len() * 4)
    }

    /// The eligible node for a key; `None` when no eligible node can serve.
    pub fn node(&self, key: &[u8]) -> Option<&Node> {
        self.node_index_for_hash(self.ring.hash_key(key))
            .map(|i| &self.ring.nodes()[i])
    }

    /// The index (into the ring's nodes) of the eligible node for a hash.
    pub fn node_index_for_hash(&self, hash: u32) -> Option<usize> {
        if self.mask == 0 {
            return self.ring.node_index_for_hash(hash);
        }
        if let Some((ring, map)) = &self.dedicated {
            return ring.node_index_for_hash(hash).map(|i| map[i] as usize);
        }
        let mut c = self.cursor(hash);
        self.advance(&mut c)
    }

    /// A detached failover walk over the eligible nodes from a hash's
    /// point: the order a dedicated ring of the eligible nodes would give.
    /// Advance it with [`advance`](Self::advance).
    pub fn cursor(&self, hash: u32) -> FailoverCursor {
        if self.mask == 0 {
            return self.ring.failover_cursor(hash);
        }
        if let Some((ring, _)) = &self.dedicated {
            return ring.failover_cursor(hash);
        }
        let ring = &self.ring;
        let (pos, limit) = if ring.points.len() == 0 || self.serving == 0 {
            (0, 0)
        } else {
            (ring.points.search(hash), self.serving)
        };
        ring.cursor_at(pos, limit)
    }

    /// The next distinct eligible serving node (its index into the ring's
    /// nodes) of a walk made by [`cursor`](Self::cursor).
    #[inline]
    pub fn advance(&self, c: &mut FailoverCursor) -> Option<usize> {
        if self.mask == 0 {
            return self.ring.advance(c);
        }
        if let Some((ring, map)) = &self.dedicated {
            return ring.advance(c).map(|i| map[i] as usize);
        }
        self.ring.advance_required(c, &self.eligible)
    }

    /// Every distinct eligible serving node once, in failover order from
    /// the hash's point.
    pub fn failover(&self, hash: u32) -> impl Iterator<Item = usize> + '_ {
        let mut c = self.cursor(hash);
        std::iter::from_fn(move || self.advance(&mut c))
    }
}

/// Requirements of one ring by label combination, built on first use and
/// kept while their memory (dedicated rings included) fits under a cap. A
/// requirement that would not fit is built without a dedicated ring (it
/// walks the shared ring, costing one bit per node) and, once even those
/// no longer fit, is returned without being kept. Thread-safe; the lock is
/// held only to find or insert an entry, never during a lookup.
#[derive(Debug)]
pub struct RequirementCache {
    ring: Arc<Ring>,
    cap_bytes: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    map: HashMap<Vec<String>, Arc<Requirement>>,
    bytes: usize,
}

impl RequirementCache {
    /// A cache for `ring` holding at most `cap_bytes` of requirements.
    pub fn new(ring: Arc<Ring>, cap_bytes: usize) -> Self {
        RequirementCache {
            ring,
            cap_bytes,
            inner: Mutex::new(CacheInner::default()),
        }
    }

    /// The ring the cache's requirements are for.
    pub fn ring(&self) -> &Arc<Ring> {
        &self.ring
    }

    /// The requirement for `labels`, from the cache or built.
    pub fn get<S: AsRef<str>>(&self, labels: &[S]) -> Result<Arc<Requirement>> {
        let mut key: Vec<String> = labels.iter().map(|l| l.as_ref().to_string()).collect();
        key.sort();
        key.dedup();
        if let Some(r) = self.lock().map.get(&key) {
            return Ok(r.clone());
        }
        let used = self.lock().bytes;
        let mut req = Requirement::new(&self.ring, &key)?;
        if used + req.heap_bytes() > self.cap_bytes {
            req = Requirement::with_dedicated(&self.ring, &key, false)?;
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
