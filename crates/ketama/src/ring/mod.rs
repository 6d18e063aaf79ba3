//! A built ring: its nodes, its points in a layout, and what lookups need
//! beside them (down nodes, collided points, labels).
//!
//! - `build`: [`RingBuilder`], validation and point generation;
//! - `rebuild`: a new ring from an old one, reusing its points;
//! - `lookup`: lookups, batches, failover walks and their cursors;
//!   `nearer`: HAProxy's lookup and its walk by distance;
//! - `labels`, `label_index`: label names and bits, node sets, the
//!   per-point label index; `required`: the walk under a requirement.

mod build;
mod label_index;
mod labels;
mod lookup;
mod nearer;
mod rebuild;
mod required;

pub use build::{RingBuilder, MAX_POINTS};
pub(crate) use label_index::LabelIndex;
pub use label_index::LABEL_INDEX_MAX_LABELS;
pub use labels::MAX_LABELS;
pub(crate) use labels::{Labels, NodeSet};
pub use lookup::{Failover, FailoverCursor};

use crate::layout::Points;
use crate::node::Node;
use crate::settings::RingSettings;
use crate::sort::Collisions;
use crate::{Layout, Scheme};

/// A built consistent-hash ring: nodes in configuration order and their
/// sorted points in a [`Layout`].
///
/// Immutable once built; share it behind an `Arc` (or `ArcSwap`) between
/// threads. Cost: the layout's bytes per point, plus per node its server
/// string, its labels and 56 bytes (the [`Node`] itself), plus 8 bytes per
/// node when any node carries labels and one bit per node when any is
/// down, plus 12 bytes per collided point (a few hundred bytes at CDN
/// sizes, see [`crate::subset`]).
#[derive(Clone, Debug)]
pub struct Ring {
    /// Binds cursors to the ring that made them (a clone keeps it: its
    /// points are the same).
    pub(crate) id: u64,
    nodes: Box<[Node]>,
    pub(crate) points: Points,
    pub(crate) settings: RingSettings,
    generated: u64,
    /// Nodes that own at least one point and are not down: a failover walk
    /// stops once it has yielded this many.
    live: usize,
    /// One bit per node, set if down; empty when no node is down, so that
    /// the common lookup checks one cached bool instead of loading the node.
    down: Box<[u64]>,
    /// Every node of every collided point, for exact subset lookups.
    pub(crate) collisions: Collisions,
    /// Label names and each node's label bits.
    pub(crate) labels: Labels,
    /// Per-label point bitmaps for walks under a requirement; empty when
    /// the ring has no labels, more than [`LABEL_INDEX_MAX_LABELS`], a
    /// scheme without requirements, or the builder turned it off.
    pub(crate) label_index: LabelIndex,
    /// Under [`Scheme::EnvoyRingHash`], each point's low 32 bits (the
    /// layout holds the top 32); empty under every other scheme.
    pub(crate) lows: Box<[u32]>,
}

