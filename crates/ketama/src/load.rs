//! Consistent hashing with bounded loads (Mirrokni, Thorup and
//! Zadimoghaddam, SODA 2018): a request goes to the first node in its
//! failover order whose load after taking it stays within its bound, so a
//! hot key spills to the next node in ring order instead of piling onto
//! one, and keys stay where they are while their node has room.
//!
//! # The bound
//!
//! With `T` requests in flight over the serving nodes eligible for the
//! request (healthy, carrying its labels), `W` their total weight and `c`
//! the balance factor, node `i` of weight `w_i` may hold
//!
//! ```text
//! bound_i = ceil(c x (T + 1) x w_i / W)
//! ```
//!
//! requests once this one is placed (equal weights give the paper's
//! `ceil(c x average)`). The bound is checked when a request is placed;
//! releases lower the average without moving requests already placed, so a
//! node may sit above the current bound until its requests finish (the
//! paper's guarantee is at placement). A slot is taken with a
//! compare-and-swap, so two threads never both take a node's last slot.
//! If every node is at its bound (possible only through rounding or
//! races), the request goes to the first node in failover order.
//!
//! # Cost
//!
//! [`LoadTracker`]: a 4-byte counter per server, plus an 8-byte total per
//! prepared label requirement (and 4 bytes per node of a migration's new
//! ring when its servers differ from the old one's). Placing a request: the plain decision, then
//! one compare-and-swap per node tried, plus one atomic add per total that
//! counts the node; releasing: the same adds, in the [`LoadGuard`]'s drop.
//! With the factor off, or loads under their bounds, the answer is exactly
//! the plain ring's.

use std::fmt;
use std::sync::atomic::{
    AtomicU32, AtomicU64, Ordering::AcqRel, Ordering::Acquire, Ordering::Relaxed,
};
use std::sync::Arc;

use crate::route::{Need, Route, RouteTable};
use crate::{Node, Version};

/// How far above the average a node may go, in percent: 125 allows 1.25x
/// the average. 100 (perfect balance, as Envoy allows) to 1000.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BalanceFactor(u16);

/// A balance factor outside 100..=1000 percent.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("balance factor {0} is out of range: give a percentage from 100 (perfect balance) to 1000, e.g. 125 for 1.25x the average")]
pub struct BadFactor(pub u32);

impl BalanceFactor {
    /// The largest factor, 1000 percent.
    pub const MAX: BalanceFactor = BalanceFactor(1000);

    /// A factor in percent (100 to 1000).
    pub fn new(percent: u32) -> Result<Self, BadFactor> {
        if (100..=1000).contains(&percent) {
            Ok(BalanceFactor(percent as u16))
        } else {
            Err(BadFactor(percent))
        }
    }

    /// The factor in percent.
    pub fn percent(self) -> u32 {
        self.0 as u32
    }

    /// `ceil(c x (in_flight + 1) x weight / total_weight)`: how many
    /// requests a node of `weight` may hold once the next one is placed.
    #[inline]
    pub fn bound(self, in_flight: u64, weight: u32, total_weight: u64) -> u64 {
        if total_weight == 0 {
            return u64::MAX;
        }
        let num = self.0 as u128 * (in_flight as u128 + 1) * weight as u128;
        let den = 100u128 * total_weight as u128;
        num.div_ceil(den).min(u64::MAX as u128) as u64
    }
}

impl fmt::Display for BalanceFactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// Requests in flight per server, shared by every thread placing them.
///
/// Made for a [`RouteTable`] (its servers, and a total per label
/// requirement prepared on it so far). During a migration a server on
/// both rings has one count, whichever ring routed to it: its load is
/// the same requests. Servers are matched by their server string.
#[derive(Debug)]
pub struct LoadTracker {
    /// Per server (the old or only ring's nodes first, in node order, then
    /// servers only the new ring has).
    counts: Box<[AtomicU32]>,
    /// The new ring's node index to its server's count, when the rings'
    /// node lists differ (`None`: the same list, index = count).
    new_slots: Option<Box<[u32]>>,
    total: AtomicU64,
    /// Per prepared need (by its index, up to 64): requests in flight on
    /// servers eligible for it.
    need_totals: Box<[AtomicU64]>,
    /// Per server: which needs it is eligible for (bit = need index).
    eligible_for: Box<[u64]>,
    table: u64,
}

