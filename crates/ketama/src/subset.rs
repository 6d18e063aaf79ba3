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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::ring::FailoverCursor;
use crate::sort::{self, Collisions};
use crate::{Layout, Node, Ring, RingBuilder};

/// Requirements whose eligible nodes hold less than this share of the
/// weight get a dedicated ring, on rings without a label index.
pub(crate) const DEDICATED_BELOW: f64 = 1.0 / 16.0;

/// The same on rings with a label index, whose walk skips 64 points with
/// a few word ANDs: only requirements this sparse get a dedicated ring.
pub(crate) const DEDICATED_BELOW_INDEXED: f64 = 1.0 / 32.0;

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

    /// The label bits of point `i` owned by `owner`: the owner's, or for a
    /// collided point those of every node sharing it (what the label index
    /// holds for the point).
    pub(crate) fn point_mask(&self, i: usize, owner: usize, collisions: &Collisions) -> u64 {
        let m = self.mask_of(owner);
        match collisions.at(i) {
            Some(list) => list.iter().fold(m, |m, &n| m | self.mask_of(n as usize)),
            None => m,
        }
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

/// Rings with at most this many labels get a label index (at most 2
/// bytes a point), unless the builder turns it off.
pub const LABEL_INDEX_MAX_LABELS: usize = 16;

/// One bit per point and label: bit `i % 64` of word `(i / 64) * F + l` is
/// set when point `i`'s owner carries label `l` (for a collided point: when
/// any node sharing it does). A walk under a requirement ANDs the words of
/// the required labels, block by block of 64 points, and visits only the
/// points whose bit survives; a set bit may still be ineligible (a collided
/// point whose nodes carry the labels between them), so the walk checks
/// each candidate exactly, but no eligible point is ever skipped.
///
/// Cost: `F` bits a point (`ceil(P / 64) * F * 8` bytes), built in one pass
/// over the sorted points; a lookup reads `|required|` words per block of
/// 64 points it crosses (about `1 / (64 f)` blocks beyond the first for a
/// requirement holding a share `f` of the points).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LabelIndex {
    stride: usize,
    words: Box<[u64]>,
}

impl LabelIndex {
    /// The index of `sorted` (packed points in ring order).
    pub(crate) fn new(sorted: &[u64], labels: &Labels, collisions: &Collisions) -> Self {
        let stride = labels.names.len();
        if stride == 0 || sorted.is_empty() {
            return LabelIndex::default();
        }
        let mut words = vec![0u64; sorted.len().div_ceil(64) * stride];
        let blocks = words.chunks_exact_mut(stride);
        for (b, (block, points)) in blocks.zip(sorted.chunks(64)).enumerate() {
            for (j, &p) in points.iter().enumerate() {
                let mut m = labels.point_mask(b * 64 + j, sort::node_of(p) as usize, collisions);
                while m != 0 {
                    block[m.trailing_zeros() as usize] |= 1 << j;
                    m &= m - 1;
                }
            }
        }
        LabelIndex {
            stride,
            words: words.into_boxed_slice(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// How far (in points, wrapping after `len`) the first point at or
    /// after `pos` whose owner may carry every label of `mask` lies; `None`
    /// if none lies within `max`.
    #[inline]
    pub(crate) fn next(&self, pos: usize, len: usize, mask: u64, max: usize) -> Option<usize> {
        let (mut p, mut d) = (pos, 0usize);
        loop {
            let block = &self.words[(p / 64) * self.stride..][..self.stride];
            let mut m = mask;
            let mut w = !0u64;
            while m != 0 {
                w &= block[m.trailing_zeros() as usize];
                m &= m - 1;
            }
            let off = p % 64;
            let w = w >> off;
            if w != 0 {
                let t = d + w.trailing_zeros() as usize;
                return (t < max).then_some(t);
            }
            // Bits past `len` are clear, so an empty rest of the last
            // block wraps to the start.
            let step = (64 - off).min(len - p);
            d += step;
            if d >= max {
                return None;
            }
            p += step;
            if p == len {
                p = 0;
            }
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Whether point `i`'s bit for label `l` is set.
    pub(crate) fn bit(&self, i: usize, l: usize) -> bool {
        self.words[(i / 64) * self.stride + l] >> (i % 64) & 1 == 1
    }

    /// Labels per block (the ring's label count), 0 when empty.
    pub(crate) fn stride(&self) -> usize {
        self.stride
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
        if allow_dedicated && mask != 0 && chosen > 0 && weight_share < below {
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
        let ring = &self.ring;
        if ring.points.len() == 0 || self.serving == 0 {
            return None;
        }
        let mut pos = ring.points.search(hash);
        let len = ring.points.len();
        if !ring.label_index.is_empty() {
            // The first candidate, with no branch on whether the point
            // found is eligible (as unpredictable as the requirement's
            // share): its owner is nearly always the answer (a collided
            // point's owner comes first in tie order).
            let d = ring.label_index.next(pos, len, self.mask, len)?;
            pos = if pos + d >= len {
                pos + d - len
            } else {
                pos + d
            };
        }
        let owner = ring.points.node(pos);
        if self.eligible.contains(owner) && !ring.is_down(owner) {
            return Some(owner);
        }
        let mut c = ring.cursor_at(pos, self.serving);
        self.advance(&mut c).ok().flatten()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `next` against a point-by-point scan, on random bitmaps of every
    /// length around block edges, every start, several masks and limits.
    #[test]
    fn next_is_the_first_candidate_scan() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut rnd = move || {
            state = crate::mix::mix64(state);
            state
        };
        for len in [1usize, 2, 63, 64, 65, 127, 128, 129, 300, 1000] {
            for density in [1u64, 3, 15, 255] {
                let stride = 3;
                let mut words = vec![0u64; len.div_ceil(64) * stride];
                for i in 0..len {
                    for l in 0..stride {
                        // A bit with probability 1 / (density + 1).
                        if rnd() % (density + 1) == 0 {
                            words[(i / 64) * stride + l] |= 1 << (i % 64);
                        }
                    }
                }
                let index = LabelIndex {
                    stride,
                    words: words.into_boxed_slice(),
                };
                for mask in [0b001u64, 0b010, 0b101, 0b111] {
                    let hit = |i: usize| (0..stride).all(|l| mask >> l & 1 == 0 || index.bit(i, l));
                    for pos in 0..len {
                        for max in [1, 2, 64, len, len + 5] {
                            let want = (0..max.min(len)).find(|&d| hit((pos + d) % len));
                            assert_eq!(
                                index.next(pos, len, mask, max),
                                want,
                                "len {len} pos {pos} mask {mask:b} max {max}"
                            );
                        }
                    }
                }
            }
        }
    }
}