/// Ids that bind failover cursors to the ring that made them.
static NEXT_RING: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A new ring's id.
pub(crate) fn next_ring_id() -> u64 {
    NEXT_RING.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Ring {
    /// Builds a ring with the defaults (`Nginx`, `Wide`, 160 points per
    /// weight unit). See [`RingBuilder`] for the others.
    pub fn new(nodes: Vec<Node>) -> crate::Result<Ring> {
        RingBuilder::new().build(nodes)
    }

    #[inline(always)]
    pub(crate) fn is_down(&self, n: usize) -> bool {
        !self.down.is_empty() && self.down[n / 64] & (1 << (n % 64)) != 0
    }

    /// How many distinct nodes serve (own a point and are not down).
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// The nodes in configuration order; lookups return references into it.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The settings the ring was built with.
    pub fn settings(&self) -> RingSettings {
        self.settings
    }

    /// The scheme the ring was built with.
    pub fn compat(&self) -> Scheme {
        self.settings.compat
    }

    /// The storage layout.
    pub fn layout(&self) -> Layout {
        self.settings.layout
    }

    /// Points per weight unit.
    pub fn point_multiple(&self) -> u32 {
        self.settings.point_multiple
    }

    /// Points on the ring after collisions were resolved.
    pub fn point_count(&self) -> usize {
        self.points.len()
    }

    /// Points generated before collisions were resolved (sum of weight x
    /// point multiple, or the memcached schemes' counts).
    pub fn generated_points(&self) -> u64 {
        self.generated
    }

    /// Points each node generated, in configuration order: `weight x point
    /// multiple`, or for the memcached schemes the node's share of
    /// `160 x N` ([`crate::continuum`]). `O(N)`.
    pub fn node_points(&self) -> Vec<u64> {
        RingBuilder::from(self.settings).node_points(&self.nodes)
    }

    /// Heap bytes held by the points (not the node table): the layout's,
    /// and under [`Scheme::EnvoyRingHash`] 4 bytes a point more for the
    /// low halves of the 64-bit hashes.
    pub fn points_heap_bytes(&self) -> usize {
        self.points.heap_bytes() + self.lows.len() * 4
    }

    /// The hash and owning node index of point `i` in ring order, or `None`
    /// past the end. `O(1)` (`O(log B)` in `Compact`).
    pub fn point(&self, i: usize) -> Option<(u32, usize)> {
        (i < self.points.len()).then(|| (self.points.hash(i), self.points.node(i)))
    }

    /// Every point as (hash, owning node index) in ring order, sequentially
    /// in every layout: `O(P)` for the whole walk.
    pub fn points(&self) -> impl Iterator<Item = (u32, usize)> + '_ {
        self.points.iter()
    }

    /// Whether node `i` is marked down (`false` past the end).
    pub fn node_is_down(&self, i: usize) -> bool {
        i < self.nodes.len() && self.is_down(i)
    }

    /// The label names of the ring, in bit order.
    pub fn label_names(&self) -> impl Iterator<Item = &str> {
        self.labels.names()
    }

    /// Heap bytes of the subset machinery: label masks, collision lists
    /// and the label index ([`RingBuilder::label_index`]).
    pub fn subset_heap_bytes(&self) -> usize {
        self.labels.heap_bytes() + self.collisions.heap_bytes() + self.label_index.heap_bytes()
    }

    /// Whether the ring holds a label index ([`RingBuilder::label_index`]).
    pub fn has_label_index(&self) -> bool {
        !self.label_index.is_empty()
    }

    /// Checks the ring's invariants; see `testing::check_invariants`
    /// (the `testing` feature).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn check(&self) -> Result<(), crate::testing::Violation> {
        use crate::testing::Violation;
        let n = self.points.len();
        if n as u64 > self.generated {
            return Err(Violation(format!(
                "{n} points but only {} generated",
                self.generated
            )));
        }
        let mut owns = vec![0u64; self.nodes.len()];
        if !self.lows.is_empty() && self.lows.len() != n {
            return Err(Violation(format!(
                "{} low halves for {n} points",
                self.lows.len()
            )));
        }
        // A 64-bit ring's order is that of its whole hashes: equal top
        // halves are kept side by side, in the order of their low halves.
        let key = |i: usize| {
            let low = self.lows.get(i).copied().map_or(0, u64::from);
            (u64::from(self.points.hash(i)) << 32) | low
        };
        let wide = !self.lows.is_empty();
        for (i, (h, node)) in self.points.iter().enumerate() {
            if i > 0 && (key(i - 1) > key(i) || (!wide && key(i - 1) == key(i))) {
                return Err(Violation(format!(
                    "point {i}: hash {h:#x} not above the previous"
                )));
            }
            if (self.points.hash(i), self.points.node(i)) != (h, node) {
                return Err(Violation(format!(
                    "point {i}: random access disagrees with the sequential walk"
                )));
            }
            let Some(nd) = self.nodes.get(node) else {
                return Err(Violation(format!("point {i}: owner {node} out of range")));
            };
            if nd.weight() == 0 {
                return Err(Violation(format!(
                    "point {i}: owner {} has weight 0",
                    nd.server()
                )));
            }
            owns[node] += 1;
        }
        let generated = RingBuilder::from(self.settings).node_points(&self.nodes);
        for ((node, &count), &max) in self.nodes.iter().zip(&owns).zip(&generated) {
            if count > max {
                return Err(Violation(format!(
                    "{} owns {count} points, more than {max}",
                    node.server()
                )));
            }
        }
        if !self.label_index.is_empty() {
            let stride = self.label_index.stride();
            for i in 0..n {
                let m = self
                    .labels
                    .point_mask(i, self.points.node(i), &self.collisions);
                for l in 0..stride {
                    if self.label_index.bit(i, l) != (m >> l & 1 == 1) {
                        return Err(Violation(format!(
                            "point {i}: label index bit {l} disagrees with its nodes' labels"
                        )));
                    }
                }
            }
        }
        let live = self
            .nodes
            .iter()
            .zip(&owns)
            .filter(|(nd, &c)| c > 0 && !nd.is_down())
            .count();
        if live != self.live {
            return Err(Violation(format!(
                "live count {} but {live} nodes serve",
                self.live
            )));
        }
        Ok(())
    }
}