impl LoadTracker {
    /// A tracker for `table`'s servers and the label requirements prepared
    /// on it so far (the first 64; others count against the global total).
    /// `O(N)` (a hash of the server strings when a migration's rings list
    /// different servers).
    pub fn new(table: &RouteTable) -> Self {
        let old = table.ring(Version::Old).nodes();
        let mut slots = old.len();
        let new_slots = match table.migration() {
            Some(m) => {
                let new = m.new_ring().nodes();
                let same = new.len() == old.len()
                    && new.iter().zip(old).all(|(a, b)| a.server() == b.server());
                (!same).then(|| {
                    let by_server: std::collections::HashMap<&str, usize> = old
                        .iter()
                        .enumerate()
                        .map(|(i, n)| (n.server(), i))
                        .collect();
                    new.iter()
                        .map(|n| {
                            by_server.get(n.server()).copied().unwrap_or_else(|| {
                                slots += 1;
                                slots - 1
                            }) as u32
                        })
                        .collect::<Box<[u32]>>()
                })
            }
            None => None,
        };
        let needs = table.need_count().min(64);
        let mut eligible_for = vec![0u64; slots];
        for k in 0..needs {
            for &v in table.versions() {
                let req = table.requirement_at(k, v);
                for i in 0..table.ring(v).nodes().len() {
                    if req.is_eligible(i) {
                        let slot = match (&new_slots, v) {
                            (Some(map), Version::New) => map[i] as usize,
                            _ => i,
                        };
                        eligible_for[slot] |= 1 << k;
                    }
                }
            }
        }
        LoadTracker {
            counts: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            new_slots,
            total: AtomicU64::new(0),
            need_totals: (0..needs).map(|_| AtomicU64::new(0)).collect(),
            eligible_for: eligible_for.into_boxed_slice(),
            table: table.id(),
        }
    }

    /// Where node `n` of a version's ring is counted.
    #[inline]
    fn slot(&self, v: Version, n: usize) -> usize {
        match (&self.new_slots, v) {
            (Some(map), Version::New) => map[n] as usize,
            _ => n,
        }
    }

    /// Requests in flight on node `i` of the old (or only) ring.
    pub fn load(&self, i: usize) -> u32 {
        self.load_on(Version::Old, i)
    }

    /// Requests in flight on node `i` of a version's ring (0 for an index
    /// past its nodes).
    pub fn load_on(&self, v: Version, i: usize) -> u32 {
        if v == Version::New && self.new_slots.as_ref().is_some_and(|m| i >= m.len()) {
            return 0;
        }
        self.counts
            .get(self.slot(v, i))
            .map_or(0, |c| c.load(Relaxed))
    }

    /// Requests in flight on every server.
    pub fn total(&self) -> u64 {
        self.total.load(Relaxed)
    }

    /// Requests in flight on the servers eligible for `need` (every server
    /// for none).
    pub fn total_for(&self, need: Option<Need>) -> u64 {
        match need.map(|n| n.index() as usize) {
            Some(k) if k < self.need_totals.len() => self.need_totals[k].load(Relaxed),
            _ => self.total(),
        }
    }

