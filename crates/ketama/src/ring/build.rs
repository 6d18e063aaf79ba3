//! Building a ring: validation before anything is allocated, point
//! generation, sorting and the collision rule.

use std::collections::HashMap;
use std::net::SocketAddr;

use super::Ring;
use crate::crc::{self, ChainJob};
use crate::error::{Error, Result};
use crate::node::{nginx_host_port, pingora_prefix, Node};
use crate::settings::RingSettings;
use crate::sort::{self, Collisions};
use crate::subset::Labels;
use crate::{Compat, Layout};

/// The most points a ring may have (2^28 = 268,435,456), checked before
/// anything is allocated. A build needs 16 bytes per point at its peak
/// (points plus the radix sort's scratch), so the cap keeps a build under
/// 4 GiB while still covering 2,048 nodes at 100,000 points each.
pub const MAX_POINTS: u64 = 1 << 28;

/// Builds a [`Ring`] with chosen [`RingSettings`].
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct RingBuilder {
    settings: RingSettings,
}

impl From<RingSettings> for RingBuilder {
    fn from(settings: RingSettings) -> Self {
        RingBuilder { settings }
    }
}

impl RingBuilder {
    /// [`RingSettings::default`]: `Nginx` scheme, `Wide` layout, 160 points
    /// per weight unit.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the hashing scheme.
    pub fn compat(mut self, compat: Compat) -> Self {
        self.settings.compat = compat;
        self
    }

    /// Sets the storage layout.
    pub fn layout(mut self, layout: Layout) -> Self {
        self.settings.layout = layout;
        self
    }

    /// Sets the number of points per weight unit.
    pub fn point_multiple(mut self, point_multiple: u32) -> Self {
        self.settings.point_multiple = point_multiple;
        self
    }

    /// The settings rings from this builder get.
    pub fn settings(&self) -> RingSettings {
        self.settings
    }

    /// Builds a ring from `nodes` in configuration order.
    ///
    /// Cost: `O(P)` time for P points (crc chain and a 3-pass radix sort;
    /// `PingoraV1` uses a comparison sort, `O(P log P)`), 16 bytes per point
    /// at the peak, then the layout's bytes per point.
    pub fn build(&self, nodes: Vec<Node>) -> Result<Ring> {
        let s = self.settings;
        let addrs = self.validate(&nodes)?;
        let total = self.count_points(&nodes)?;
        let labels = Labels::new(&nodes)?;

        // Each point carries its node's rank in the tie order:
        // configuration order for nginx (and for v1, whose sort then
        // decides ties), address order for pingora v2. Among equal hashes
        // the smallest rank wins.
        let order: Vec<usize> = match s.compat {
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
                let count = nodes[i].weight() as u64 * s.point_multiple as u64;
                if s.compat == Compat::Nginx {
                    let (host, port) = nginx_host_port(nodes[i].server());
                    ChainJob::new(&[host, b"\0", port], count, rank as u32)
                } else {
                    pingora_prefix(&addrs[i], &mut prefix);
                    ChainJob::new(&[&prefix], count, rank as u32)
                }
            })
            .collect();
        let rank_to_node: Vec<u32> = order.iter().map(|&i| i as u32).collect();
        let (points, collisions) = if s.compat == Compat::PingoraV1 {
            (v1_points(&jobs, total as usize), Collisions::default())
        } else {
            sort::generate_sorted(&jobs, total as usize, &rank_to_node)
        };
        Ok(Ring::assemble(nodes, points, s, total, collisions, labels))
    }

    /// Checks everything that can be wrong before allocating; returns the
    /// parsed socket addresses for the pingora schemes.
    fn validate(&self, nodes: &[Node]) -> Result<Vec<SocketAddr>> {
        let s = self.settings;
        if s.point_multiple == 0 {
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
        let mut total: u64 = 0;
        for (index, node) in nodes.iter().enumerate() {
            // u32 x u32 always fits in u64; the sum is checked against the cap
            // at every step, so it cannot overflow either.
            let n = node.weight() as u64 * m as u64;
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
