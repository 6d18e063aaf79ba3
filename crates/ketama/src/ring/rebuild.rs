//! Rebuilding a ring from an old one: the points of nodes that kept their
//! point chain are reused, only changed nodes' chains are generated and
//! merged in.

use std::collections::HashMap;

use super::build::tie_order;
use super::{Labels, Ring};
use crate::crc;
use crate::error::Result;
use crate::node::Node;
use crate::sort::{self, Collisions};
use crate::{RingBuilder, Scheme};

impl RingBuilder {
    /// Builds the ring of `nodes` reusing the points of `old`, a ring built
    /// before with the same settings: the result routes exactly as
    /// [`build`](Self::build)'s (same points, same collision winners and
    /// lists, same lookups; a `Compact` ring keeps `old`'s bucket sizes when
    /// the point count is about the same, so its bytes may differ by a few
    /// bits a bucket), but only nodes that are new, or whose weight
    /// changed, have their points generated; the rest are read from `old`
    /// and merged in.
    /// A reload that changes one backend of 10,000 then costs one pass over
    /// the old points and the layout's packing, not a full generation and
    /// sort.
    ///
    /// Falls back to a full build when nothing can be reused: other
    /// settings, the `PingoraV1` scheme (its ties follow std's unstable
    /// sort), the memcached schemes (every server's point count depends on
    /// all the weights), nodes that kept their points but changed their
    /// relative order in the tie order (nginx ties follow configuration
    /// order), or fewer than half of the points reusable.
    ///
    /// Cost: `O(P + Q log Q)` for P points and Q new ones; 8 bytes per
    /// point at the peak, then the layout's bytes. Measured at 8.7M points
    /// (10,000 nodes, one weight changed, `Compact`): about 0.7x a full
    /// build's time; what remains is reading the old points out of their
    /// layout and packing the new ones.
    pub fn rebuild(&self, old: &Ring, nodes: Vec<Node>) -> Result<Ring> {
        let s = self.settings;
        if old.settings() != s || s.compat == Scheme::PingoraV1 || s.compat.is_memcached() {
            return self.build(nodes);
        }
        let addrs = self.validate(&nodes)?;
        let total = self.count_points(&nodes)?;
        let labels = Labels::new(&nodes)?;
        let order = tie_order(s.compat, nodes.len(), &addrs);
        let mut rank_of = vec![0u32; nodes.len()];
        for (rank, &i) in order.iter().enumerate() {
            rank_of[i] = rank as u32;
        }

        // Old node -> its new rank, for nodes whose points are unchanged
        // (same server string, hence same address, and same weight).
        let by_server: HashMap<&str, usize> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.server(), i))
            .collect();
        let old_nodes = old.nodes();
        let mut kept = vec![false; nodes.len()];
        let mut old_to_rank = vec![u32::MAX; old_nodes.len()];
        let mut reused: u64 = 0;
        for (j, n) in old_nodes.iter().enumerate() {
            if let Some(&i) = by_server.get(n.server()) {
                if nodes[i].weight() == n.weight() {
                    kept[i] = true;
                    old_to_rank[j] = rank_of[i];
                    reused += n.weight() as u64 * s.point_multiple as u64;
                }
            }
        }
        // Ties among kept nodes must resolve as before: their new ranks in
        // the old tie order must increase.
        let old_addrs = if s.compat.needs_socket_addrs() {
            self.validate(old_nodes)?
        } else {
            Vec::new()
        };
        let monotone = tie_order(s.compat, old_nodes.len(), &old_addrs)
            .iter()
            .map(|&j| old_to_rank[j])
            .filter(|&r| r != u32::MAX)
            .is_sorted();
        if !monotone || reused * 2 < total {
            return self.build(nodes);
        }

        // The new nodes' points, sorted (ties kept for the rule below).
        let jobs = self.jobs(&nodes, &addrs, &order, |i| !kept[i]);
        let mut fresh: Vec<u64> = Vec::with_capacity((total - reused) as usize);
        crc::for_each_point(&jobs, |rank, hash| fresh.push(sort::pack(hash, rank)));
        fresh.sort_unstable();

        // Merge with the old points of kept nodes, applying the collision
        // rule where a hash has several nodes (an old collided point, or a
        // new point on an old hash): the smallest rank wins and every node
        // is listed. Everywhere else a point is copied as it is.
        let rank_to_node: Vec<u32> = order.iter().map(|&i| i as u32).collect();
        let old_to_node: Vec<u32> = old_to_rank
            .iter()
            .map(|&r| {
                if r == u32::MAX {
                    r
                } else {
                    rank_to_node[r as usize]
                }
            })
            .collect();
        let mut merged: Vec<u64> = Vec::with_capacity(old.point_count() + fresh.len());
        let mut collisions = Collisions::default();
        let mut ranks: Vec<u32> = Vec::new();
        let emit = |merged: &mut Vec<u64>,
                    collisions: &mut Collisions,
                    hash: u32,
                    ranks: &mut Vec<u32>| {
            ranks.sort_unstable();
            ranks.dedup();
            if let Some(&best) = ranks.first() {
                if ranks.len() > 1 {
                    let at = merged.len();
                    collisions.push(at, ranks.iter().map(|&r| rank_to_node[r as usize]));
                }
                merged.push(sort::pack(hash, rank_to_node[best as usize]));
            }
            ranks.clear();
        };
        let cols = &old.collisions;
        let (mut k, mut next_collided) = (0usize, cols.points.first().map_or(u32::MAX, |&p| p));
        let mut f = 0usize;
        let fresh_hash = |f: usize| fresh.get(f).map_or(u64::MAX, |&p| p >> 32);
        let mut next_fresh = fresh_hash(0);
        // Moves the new points of hash `next` into `ranks`; returns it.
        let take = |f: &mut usize, next: &mut u64, ranks: &mut Vec<u32>| {
            let group = *next;
            while *next == group {
                ranks.push(sort::node_of(fresh[*f]));
                *f += 1;
                *next = fresh_hash(*f);
            }
            group as u32
        };
        let mut i = 0u32;
        old.points.for_each_chunk(|chunk| {
            for &p in chunk {
                let (hash, node) = (sort::hash_of(p), sort::node_of(p) as usize);
                let h = hash as u64;
                // New points before this one, a hash at a time.
                while next_fresh < h {
                    let group = take(&mut f, &mut next_fresh, &mut ranks);
                    emit(&mut merged, &mut collisions, group, &mut ranks);
                }
                if i != next_collided && next_fresh != h {
                    if old_to_node[node] != u32::MAX {
                        merged.push(sort::pack(hash, old_to_node[node]));
                    }
                } else {
                    if i == next_collided {
                        let all = &cols.nodes[cols.starts[k] as usize..cols.starts[k + 1] as usize];
                        ranks.extend(all.iter().map(|&j| old_to_rank[j as usize]));
                        ranks.retain(|&r| r != u32::MAX);
                        k += 1;
                        next_collided = cols.points.get(k).map_or(u32::MAX, |&p| p);
                    } else if old_to_rank[node] != u32::MAX {
                        ranks.push(old_to_rank[node]);
                    }
                    if next_fresh == h {
                        take(&mut f, &mut next_fresh, &mut ranks);
                    }
                    emit(&mut merged, &mut collisions, hash, &mut ranks);
                }
                i += 1;
            }
        });
        while next_fresh != u64::MAX {
            let group = take(&mut f, &mut next_fresh, &mut ranks);
            emit(&mut merged, &mut collisions, group, &mut ranks);
        }
        collisions.index(merged.len());
        Ok(self.assemble(nodes, merged, total, collisions, labels, Some(&old.points)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Layout;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};

    fn nodes(rng: &mut impl Rng, n: usize) -> Vec<Node> {
        (0..n)
            .map(|i| {
                let node = Node::new(
                    format!("10.0.{}.{}:80", i / 250, i % 250),
                    rng.random_range(1..5),
                );
                if rng.random_bool(0.3) {
                    node.with_labels(["eu"])
                } else {
                    node
                }
            })
            .collect()
    }

    /// Same points, same collision lists, same node table.
    fn assert_same(a: &Ring, b: &Ring, what: &str) {
        assert_eq!(a.point_count(), b.point_count(), "{what}");
        assert!(a.points().eq(b.points()), "{what}: points differ");
        assert_eq!(a.collisions, b.collisions, "{what}: collisions differ");
        assert_eq!(a.label_index, b.label_index, "{what}: label indexes differ");
        if a.compat().requirement_obstacle().is_none() && a.label_names().next().is_some() {
            assert!(a.has_label_index(), "{what}: the nodes carry a label");
        }
        assert_eq!(a.live(), b.live(), "{what}");
        assert_eq!(a.generated_points(), b.generated_points(), "{what}");
        a.check().unwrap();
    }

    #[test]
    fn rebuild_equals_build() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(12);
        let mut collided = 0;
        for case in 0..24 {
            let compat = [Scheme::Nginx, Scheme::PingoraV2][case % 2];
            let layout = [Layout::Wide, Layout::Packed, Layout::Compact][case / 2 % 3];
            let b = RingBuilder::new()
                .compat(compat)
                .layout(layout)
                .point_multiple(1000);
            let mut list = nodes(&mut rng, 300);
            let old = b.build(list.clone()).unwrap();
            collided += old.collisions.points.len();
            // One edit of the kind a reload or a discovery change makes.
            let what = match case / 6 {
                0 => {
                    let i = rng.random_range(0..list.len());
                    let w = list[i].weight() + 1;
                    list[i] = Node::new(list[i].server().to_string(), w);
                    "weight changed"
                }
                1 => {
                    // A collision's winner when there is one: its loser
                    // must come back.
                    let i = old.collisions.nodes.first().map_or(0, |&n| n as usize);
                    list.remove(i);
                    "removed"
                }
                2 => {
                    let at = rng.random_range(0..list.len());
                    list.insert(at, Node::new("10.9.9.9:80", 3));
                    "added"
                }
                _ => {
                    let i = rng.random_range(0..list.len());
                    list[i] = list[i].clone().with_down(true);
                    list.swap(0, 1); // reordered: nginx falls back to a build
                    "down and reordered"
                }
            };
            let want = b.build(list.clone()).unwrap();
            let got = b.rebuild(&old, list).unwrap();
            assert_same(&got, &want, &format!("{compat:?} {layout:?} {what}"));
        }
        assert!(collided > 0, "the cases must exercise collided points");
    }

    /// One edit of the kind a reload or a discovery change makes.
    fn edit(rng: &mut impl Rng, list: &mut Vec<Node>, old: &Ring, kind: u8) {
        match kind {
            0 => {
                let i = rng.random_range(0..list.len());
                let w = list[i].weight() % 7 + 1;
                list[i] = Node::new(list[i].server().to_string(), w);
            }
            1 => {
                let i = old.collisions.nodes.first().map_or(0, |&n| n as usize);
                list.remove(i.min(list.len() - 1));
            }
            2 => {
                let at = rng.random_range(0..=list.len());
                list.insert(at, Node::new("10.9.9.9:80", rng.random_range(1..4)));
            }
            3 => {
                let i = rng.random_range(0..list.len());
                list[i] = list[i].clone().with_down(true);
            }
            _ => {
                let (i, j) = (
                    rng.random_range(0..list.len()),
                    rng.random_range(0..list.len()),
                );
                list.swap(i, j);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(96))]

        /// The law: whatever the scheme, layout and edit, a rebuild is the
        /// ring a full build makes (every scheme, even those that always
        /// fall back to a build).
        #[test]
        fn rebuild_is_a_build(
            scheme in 0..Scheme::ALL.len(),
            layout in 0..Layout::ALL.len(),
            n in 2usize..60,
            kind in 0u8..5,
            seed in any::<u64>(),
        ) {
            let scheme = Scheme::ALL[scheme];
            let layout = Layout::ALL[layout];
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            let multiple = if scheme.is_memcached() { 160 } else { rng.random_range(1..200) };
            let b = RingBuilder::new().compat(scheme).layout(layout).point_multiple(multiple);
            let mut list: Vec<Node> = if scheme.requirement_obstacle().is_none() {
                nodes(&mut rng, n)
            } else {
                nodes(&mut rng, n).into_iter().map(|x| Node::new(x.server().to_string(), x.weight())).collect()
            };
            let old = b.build(list.clone()).unwrap();
            edit(&mut rng, &mut list, &old, kind);
            let want = b.build(list.clone()).unwrap();
            let got = b.rebuild(&old, list).unwrap();
            assert_same(&got, &want, &format!("{scheme:?} {layout:?} edit {kind}"));
        }
    }
}
