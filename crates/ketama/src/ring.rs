//! Building a ring and looking keys up on it.

use std::collections::HashMap;
use std::net::SocketAddr;

use crate::crc::{self, ChainJob};
use crate::error::{Error, Result};
use crate::layout::{Layout, Points};
use crate::node::{nginx_host_port, pingora_prefix, Node};
use crate::sort::{self, Collisions};
use crate::Compat;

/// The default number of points per weight unit, as in nginx and pingora.
pub const DEFAULT_POINT_MULTIPLE: u32 = 160;

/// The most points a ring may have (2^28 = 268,435,456), checked before
/// anything is allocated. A build needs 16 bytes per point at its peak
/// (points plus the radix sort's scratch), so the cap keeps a build under
/// 4 GiB while still covering 2,048 nodes at 100,000 points each.
pub const MAX_POINTS: u64 = 1 << 28;

/// Settings for building a [`Ring`]: scheme, layout and point multiple.
///
/// ```
/// use ketama::{Compat, Layout, Node, RingBuilder};
/// let ring = RingBuilder::new()
///     .compat(Compat::PingoraV2)
///     .layout(Layout::Packed)
///     .point_multiple(16)
///     .build(vec![Node::new("10.0.0.1:443", 1), Node::new("10.0.0.2:443", 2)])?;
/// assert_eq!(ring.point_count(), 48);
/// # Ok::<(), ketama::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RingBuilder {
    compat: Compat,
    layout: Layout,
    point_multiple: u32,
}

impl Default for RingBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl RingBuilder {
    /// `Nginx` scheme, `Wide` layout, 160 points per weight unit.
    pub fn new() -> Self {
        RingBuilder {
            compat: Compat::Nginx,
            layout: Layout::Wide,
            point_multiple: DEFAULT_POINT_MULTIPLE,
        }
    }

    /// Sets the hashing scheme.
    pub fn compat(mut self, compat: Compat) -> Self {
        self.compat = compat;
        self
    }

    /// Sets the storage layout.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    /// Sets the number of points per weight unit.
    pub fn point_multiple(mut self, point_multiple: u32) -> Self {
        self.point_multiple = point_multiple;
        self
    }

    /// The scheme this builder uses.
    pub fn get_compat(&self) -> Compat {
        self.compat
    }

    /// The layout this builder uses.
    pub fn get_layout(&self) -> Layout {
        self.layout
    }

    /// The point multiple this builder uses.
    pub fn get_point_multiple(&self) -> u32 {
        self.point_multiple
    }

    /// Builds a ring from `nodes` in configuration order.
    ///
    /// Cost: `O(P)` time for P points (crc chain and a 3-pass radix sort;
    /// `PingoraV1` uses a comparison sort, `O(P log P)`), 16 bytes per point
    /// at the peak, then the layout's bytes per point.
    pub fn build(&self, nodes: Vec<Node>) -> Result<Ring> {
        let addrs = self.validate(&nodes)?;
        let total = self.count_points(&nodes)?;
        let generated = total;

        // Each point carries its node's rank in the tie order:
        // configuration order for nginx (and for v1, whose sort then
        // decides ties), address order for pingora v2. Among equal hashes
        // the smallest rank wins.
        let order: Vec<usize> = match self.compat {
            Compat::Nginx | Compat::PingoraV1 => (0..nodes.len()).collect(),
            Compat::PingoraV2 => {
                let mut o: Vec<usize> = (0..nodes.len()).collect();
                o.sort_by_key(|&i| addrs[i]);
                o
            }
        };
        let mut prefix = Vec::with_capacity(48);
        let jobs: Vec<ChainJob> = order
            .iter()
            .enumerate()
            .map(|(rank, &i)| {
                let count = nodes[i].weight() as u64 * self.point_multiple as u64;
                if self.compat == Compat::Nginx {
                    let (host, port) = nginx_host_port(nodes[i].server());
                    ChainJob::new(&[host, b"\0", port], count, rank as u32)
                } else {
                    pingora_prefix(&addrs[i], &mut prefix);
                    ChainJob::new(&[&prefix], count, rank as u32)
                }
            })
            .collect();
        let rank_to_node: Vec<u32> = order.iter().map(|&i| i as u32).collect();
        let labels = crate::subset::Labels::new(&nodes)?;
        let (points, collisions) = if self.compat == Compat::PingoraV1 {
            (v1_points(&jobs, total as usize), Collisions::default())
        } else {
            sort::generate_sorted(&jobs, total as usize, &rank_to_node)
        };

        Ok(Ring::assemble(
            nodes, points, *self, generated, collisions, labels,
        ))
    }

