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
//! # Skipping ineligible points: the label index
//!
//! A ring whose nodes carry labels (at most [`LABEL_INDEX_MAX_LABELS`] of
//! them) also keeps one bit per point and label ([`RingBuilder::label_index`]
//! turns it off): for each block of 64 points, `F` words, word `l` holding
//! which of the block's points belong to a node carrying label `l`. The
//! walk ANDs the required labels' words and jumps to the first surviving
//! bit, so a requirement holding a share `f` of the weight costs about one
//! extra block read beyond the search (`1 / (64 f)` more), not `1 / f`
//! point decodes. A collided point's bits are the OR of its nodes' labels:
//! a surviving bit is only a candidate, checked exactly, but an eligible
//! point is never skipped, so answers are the same with or without the
//! index.
//!
//! # Cost
//!
//! Memory: 8 bytes per node for the label mask plus the collision lists,
//! plus the label index's `F` bits a point (at 5 labels 0.625 bytes: 18%
//! of a `Compact` ring's 3.5); a [`Requirement`] adds one bit per node.
//! Time: the search, then the index's first candidate at or after the
//! point found (one block AND, a few for sparse requirements), whose owner
//! is nearly always the answer; without the index, `1 / f` points on
//! average. Below `DEDICATED_BELOW_INDEXED` (1/32 of the weight;
//! `DEDICATED_BELOW`, 1/16, on rings without the index) a requirement instead builds a dedicated ring of the eligible
//! nodes in the `Compact` layout when it is made (cost: that ring's build
//! time and at most `f` of the full ring's points; a [`RequirementCache`]
//! bounds the total). The worst case for a walk is the longest run of
//! ineligible points, which the index crosses 64 at a time.
//!
//! Under Envoy's and gRPC's schemes ([`crate::envoy`]) every requirement
//! gets its dedicated ring, whatever its share or a cache's budget: their
//! subset load balancer builds each subset its own ring or table, whose
//! size and weights depend on the subset, so no walk of the shared ring
//! gives its answers.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::ring::{FailoverCursor, NodeSet};
pub use crate::ring::{LABEL_INDEX_MAX_LABELS, MAX_LABELS};
use crate::scheme::Probe;
use crate::{Layout, Node, Ring, RingBuilder};

/// Requirements whose eligible nodes hold less than this share of the
/// weight get a dedicated ring, on rings without a label index.
pub(crate) const DEDICATED_BELOW: f64 = 1.0 / 16.0;

/// The same on rings with a label index, whose walk skips 64 points with
/// a few word ANDs: only requirements this sparse get a dedicated ring.
pub(crate) const DEDICATED_BELOW_INDEXED: f64 = 1.0 / 32.0;

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
    /// schemes that cannot honour them ([`Scheme::requirement_obstacle`](crate::Scheme::requirement_obstacle)). Builds a dedicated ring when the eligible nodes
    /// hold less than `DEDICATED_BELOW_INDEXED` of the weight
    /// (`DEDICATED_BELOW` on a ring without a label index); see the
    /// module docs.
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
        let below = if ring.label_index.is_empty() {
            DEDICATED_BELOW
        } else {
            DEDICATED_BELOW_INDEXED
        };
        // Envoy's schemes cannot walk the shared ring: a subset is a ring
        // of its own there, whatever the cache's budget.
        let must = ring.compat().dedicated_subsets();
        if (allow_dedicated || must) && mask != 0 && chosen > 0 && (weight_share < below || must) {
            let map: Vec<u32> = (0..nodes.len())
                .filter(|&i| req.eligible.contains(i))
                .map(|i| i as u32)
                .collect();
            let sub: Vec<Node> = map.iter().map(|&i| nodes[i as usize].clone()).collect();
            let dedicated = RingBuilder::from(ring.settings())
                .layout(Layout::Compact)
                .label_index(false)
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
        self.node_index_for_probe(self.ring.compat().probe(key))
            .map(|i| &self.ring.nodes()[i])
    }

    /// The index (into the ring's nodes) of the eligible node for a hash
    /// (what a 32-bit hash means under Envoy's schemes:
    /// [`Ring::node_index_for_hash`]).
    pub fn node_index_for_hash(&self, hash: u32) -> Option<usize> {
        self.node_index_for_probe(Probe::of_hash(self.ring.compat(), hash))
    }

    fn node_index_for_probe(&self, p: Probe) -> Option<usize> {
        if self.mask == 0 {
            return self.ring.node_index_for_probe(p);
        }
        if let Some((ring, map)) = &self.dedicated {
            return ring.node_index_for_probe(p).map(|i| map[i] as usize);
        }
        self.ring
            .first_required(p, &self.eligible, self.mask, self.serving)
    }

    /// A detached failover walk over the eligible nodes from a hash's
    /// point: the order a dedicated ring of the eligible nodes would give.
    /// Advance it with [`advance`](Self::advance).
    pub fn cursor(&self, hash: u32) -> FailoverCursor {
        self.cursor_for_probe(Probe::of_hash(self.ring.compat(), hash))
    }

    /// [`cursor`](Self::cursor) from a key's point (under Envoy's schemes,
    /// its 64-bit hash's).
    pub fn cursor_for_key(&self, key: &[u8]) -> FailoverCursor {
        self.cursor_for_probe(self.ring.compat().probe(key))
    }

    pub(crate) fn cursor_for_probe(&self, p: Probe) -> FailoverCursor {
        if self.mask == 0 {
            return self.ring.cursor_for_probe(p, self.ring.live());
        }
        if let Some((ring, _)) = &self.dedicated {
            return ring.cursor_for_probe(p, ring.live());
        }
        self.ring.cursor_required(p, self.serving)
    }

    /// The next distinct eligible serving node (its index into the ring's
    /// nodes) of a walk made by [`cursor`](Self::cursor); `Ok(None)` when
    /// the walk is over.
    ///
    /// # Errors
    /// [`Error::ForeignCursor`] for a cursor
    /// made by another ring (or another requirement's dedicated ring).
    #[inline]
    pub fn advance(&self, c: &mut FailoverCursor) -> Result<Option<usize>> {
        if self.mask == 0 {
            return self.ring.advance(c);
        }
        if let Some((ring, map)) = &self.dedicated {
            return Ok(ring.advance(c)?.map(|i| map[i] as usize));
        }
        self.ring.advance_required(c, &self.eligible, self.mask)
    }

    /// Every distinct eligible serving node once, in failover order from
    /// the hash's point.
    pub fn failover(&self, hash: u32) -> impl Iterator<Item = usize> + '_ {
        let mut c = self.cursor(hash);
        // The walk's own cursor: never foreign.
        std::iter::from_fn(move || self.advance(&mut c).ok().flatten())
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