    /// Takes a slot on server `s` if its load after stays within `bound`.
    #[inline]
    fn try_take(&self, s: usize, bound: u64) -> bool {
        let c = &self.counts[s];
        let mut cur = c.load(Acquire);
        loop {
            if cur as u64 + 1 > bound {
                return false;
            }
            match c.compare_exchange_weak(cur, cur + 1, AcqRel, Acquire) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    fn add_totals(&self, s: usize, up: bool) {
        let add = |a: &AtomicU64| {
            if up {
                a.fetch_add(1, Relaxed);
            } else {
                a.fetch_sub(1, Relaxed);
            }
        };
        add(&self.total);
        let mut bits = self.eligible_for[s];
        while bits != 0 {
            add(&self.need_totals[bits.trailing_zeros() as usize]);
            bits &= bits - 1;
        }
    }
}

/// A placed request's slot on a node, given back when dropped (the request
/// ended, however it ended): it cannot leak.
#[derive(Debug)]
pub struct LoadGuard {
    tracker: Arc<LoadTracker>,
    slot: usize,
}

impl Drop for LoadGuard {
    fn drop(&mut self) {
        self.tracker.counts[self.slot].fetch_sub(1, Relaxed);
        self.tracker.add_totals(self.slot, false);
    }
}

/// Where a request was placed by [`RouteTable::next_bounded`].
#[derive(Debug)]
pub struct Placement {
    /// The node (its index in the route version's ring).
    pub node: usize,
    /// How many usable nodes before it were full (0: the plain answer).
    pub spills: u32,
    /// The first of them (the key's own node, when it was usable).
    pub from: Option<usize>,
    /// Its slot; drop it when the request ends.
    pub guard: LoadGuard,
}

impl RouteTable {
    /// The route's next node with room: the first usable node in failover
    /// order whose load after this request stays within its bound (see the
    /// [module docs](crate::load)); if every usable node is full, the first
    /// usable one. `total_weight` is the weight of the serving nodes
    /// eligible for the route (see [`serving_weight`](Self::serving_weight);
    /// callers cache it, as it changes only with health; 0 places without a
    /// bound, still counting the load). Nodes passed over
    /// are not offered again by this route.
    ///
    /// With nothing in flight above the bounds this is exactly
    /// [`next_where`](Self::next_where). Errors on a tracker made for
    /// another table and, as `next`, on a route another table made.
    pub fn next_bounded(
        &self,
        route: &mut Route,
        tracker: &Arc<LoadTracker>,
        factor: BalanceFactor,
        total_weight: u64,
        mut usable: impl FnMut(usize) -> bool,
    ) -> crate::Result<Option<Placement>> {
        if tracker.table != self.id() {
            return Err(crate::Error::ForeignTracker);
        }
        let in_flight = tracker.total_for(route.need());
        let v = route.version();
        let nodes = self.ring(v).nodes();
        let mut first = None;
        let mut spills = 0u32;
        while let Some(n) = self.next_where(route, &mut usable)? {
            let bound = factor.bound(in_flight, nodes[n].weight(), total_weight);
            let slot = tracker.slot(v, n);
            if tracker.try_take(slot, bound) {
                tracker.add_totals(slot, true);
                return Ok(Some(Placement {
                    node: n,
                    spills,
                    from: first,
                    guard: LoadGuard {
                        tracker: tracker.clone(),
                        slot,
                    },
                }));
            }
            first.get_or_insert(n);
            spills += 1;
        }
        Ok(first.map(|n| {
            let slot = tracker.slot(v, n);
            tracker.counts[slot].fetch_add(1, Relaxed);
            tracker.add_totals(slot, true);
            Placement {
                node: n,
                spills: 0,
                from: None,
                guard: LoadGuard {
                    tracker: tracker.clone(),
                    slot,
                },
            }
        }))
    }

    /// How many nodes of a version's ring are eligible for `need` and not
    /// down: the size of the group a route of that need and version picks
    /// from (nginx never takes the one server of a group of one out of
    /// rotation). `O(N)`.
    pub fn group_size(&self, need: Option<Need>, v: Version) -> usize {
        self.serving(need, v).count()
    }

    /// The nodes of a version's ring, by index, that are eligible for
    /// `need` and not down.
    fn serving(&self, need: Option<Need>, v: Version) -> impl Iterator<Item = (usize, &Node)> {
        let req = need.and_then(|n| self.requirement(n, v));
        self.ring(v)
            .nodes()
            .iter()
            .enumerate()
            .filter(move |(i, n)| !n.is_down() && req.is_none_or(|r| r.is_eligible(*i)))
    }

    /// The total weight of the nodes of a version's ring that are eligible
    /// for `need`, not down, and `usable` (healthy): the `W` of the bound.
    /// `O(N)`.
    pub fn serving_weight(
        &self,
        need: Option<Need>,
        v: Version,
        mut usable: impl FnMut(usize) -> bool,
    ) -> u64 {
        self.serving(need, v)
            .filter(|(i, _)| usable(*i))
            .map(|(_, n)| n.weight() as u64)
            .sum()
    }
}