    /// Checks everything that can be wrong before allocating; returns the
    /// parsed socket addresses for the pingora schemes.
    fn validate(&self, nodes: &[Node]) -> Result<Vec<SocketAddr>> {
        if self.point_multiple == 0 {
            return Err(Error::ZeroPointMultiple);
        }
        let mut seen: HashMap<&str, usize> = HashMap::with_capacity(nodes.len());
        for (i, node) in nodes.iter().enumerate() {
            if node.server().is_empty() {
                return Err(Error::EmptyServer { index: i });
            }
            if let Some(first) = seen.insert(node.server(), i) {
                return Err(Error::DuplicateServer {
                    server: node.server().to_string(),
                    first,
                    second: i,
                });
            }
        }
        if nodes.len() > self.compat.max_nodes() {
            return Err(Error::TooManyNodesForCompat {
                nodes: nodes.len(),
                max: self.compat.max_nodes(),
                compat: self.compat,
            });
        }
        if nodes.len() > self.layout.max_nodes() {
            return Err(Error::TooManyNodesForLayout {
                nodes: nodes.len(),
                max: self.layout.max_nodes(),
                layout: self.layout,
            });
        }
        if !self.compat.needs_socket_addrs() {
            return Ok(Vec::new());
        }
        let mut addrs = Vec::with_capacity(nodes.len());
        let mut by_addr: HashMap<SocketAddr, usize> = HashMap::with_capacity(nodes.len());
        for (i, node) in nodes.iter().enumerate() {
            let addr: SocketAddr = node.server().parse().map_err(|_| Error::NotSocketAddr {
                server: node.server().to_string(),
                compat: self.compat,
            })?;
            if let Some(first) = by_addr.insert(addr, i) {
                return Err(Error::DuplicateAddress {
                    first: nodes[first].server().to_string(),
                    second: node.server().to_string(),
                    addr,
                    compat: self.compat,
                });
            }
            addrs.push(addr);
        }
        Ok(addrs)
    }

    fn count_points(&self, nodes: &[Node]) -> Result<u64> {
        let mut total: u64 = 0;
        for node in nodes {
            // u32 x u32 always fits in u64; the sum is checked against the cap
            // at every step, so it cannot overflow either.
            let n = node.weight() as u64 * self.point_multiple as u64;
            total += n;
            if total > MAX_POINTS {
                return Err(Error::TooManyPoints {
                    server: node.server().to_string(),
                    weight: node.weight(),
                    point_multiple: self.point_multiple,
                    node_points: n,
                    total,
                    max: MAX_POINTS,
                });
            }
        }
        Ok(total)
    }
}

/// pingora-ketama's V1 point: the same fields, the same derives and the same
/// hash-only ordering, so that `sort_unstable` moves equal hashes exactly as
/// it does there.
#[derive(Clone, Debug, Eq, PartialEq)]
struct PointV1 {
    node: u32,
    hash: u32,
}

impl Ord for PointV1 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.hash.cmp(&other.hash)
    }
}

impl PartialOrd for PointV1 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// pingora v1's ring: points in configuration order, each node's chain in
/// order, sorted with std's unstable sort exactly as pingora sorts them,
/// first of equal hashes kept. (Ranks are configuration indices here.)
fn v1_points(jobs: &[ChainJob], total: usize) -> Vec<u64> {
    let mut v: Vec<PointV1> = Vec::with_capacity(total);
    for j in jobs {
        crc::for_each_point(std::slice::from_ref(j), |tag, hash| {
            v.push(PointV1 { node: tag, hash })
        });
    }
    v.sort_unstable();
    let mut out: Vec<u64> = v.into_iter().map(|p| sort::pack(p.hash, p.node)).collect();
    sort::dedup_first(&mut out);
    out
}

