//! Building a ring: validation before anything is allocated, point
//! generation, sorting and the collision rule.

use std::collections::HashMap;
use std::net::SocketAddr;

use super::Ring;
use super::{LabelIndex, Labels, LABEL_INDEX_MAX_LABELS};
use crate::continuum;
use crate::crc::{self, ChainJob};
use crate::error::{Error, Result};
use crate::layout::Points;
use crate::node::{nginx_host_port, pingora_prefix, Node};
use crate::settings::RingSettings;
use crate::sort::{self, Collisions};
use crate::{Layout, Scheme};

/// The most points a ring may have (2^28 = 268,435,456), checked before
/// anything is allocated. A build needs 16 bytes per point at its peak
/// (points plus the radix sort's scratch), so the cap keeps a build under
/// 4 GiB while still covering 2,048 nodes at 100,000 points each.
pub const MAX_POINTS: u64 = 1 << 28;

/// Builds a [`Ring`] with chosen [`RingSettings`].
///
/// ```
/// use ketama::{Scheme, Layout, Node, RingBuilder};
/// let ring = RingBuilder::new()
///     .compat(Scheme::PingoraV2)
///     .layout(Layout::Packed)
///     .point_multiple(16)
///     .build(vec![Node::new("10.0.0.1:443", 1), Node::new("10.0.0.2:443", 2)])?;
/// assert_eq!(ring.point_count(), 48);
/// # Ok::<(), ketama::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RingBuilder {
    pub(super) settings: RingSettings,
    no_label_index: bool,
    pub(super) threads: usize,
    /// Rings of fewer old points rebuild on one thread (spawning costs more
    /// than it saves); tests lower it.
    pub(super) parallel_min_points: usize,
}

/// Old points from which [`RingBuilder::rebuild`] splits its merge across
/// [`RingBuilder::threads`].
const PARALLEL_MIN_POINTS: usize = 1 << 18;

impl Default for RingBuilder {
    fn default() -> Self {
        RingSettings::default().into()
    }
}

impl From<RingSettings> for RingBuilder {
    fn from(settings: RingSettings) -> Self {
        RingBuilder {
            settings: settings.normalized(),
            no_label_index: false,
            threads: 1,
            parallel_min_points: PARALLEL_MIN_POINTS,
        }
    }
}

impl RingBuilder {
    /// [`RingSettings::default`]: `Nginx` scheme, `Wide` layout, 160 points
    /// per weight unit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the hashing scheme.
    pub fn compat(mut self, compat: Scheme) -> Self {
        self.settings.compat = compat;
        self.settings = self.settings.normalized();
        self
    }

