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
    /// (10,000 nodes, one weight changed, `Compact`, one thread): about
    /// 0.55x a full build's time; what remains is reading the old points
    /// out of their layout, the merge, and packing the result, each a
    /// sequential pass that [`threads`](Self::threads) splits.
    pub fn rebuild(&self, old: &Ring, nodes: Vec<Node>) -> Result<Ring> {
        let s = self.settings;
        if old.settings() != s
            || s.compat == Scheme::PingoraV1
            || s.compat.is_memcached()
            || s.compat.is_envoy()
            || s.compat.nearer()
        {
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

        // Merge with the old points of kept nodes, a range of hashes per
        // thread (a hash's points never straddle two ranges, so the parts
        // joined are the one sequential merge's output).
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
        let ctx = Merge {
            old,
            rank_to_node: &rank_to_node,
            old_to_rank: &old_to_rank,
            old_to_node: &old_to_node,
        };
        let parts = if old.point_count() >= self.parallel_min_points {
            self.threads.clamp(1, MAX_PARTS)
        } else {
            1
        };
        let bounds: Vec<u64> = (0..=parts as u64)
            .map(|t| (t << 32) / parts as u64)
            .collect();
        let ranges: Vec<Part> = bounds
            .windows(2)
            .map(|w| Part {
                old: old.points.lower_bound(w[0])..old.points.lower_bound(w[1]),
                fresh: fresh.partition_point(|&p| p >> 32 < w[0])
                    ..fresh.partition_point(|&p| p >> 32 < w[1]),
            })
            .collect();
        // One buffer, a region per part as large as its points could be;
        // each part fills its own on its thread, then the regions close up.
        let caps: Vec<usize> = ranges.iter().map(|p| p.old.len() + p.fresh.len()).collect();
        let mut merged = vec![0u64; caps.iter().sum()];
        let mut regions = Vec::with_capacity(parts);
        let mut rest = &mut merged[..];
        for &cap in &caps {
            let (region, tail) = rest.split_at_mut(cap);
            regions.push(region);
            rest = tail;
        }
        let done: Vec<(usize, Collisions)> = std::thread::scope(|scope| {
            let (ctx, fresh) = (&ctx, &fresh);
            let mut jobs = ranges.iter().zip(regions);
            let (first, first_out) = jobs.next().expect("one part at least");
            let others: Vec<_> = jobs
                .map(|(part, out)| scope.spawn(move || ctx.run(part, fresh, out)))
                .collect();
            let mut done = vec![ctx.run(first, fresh, first_out)];
            // A part panics only on a bug: propagate it.
            done.extend(others.into_iter().map(|h| h.join().unwrap()));
            done
        });
        let (mut len, mut start) = (0usize, 0usize);
        let mut collisions = Collisions::default();
        for ((n, cols), cap) in done.into_iter().zip(caps) {
            for k in 0..cols.points.len() {
                let all = &cols.nodes[cols.starts[k] as usize..cols.starts[k + 1] as usize];
                collisions.push(len + cols.points[k] as usize, all.iter().copied());
            }
            if start != len {
                merged.copy_within(start..start + n, len);
            }
            len += n;
            start += cap;
        }
        merged.truncate(len);
        collisions.index(merged.len());
        Ok(self.assemble(nodes, merged, total, collisions, labels, Some(&old.points)))
    }
}

/// Parts a rebuild's merge is split into at most.
const MAX_PARTS: usize = 16;

/// The old points and fresh points of one range of hashes.
struct Part {
    old: std::ops::Range<usize>,
    fresh: std::ops::Range<usize>,
}

/// What every part of a rebuild's merge reads.
struct Merge<'a> {
    old: &'a Ring,
    rank_to_node: &'a [u32],
    old_to_rank: &'a [u32],
    old_to_node: &'a [u32],
}

impl Merge<'_> {
    /// Merges one part: the old points of kept nodes and the new points,
    /// applying the collision rule where a hash has several nodes (an old
    /// collided point, or a new point on an old hash): the smallest rank
    /// wins and every node is listed. Everywhere else a point is copied as
    /// it is. Collided points are numbered from the part's start.
    /// `out` has room for every point of the part; returns how many it
    /// holds.
    fn run(&self, part: &Part, fresh: &[u64], out: &mut [u64]) -> (usize, Collisions) {
        let (rank_to_node, old_to_rank, old_to_node) =
            (self.rank_to_node, self.old_to_rank, self.old_to_node);
        let fresh = &fresh[part.fresh.clone()];
        let mut merged = Out { buf: out, len: 0 };
        let mut collisions = Collisions::default();
        let mut ranks: Vec<u32> = Vec::new();
        let emit =
            |merged: &mut Out, collisions: &mut Collisions, hash: u32, ranks: &mut Vec<u32>| {
                ranks.sort_unstable();
                ranks.dedup();
                if let Some(&best) = ranks.first() {
                    if ranks.len() > 1 {
                        let at = merged.len;
                        collisions.push(at, ranks.iter().map(|&r| rank_to_node[r as usize]));
                    }
                    merged.push(sort::pack(hash, rank_to_node[best as usize]));
                }
                ranks.clear();
            };
        let cols = &self.old.collisions;
        let mut k = cols
            .points
            .partition_point(|&p| (p as usize) < part.old.start);
        let mut next_collided = cols.points.get(k).map_or(u32::MAX, |&p| p);
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
        let mut i = part.old.start as u32;
        let (from, to) = (part.old.start, part.old.end);
        self.old.points.for_each_chunk_in(from, to, |chunk| {
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
        (merged.len, collisions)
    }
}

/// A part's region of the merged points, filled from the front.
struct Out<'a> {
    buf: &'a mut [u64],
    len: usize,
}

impl Out<'_> {
    #[inline]
    fn push(&mut self, p: u64) {
        self.buf[self.len] = p;
        self.len += 1;
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
        if a.compat().requirement_obstacle().is_none()
            && !a.compat().dedicated_subsets()
            && !a.compat().nearer()
            && a.label_names().next().is_some()
        {
            assert!(a.has_label_index(), "{what}: the nodes carry a label");
        }
        assert_eq!(a.lows, b.lows, "{what}: low halves differ");
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
            for threads in [1, 2, 3] {
                let mut b = b.threads(threads);
                b.parallel_min_points = 0;
                let got = b.rebuild(&old, list.clone()).unwrap();
                assert_same(
                    &got,
                    &want,
                    &format!("{compat:?} {layout:?} {what}, {threads} threads"),
                );
            }
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
            let multiple = scheme.fixed_point_multiple().unwrap_or_else(|| rng.random_range(1..200));
            let b = RingBuilder::new().compat(scheme).layout(layout).point_multiple(multiple);
            let mut list: Vec<Node> = if scheme.requirement_obstacle().is_none() {
                nodes(&mut rng, n)
            } else {
                nodes(&mut rng, n).into_iter().map(|x| Node::new(x.server().to_string(), x.weight())).collect()
            };
            let old = b.build(list.clone()).unwrap();
            edit(&mut rng, &mut list, &old, kind);
            let want = b.build(list.clone()).unwrap();
            // Parts of every size, down to ranges holding no point at all.
            let mut b = b.threads(1 + seed as usize % 16);
            b.parallel_min_points = 0;
            let got = b.rebuild(&old, list).unwrap();
            assert_same(&got, &want, &format!("{scheme:?} {layout:?} edit {kind}, {} threads", b.threads));
        }
    }
}