/// A built consistent-hash ring: nodes in configuration order and their
/// sorted points in a [`Layout`].
///
/// Immutable once built; share it behind an `Arc` (or `ArcSwap`) between
/// threads. Cost: the layout's bytes per point plus the node table
/// (each node's server string plus 24 bytes).
#[derive(Clone, Debug)]
pub struct Ring {
    nodes: Box<[Node]>,
    pub(crate) points: Points,
    config: RingBuilder,
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
    pub(crate) labels: crate::subset::Labels,
}

impl Ring {
    /// Builds a ring with the defaults (`Nginx`, `Wide`, 160 points per
    /// weight unit). See [`RingBuilder`] for the others.
    pub fn new(nodes: Vec<Node>) -> Result<Ring> {
        RingBuilder::new().build(nodes)
    }

    /// `sorted`: the points as `sort::pack`ed, before they go into a layout
    /// (reading them there can cost more, as in `Compact`).
    fn assemble(
        nodes: Vec<Node>,
        sorted: Vec<u64>,
        config: RingBuilder,
        generated: u64,
        collisions: Collisions,
        labels: crate::subset::Labels,
    ) -> Ring {
        let mut owns = vec![false; nodes.len()];
        for &p in &sorted {
            owns[sort::node_of(p) as usize] = true;
        }
        let points = Points::new(config.layout, sorted, nodes.len());
        let live = nodes
            .iter()
            .zip(&owns)
            .filter(|(n, &o)| o && !n.is_down())
            .count();
        let mut down: Box<[u64]> = Box::new([]);
        if nodes.iter().any(|n| n.is_down()) {
            let mut bits = vec![0u64; nodes.len().div_ceil(64)];
            for (i, n) in nodes.iter().enumerate() {
                if n.is_down() {
                    bits[i / 64] |= 1 << (i % 64);
                }
            }
            down = bits.into_boxed_slice();
        }
        Ring {
            nodes: nodes.into_boxed_slice(),
            points,
            config,
            generated,
            live,
            down,
            collisions,
            labels,
        }
    }

    #[inline(always)]
    pub(crate) fn is_down(&self, n: usize) -> bool {
        !self.down.is_empty() && self.down[n / 64] & (1 << (n % 64)) != 0
    }

    /// The nodes in configuration order; lookups return references into it.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The scheme the ring was built with.
    pub fn compat(&self) -> Compat {
        self.config.compat
    }

    /// The storage layout.
    pub fn layout(&self) -> Layout {
        self.config.layout
    }

    /// Points per weight unit.
    pub fn point_multiple(&self) -> u32 {
        self.config.point_multiple
    }

    /// The settings the ring was built with.
    pub fn builder(&self) -> RingBuilder {
        self.config
    }

    /// Points on the ring after collisions were resolved.
    pub fn point_count(&self) -> usize {
        self.points.len()
    }

    /// Points generated before collisions were resolved (sum of weight x
    /// point multiple).
    pub fn generated_points(&self) -> u64 {
        self.generated
    }

    /// Heap bytes held by the points (not the node table).
    pub fn points_heap_bytes(&self) -> usize {
        self.points.heap_bytes()
    }

    /// The hash and owning node index of point `i` in ring order, or `None`
    /// past the end. `O(1)`.
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

    /// The hash ketama gives a key: CRC-32 of its bytes.
    #[inline]
    pub fn hash_key(key: &[u8]) -> u32 {
        crc::hash(key)
    }

    /// The node for a key: the owner of the first point at or after the
    /// key's hash, skipping `down` nodes. `None` when no node can serve.
    /// Cost: one CRC-32 of the key and an `O(log P)` search.
    #[inline]
    pub fn node(&self, key: &[u8]) -> Option<&Node> {
        self.node_for_hash(Self::hash_key(key))
    }

    /// The node for a precomputed 32-bit key hash.
    #[inline]
    pub fn node_for_hash(&self, hash: u32) -> Option<&Node> {
        self.node_index_for_hash(hash).map(|i| &self.nodes[i])
    }