    /// Sets the storage layout.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.settings.layout = layout;
        self
    }

    /// Sets the number of points per weight unit (under a scheme that
    /// fixes it, the default, 160, stands for the scheme's own).
    pub fn point_multiple(mut self, point_multiple: u32) -> Self {
        self.settings.point_multiple = point_multiple;
        self.settings = self.settings.normalized();
        self
    }

    /// Whether rings whose nodes carry labels get a label index (default:
    /// yes): one bit per point and label, for rings of at most
    /// [`LABEL_INDEX_MAX_LABELS`](crate::subset::LABEL_INDEX_MAX_LABELS)
    /// labels under a scheme that takes requirements. With it, a lookup
    /// under a [`Requirement`](crate::Requirement) skips 64 ineligible
    /// points with a few word ANDs instead of visiting each; without it,
    /// the ring is `F` bits a point smaller (0.625 bytes at 5 labels) and
    /// the walk visits every point. Routing is the same either way.
    pub fn label_index(mut self, on: bool) -> Self {
        self.no_label_index = !on;
        self
    }

    /// Threads a build or [`rebuild`](Self::rebuild) of a large ring
    /// (2^18 points or more) may use (default 1; at most 16), as scoped
    /// threads that end before it returns: a rebuild's merge of old and
    /// new points is split by ranges of hashes, the `Compact` layout's
    /// packing by ranges of points, and the ring is the same, bit for bit,
    /// whatever the count. Measured at 8.7M points (10,000 nodes, one
    /// weight changed, `Compact`, 2 cores): a rebuild 125 ms on two
    /// threads, 165-200 ms on one. The crc chains and the sort of a build
    /// from scratch stay on the calling thread.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// The settings rings from this builder get.
    pub fn settings(&self) -> RingSettings {
        self.settings
    }

    /// `sorted`: the points as `sort::pack`ed, before they go into a layout
    /// (reading them there can cost more, as in `Compact`).
    pub(super) fn assemble(
        &self,
        nodes: Vec<Node>,
        sorted: Vec<u64>,
        generated: u64,
        collisions: Collisions,
        labels: Labels,
        like: Option<&Points>,
    ) -> Ring {
        let settings = self.settings;
        let mut owns = vec![false; nodes.len()];
        for &p in &sorted {
            owns[sort::node_of(p) as usize] = true;
        }
        let label_index = if !self.no_label_index
            && labels.names().count() <= LABEL_INDEX_MAX_LABELS
            && settings.compat.requirement_obstacle().is_none()
            && !settings.compat.dedicated_subsets()
            && !settings.compat.nearer()
        {
            LabelIndex::new(&sorted, &labels, &collisions)
        } else {
            LabelIndex::default()
        };
        let points = match like {
            Some(old) => Points::new_like(settings.layout, sorted, nodes.len(), old, self.threads),
            None => Points::new(settings.layout, sorted, nodes.len(), self.threads),
        };
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
            id: super::next_ring_id(),
            nodes: nodes.into_boxed_slice(),
            points,
            settings,
            generated,
            live,
            down,
            collisions,
            labels,
            label_index,
            lows: Box::new([]),
        }
    }

    /// Builds a ring from `nodes` in configuration order.
    ///
    /// Cost: `O(P)` time for P points (crc chain and a 3-pass radix sort;
    /// `PingoraV1` uses a comparison sort, `O(P log P)`), 16 bytes per point
    /// at the peak, then the layout's bytes per point.
    pub fn build(&self, nodes: Vec<Node>) -> Result<Ring> {
        let s = self.settings;
        let addrs = self.validate(&nodes)?;
        if s.compat.is_memcached() {
            return self.build_continuum(nodes);
        }
        if s.compat.is_envoy() {
            return self.build_envoy(nodes);
        }
        if let Scheme::Haproxy(_) = s.compat {
            return self.build_haproxy(nodes);
        }
        let total = self.count_points(&nodes)?;
        let labels = Labels::new(&nodes)?;
        let order = tie_order(s.compat, nodes.len(), &addrs);
        let jobs: Vec<ChainJob> = self.jobs(&nodes, &addrs, &order, |_| true);
        let rank_to_node: Vec<u32> = order.iter().map(|&i| i as u32).collect();
        let (points, collisions) = if s.compat == Scheme::PingoraV1 {
            (v1_points(&jobs, total as usize), Collisions::default())
        } else {
            sort::generate_sorted(&jobs[..], total as usize, &rank_to_node)
        };
        Ok(self.assemble(nodes, points, total, collisions, labels, None))
    }

    /// The memcached schemes' build: MD5 points generated once into memory
    /// (too costly to generate again if the sort's fill falls back to two
    /// passes, which CRC chains simply rerun), then the same radix sort and
    /// collision rule.
    fn build_continuum(&self, nodes: Vec<Node>) -> Result<Ring> {
        let s = self.settings;
        let names = continuum::validate(&nodes, s.compat)?;
        let counts = continuum::point_counts(&nodes);
        let total = self.count_points(&nodes)?;
        let labels = Labels::new(&nodes)?;
        let order = continuum::tie_order(s.compat, &names);
        let raw = continuum::generate(&names, &counts, &order);
        let rank_to_node: Vec<u32> = order.iter().map(|&i| i as u32).collect();
        let (points, collisions) = sort::generate_sorted(&raw[..], total as usize, &rank_to_node);
        drop(raw);
        Ok(self.assemble(nodes, points, total, collisions, labels, None))
    }

    /// HAProxy's build: ids resolved by its counter rule and written into
    /// the nodes (so that a ring of a subset of them, or a tool printing
    /// them, sees the same ids), then `full_hash(id x 4096 + j)` points
    /// through the same radix sort; a bijection, so nothing collides.
    fn build_haproxy(&self, nodes: Vec<Node>) -> Result<Ring> {
        let explicit: Vec<Option<u32>> = nodes.iter().map(|n| n.id()).collect();
        let ids = crate::haproxy::resolve_ids(&explicit).map_err(|(a, b)| Error::DuplicateId {
            first: nodes[a].server().to_string(),
            second: nodes[b].server().to_string(),
            id: explicit[a].unwrap_or(0),
        })?;
        let total = self.count_points(&nodes)?;
        let labels = Labels::new(&nodes)?;
        let counts = self.node_points(&nodes);
        let nodes: Vec<Node> = nodes
            .into_iter()
            .zip(&ids)
            .map(|(n, &id)| n.with_id(id))
            .collect();
        let rank_to_node: Vec<u32> = (0..nodes.len() as u32).collect();
        let source = crate::haproxy::Points {
            ids: &ids,
            counts: &counts,
        };
        let (points, collisions) = sort::generate_sorted(&source, total as usize, &rank_to_node);
        Ok(self.assemble(nodes, points, total, collisions, labels, None))
    }

    /// Envoy's and gRPC's build ([`crate::envoy`]): a `ring_hash` ring's
    /// 64-bit entries split into top bits in the layout and low bits
    /// beside it, or a Maglev table as a ring of one point per slot. Each
    /// node hashes its server string.
    fn build_envoy(&self, nodes: Vec<Node>) -> Result<Ring> {
        let labels = Labels::new(&nodes)?;
        let keys: Vec<&[u8]> = nodes.iter().map(|n| n.server().as_bytes()).collect();
        let weights: Vec<u32> = nodes.iter().map(|n| n.weight()).collect();
        match self.settings.compat {
            Scheme::EnvoyRingHash(r) => {
                let counts = r.entry_counts(&weights);
                let entries = r.entries(&keys, &counts);
                let total = entries.len() as u64;
                let sorted = entries
                    .iter()
                    .map(|&(h, n)| sort::pack((h >> 32) as u32, n))
                    .collect();
                let lows = entries.iter().map(|&(h, _)| h as u32).collect();
                drop(keys);
                let mut ring =
                    self.assemble(nodes, sorted, total, Collisions::default(), labels, None);
                ring.lows = lows;
                Ok(ring)
            }
            Scheme::Maglev(m) => {
                let table = crate::envoy::maglev_table(&m, &keys, &weights);
                let sorted = table
                    .iter()
                    .enumerate()
                    .map(|(s, &n)| sort::pack(m.slot_hash(s as u64), n))
                    .collect();
                drop(keys);
                let total = table.len() as u64;
                // Compact keeps owners only, the slots' hashes computed:
                // the ring is assembled as Wide (the cheapest), then its
                // points swapped.
                let compact = self.settings.layout == Layout::Compact;
                let b = if compact {
                    self.layout(Layout::Wide)
                } else {
                    *self
                };
                let n = nodes.len();
                let mut ring =
                    b.assemble(nodes, sorted, total, Collisions::default(), labels, None);
                if compact {
                    ring.points = Points::Table(crate::layout::Table::new(&table, n));
                    ring.settings = self.settings;
                }
                Ok(ring)
            }
            _ => unreachable!("build_envoy is called for Envoy's schemes only"),
        }
    }

    /// The point chains of the nodes `include` accepts, tagged with their
    /// rank in `order`.
    pub(super) fn jobs(
        &self,
        nodes: &[Node],
        addrs: &[SocketAddr],
        order: &[usize],
        include: impl Fn(usize) -> bool,
    ) -> Vec<ChainJob> {
        let s = self.settings;
        let mut prefix = Vec::with_capacity(48);
        order
            .iter()
            .enumerate()
            .filter(|&(_, &i)| include(i))
            .map(|(rank, &i)| {
                let count = nodes[i].weight() as u64 * s.point_multiple as u64;
                if s.compat == Scheme::Nginx {
                    let (host, port) = nginx_host_port(nodes[i].server());
                    ChainJob::new(&[host, b"\0", port], count, rank as u32)
                } else {
                    pingora_prefix(&addrs[i], &mut prefix);
                    ChainJob::new(&[&prefix], count, rank as u32)
                }
            })
            .collect()
    }

    /// The points each node generates: `weight x point multiple`, or the
    /// memcached schemes' share of `160 x N` ([`crate::continuum`]).
    /// `O(N)`, never fails: a caller can see a configuration's points
    /// before building it.
    /// Under Maglev, the slots each node's table gives it (`O(M)`: the
    /// table is built).
    pub fn node_points(&self, nodes: &[Node]) -> Vec<u64> {
        let weights = || nodes.iter().map(|n| n.weight()).collect::<Vec<u32>>();
        if self.settings.compat.is_memcached() {
            continuum::point_counts(nodes)
        } else if let Scheme::EnvoyRingHash(r) = self.settings.compat {
            r.entry_counts(&weights())
        } else if let Scheme::Maglev(m) = self.settings.compat {
            let keys: Vec<&[u8]> = nodes.iter().map(|n| n.server().as_bytes()).collect();
            let mut counts = vec![0u64; nodes.len()];
            if m.problem().is_none() {
                for n in crate::envoy::maglev_table(&m, &keys, &weights()) {
                    counts[n as usize] += 1;
                }
            }
            counts
        } else {
            let m = self.settings.point_multiple as u64;
            nodes.iter().map(|n| n.weight() as u64 * m).collect()
        }
    }

    /// Checks everything that can be wrong before allocating; returns the
    /// parsed socket addresses for the pingora schemes.
    pub(super) fn validate(&self, nodes: &[Node]) -> Result<Vec<SocketAddr>> {
        let s = self.settings;
        if s.point_multiple == 0 {
            return Err(Error::ZeroPointMultiple);
        }
        if let Some(reason) = s.compat.settings_problem() {
            return Err(Error::SchemeSettings {
                compat: s.compat,
                reason,
            });
        }
        if let Some(m) = s.compat.fixed_point_multiple() {
            if s.point_multiple != m {
                return Err(Error::FixedPointMultiple {
                    compat: s.compat,
                    given: s.point_multiple,
                });
            }
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
        if nodes.len() > s.compat.max_nodes() {
            return Err(Error::TooManyNodesForCompat {
                nodes: nodes.len(),
                max: s.compat.max_nodes(),
                compat: s.compat,
            });
        }
        if nodes.len() > s.layout.max_nodes() {
            return Err(Error::TooManyNodesForLayout {
                nodes: nodes.len(),
                max: s.layout.max_nodes(),
                layout: s.layout,
            });
        }
        if !matches!(s.compat, Scheme::Twemproxy(_)) {
            if let Some(n) = nodes.iter().find(|n| n.name().is_some()) {
                return Err(Error::UnusableServer {
                    server: n.server().to_string(),
                    compat: s.compat,
                    reason: format!(
                        "name= is a twemproxy server name and {} does not use one: remove it or use the twemproxy scheme",
                        s.compat
                    ),
                });
            }
        }
        if let Scheme::Haproxy(_) = s.compat {
            let max = crate::haproxy::MAX_WEIGHT;
            if let Some(n) = nodes.iter().find(|n| n.weight() > max) {
                return Err(Error::UnusableServer {
                    server: n.server().to_string(),
                    compat: s.compat,
                    reason: format!(
                        "weight {} is over HAProxy's largest, {max}: scale the weights into 0..={max}",
                        n.weight()
                    ),
                });
            }
            let max = crate::haproxy::MAX_ID;
            if let Some(n) = nodes.iter().find(|n| n.id().is_some_and(|id| id > max)) {
                return Err(Error::UnusableServer {
                    server: n.server().to_string(),
                    compat: s.compat,
                    reason: format!(
                        "its id is over {max}: HAProxy's point numbers (id x 4096) would wrap onto another server's; use a smaller id"
                    ),
                });
            }
        } else if let Some(n) = nodes.iter().find(|n| n.id().is_some()) {
            return Err(Error::UnusableServer {
                server: n.server().to_string(),
                compat: s.compat,
                reason: format!(
                    "id= is a HAProxy server id and {} does not use one: remove it or use the haproxy scheme",
                    s.compat
                ),
            });
        }
        if !s.compat.needs_socket_addrs() {
            return Ok(Vec::new());
        }
        let mut addrs = Vec::with_capacity(nodes.len());
        let mut by_addr: HashMap<SocketAddr, usize> = HashMap::with_capacity(nodes.len());
        for (i, node) in nodes.iter().enumerate() {
            let addr: SocketAddr = node.server().parse().map_err(|_| Error::NotSocketAddr {
                server: node.server().to_string(),
                compat: s.compat,
            })?;
            if let Some(first) = by_addr.insert(addr, i) {
                return Err(Error::DuplicateAddress {
                    first: nodes[first].server().to_string(),
                    second: node.server().to_string(),
                    addr,
                    compat: s.compat,
                });
            }
            addrs.push(addr);
        }
        Ok(addrs)
    }

    /// The ring's generated points, or the error naming the node at which
    /// the total passes [`MAX_POINTS`]. Never allocates: a caller can check
    /// a configuration's size before building it.
    pub fn count_points(&self, nodes: &[Node]) -> Result<u64> {
        let m = self.settings.point_multiple;
        let counts = self.node_points(nodes);
        let mut total: u64 = 0;
        for (index, (node, &n)) in nodes.iter().zip(&counts).enumerate() {
            // Each count is at most u32 x u32, which fits in u64; the sum is
            // checked against the cap at every step, so it cannot overflow
            // either.
            total += n;
            if total > MAX_POINTS {
                return Err(Error::TooManyPoints {
                    server: node.server().to_string(),
                    index,
                    weight: node.weight(),
                    point_multiple: m,
                    node_points: n,
                    total,
                    max: MAX_POINTS,
                });
            }
        }
        Ok(total)
    }
}

/// Node indices in tie order: each point carries its node's rank in it, and
/// among equal hashes the smallest rank wins. Configuration order for nginx
/// (and for v1, whose sort then decides ties), address order for pingora
/// v2.
pub(super) fn tie_order(compat: Scheme, nodes: usize, addrs: &[SocketAddr]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..nodes).collect();
    if compat == Scheme::PingoraV2 {
        order.sort_by_key(|&i| addrs[i]);
    }
    order
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