    /// The index (into [`nodes`](Self::nodes)) of the node for a hash.
    #[inline]
    pub fn node_index_for_hash(&self, hash: u32) -> Option<usize> {
        if self.points.len() == 0 {
            return None;
        }
        let pos = self.points.search(hash);
        let n = self.points.node(pos);
        if !self.is_down(n) {
            return Some(n);
        }
        self.walk_from(pos).next()
    }

    /// Looks up many precomputed hashes at once: `out` is cleared and gets
    /// one entry per hash, as [`node_index_for_hash`](Self::node_index_for_hash)
    /// would answer. Independent keys' memory accesses overlap (groups of 16
    /// searched in lock step), which on rings larger than the CPU caches is
    /// several times the throughput of one lookup after another.
    pub fn node_indices_for_hashes(&self, hashes: &[u32], out: &mut Vec<Option<usize>>) {
        out.clear();
        if self.points.len() == 0 {
            out.resize(hashes.len(), None);
            return;
        }
        let mut pos = [0usize; crate::layout::GROUP];
        for qs in hashes.chunks(crate::layout::GROUP) {
            let pos = &mut pos[..qs.len()];
            self.points.search_batch(qs, pos);
            out.extend(pos.iter().map(|&p| {
                let n = self.points.node(p);
                if self.is_down(n) {
                    self.walk_from(p).next()
                } else {
                    Some(n)
                }
            }));
        }
    }

    /// The node for each key, looked up as a batch (see
    /// [`node_indices_for_hashes`](Self::node_indices_for_hashes)).
    pub fn nodes_for_keys<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<Option<&Node>> {
        let hashes: Vec<u32> = keys.iter().map(|k| Self::hash_key(k.as_ref())).collect();
        let mut idx = Vec::with_capacity(keys.len());
        self.node_indices_for_hashes(&hashes, &mut idx);
        idx.into_iter().map(|i| i.map(|i| &self.nodes[i])).collect()
    }

    /// Every distinct serving node once, in ring order from the key's point:
    /// the key's node first, then where it would fail over to. `down` nodes
    /// are skipped. Ends after the last distinct node (unlike pingora's
    /// `node_iter`, which cycles and repeats nodes).
    pub fn failover(&self, key: &[u8]) -> Failover<'_> {
        self.failover_for_hash(Self::hash_key(key))
    }

    /// [`failover`](Self::failover) for a precomputed hash.
    pub fn failover_for_hash(&self, hash: u32) -> Failover<'_> {
        if self.points.len() == 0 {
            return Failover {
                inner: self.walk_from(0),
            };
        }
        Failover {
            inner: self.walk_from(self.points.search(hash)),
        }
    }

    /// Up to `n` distinct serving nodes for a key, in failover order.
    pub fn replicas(&self, key: &[u8], n: usize) -> Vec<&Node> {
        self.failover(key).take(n).collect()
    }

    fn walk_from(&self, pos: usize) -> Walk<'_> {
        Walk {
            ring: self,
            cursor: FailoverCursor {
                pos,
                steps_left: self.points.len(),
                yielded: 0,
                seen: Seen::default(),
            },
        }
    }

    /// Checks the ring's invariants: hashes strictly increasing, every owner
    /// a known node of nonzero weight, no more points than generated, the
    /// live-node count right. Returns a description of the first violation.
    /// For tests and fuzz targets; `O(P)`.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        let n = self.points.len();
        if n as u64 > self.generated {
            return Err(format!("{n} points but only {} generated", self.generated));
        }
        let mut owns = vec![0u64; self.nodes.len()];
        for i in 0..n {
            let (h, node) = (self.points.hash(i), self.points.node(i));
            if i > 0 && self.points.hash(i - 1) >= h {
                return Err(format!("point {i}: hash {h:#x} not above the previous"));
            }
            let Some(nd) = self.nodes.get(node) else {
                return Err(format!("point {i}: owner {node} out of range"));
            };
            if nd.weight() == 0 {
                return Err(format!("point {i}: owner {} has weight 0", nd.server()));
            }
            owns[node] += 1;
        }
        for (node, &count) in self.nodes.iter().zip(&owns) {
            let max = node.weight() as u64 * self.config.point_multiple as u64;
            if count > max {
                return Err(format!(
                    "{} owns {count} points, more than {max}",
                    node.server()
                ));
            }
        }
        let live = self
            .nodes
            .iter()
            .zip(&owns)
            .filter(|(nd, &c)| c > 0 && !nd.is_down())
            .count();
        if live != self.live {
            return Err(format!("live count {} but {live} nodes serve", self.live));
        }
        Ok(())
    }
}

/// Iterator over distinct serving nodes in ring order; see
/// [`Ring::failover`]. Cost per node: the points walked to reach it; no
/// allocation for the first 16 nodes, then a bitset of one bit per node.
#[derive(Clone, Debug)]
pub struct Failover<'a> {
    inner: Walk<'a>,
}

impl<'a> Iterator for Failover<'a> {
    type Item = &'a Node;

    fn next(&mut self) -> Option<&'a Node> {
        self.inner.next().map(|i| &self.inner.ring.nodes[i])
    }
}

impl Failover<'_> {
    /// The next node's index into [`Ring::nodes`] instead of the node.
    pub fn next_index(&mut self) -> Option<usize> {
        self.inner.next()
    }
}

#[derive(Clone, Debug)]
struct Walk<'a> {
    ring: &'a Ring,
    cursor: FailoverCursor,
}

impl Iterator for Walk<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        self.ring.advance(&mut self.cursor)
    }
}

/// A failover walk's position, owned and detached from the ring: for
/// callers that cannot hold a [`Failover`] (which borrows the ring), such
/// as an iterator that owns an `Arc<Ring>`. Advance it with
/// [`Ring::advance`] on the ring that made it.
#[derive(Clone, Debug)]
pub struct FailoverCursor {
    pos: usize,
    steps_left: usize,
    yielded: usize,
    seen: Seen,
}

impl Ring {
    /// A detached failover walk from a hash's point; see [`FailoverCursor`].
    pub fn failover_cursor(&self, hash: u32) -> FailoverCursor {
        FailoverCursor {
            pos: if self.points.len() == 0 {
                0
            } else {
                self.points.search(hash)
            },
            steps_left: self.points.len(),
            yielded: 0,
            seen: Seen::default(),
        }
    }

    /// The next distinct serving node of a cursor's walk (its index), as
    /// [`Failover::next_index`] would give.
    pub fn advance(&self, c: &mut FailoverCursor) -> Option<usize> {
        let points = &self.points;
        while c.steps_left > 0 && c.yielded < self.live {
            let n = points.node(c.pos);
            c.pos += 1;
            if c.pos == points.len() {
                c.pos = 0;
            }
            c.steps_left -= 1;
            if self.is_down(n) {
                continue;
            }
            if c.seen.insert(n, self.nodes.len()) {
                c.yielded += 1;
                return Some(n);
            }
        }
        None
    }
}

const INLINE_SEEN: usize = 16;

/// The set of nodes a walk has yielded: inline for the first few, then a
/// bitset.
#[derive(Clone, Debug, Default)]
enum Seen {
    #[default]
    Empty,
    Inline(usize, [u32; INLINE_SEEN]),
    Bits(Vec<u64>),
}

impl Seen {
    /// Inserts `n`; returns whether it was new.
    fn insert(&mut self, n: usize, universe: usize) -> bool {
        match self {
            Seen::Empty => {
                let mut a = [0; INLINE_SEEN];
                a[0] = n as u32;
                *self = Seen::Inline(1, a);
                true
            }
            Seen::Inline(len, a) => {
                if a[..*len].contains(&(n as u32)) {
                    return false;
                }
                if *len < INLINE_SEEN {
                    a[*len] = n as u32;
                    *len += 1;
                    return true;
                }
                let mut bits = vec![0u64; universe.div_ceil(64)];
                for &m in a.iter() {
                    bits[m as usize / 64] |= 1 << (m % 64);
                }
                bits[n / 64] |= 1 << (n % 64);
                *self = Seen::Bits(bits);
                true
            }
            Seen::Bits(bits) => {
                let (w, b) = (n / 64, 1u64 << (n % 64));
                let new = bits[w] & b == 0;
                bits[w] |= b;
                new
            }
        }
    }
}
