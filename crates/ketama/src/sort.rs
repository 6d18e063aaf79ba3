//! Generating, sorting and deduplicating ring points.
//!
//! A point is packed in a `u64` as `hash << 32 | tag`. [`generate_sorted`]
//! is a most-significant-digit radix sort fused with point generation:
//!
//! 1. generate every point once, scattering each by its top `T` hash bits
//!    (`T` chosen so a bucket averages about 8,000 points, 64 KiB, which
//!    sorts inside the CPU's L2 cache) into its bucket of a
//!    buffer that gives every bucket its expected count plus six standard
//!    deviations and 64 of room; in the astronomically rare case that a
//!    bucket overflows, count exactly in one generation pass and fill in a
//!    second instead;
//! 2. sort each bucket on the remaining hash bits with an LSD radix sort in
//!    a bucket-sized scratch (every pass's histogram from one read), keep
//!    the smallest tag of equal hashes (the collision rule, whatever order
//!    the points arrived in), map the tag to its node and write the result
//!    back, compacted, into the same buffer, which then gives back its
//!    slack.
//!
//! Memory: 8 bytes per point plus the slack (about `6 / sqrt(P / 1024)` of
//! it: 12% at 3.3M points, 5% at 16M) and one bucket of scratch; no
//! per-point allocation. Time: one generation pass and one scatter over
//! main memory, the rest in cache. Dropping the counting pass made builds
//! 5-11% faster (3.3M and 16M points, 1.6M for `Compact`).

use crate::crc::{self, ChainJob};

/// Packs a point.
#[inline(always)]
pub(crate) fn pack(hash: u32, node: u32) -> u64 {
    (hash as u64) << 32 | node as u64
}

/// The hash of a packed point.
#[inline(always)]
pub(crate) fn hash_of(p: u64) -> u32 {
    (p >> 32) as u32
}

/// The node of a packed point.
#[inline(always)]
pub(crate) fn node_of(p: u64) -> u32 {
    p as u32
}

/// Where [`generate_sorted`] gets its points: generated on demand (CRC
/// chains, cheaper to run again, in the rare fallback, than to store) or
/// read from memory (MD5 points, generated once).
pub(crate) trait PointSource {
    /// Calls `sink(tag, hash)` for every point, in the same order each time.
    fn for_each_point(&self, sink: impl FnMut(u32, u32));
}

impl PointSource for [ChainJob] {
    fn for_each_point(&self, sink: impl FnMut(u32, u32)) {
        crc::for_each_point(self, sink)
    }
}

/// Points already packed as `hash << 32 | tag`.
impl PointSource for [u64] {
    fn for_each_point(&self, mut sink: impl FnMut(u32, u32)) {
        for &p in self {
            sink(node_of(p), hash_of(p));
        }
    }
}

/// Generates the points of `source` (tags are tie ranks), sorts them by
/// hash, keeps the smallest rank among equal hashes and maps ranks to nodes
/// with `rank_to_node`. Returns sorted `hash << 32 | node` with distinct
/// hashes.
pub(crate) fn generate_sorted<S: PointSource + ?Sized>(
    source: &S,
    total: usize,
    rank_to_node: &[u32],
) -> (Vec<u64>, Collisions) {
    let mut collisions = Collisions::default();
    if total == 0 {
        return (Vec::new(), collisions);
    }
    let top = bits_for_usize(total / 4096).clamp(1, 10);
    let shift = 32 - top;
    let buckets = 1usize << top;
    let (mut points, ranges) = match fill_with_slack(source, total, shift) {
        Some(filled) => filled,
        None => fill_exact(source, total, shift),
    };
    debug_assert_eq!(ranges.len(), buckets);
    let largest = ranges.iter().map(|&(s, e)| e - s).max().unwrap_or(0);
    let mut scratch = vec![0u64; largest];
    let mut counts = Vec::new();
    let mut out = 0usize;
    // Each bucket's sorted, deduplicated points move down to `out`, which
    // never passes the bucket's own start: buckets are in hash order and
    // no bucket keeps more points than it holds.
    for &(s, e) in &ranges {
        let in_place = sort_low_bits(&mut points[s..e], &mut scratch[..e - s], shift, &mut counts);
        if in_place {
            let kept = dedup_min_rank(&mut points[s..e], rank_to_node, out, &mut collisions);
            points.copy_within(s..s + kept, out);
            out += kept;
        } else {
            let kept = dedup_min_rank(&mut scratch[..e - s], rank_to_node, out, &mut collisions);
            points[out..out + kept].copy_from_slice(&scratch[..kept]);
            out += kept;
        }
    }
    points.truncate(out);
    // Give back the slack (for large rings realloc remaps, no copy).
    points.shrink_to_fit();
    collisions.index(out);
    (points, collisions)
}

/// Points filled into buckets by their top bits, and each bucket's range.
type Filled = (Vec<u64>, Vec<(usize, usize)>);

/// Fills the points into `2^(32 - shift)` buckets by their top bits, each
/// given room for its expected count plus six standard deviations and 64,
/// so one generation pass suffices: returns the points and each bucket's
/// filled range, or `None` (nothing kept) in the astronomically rare case
/// that a bucket overflows, for [`fill_exact`] to redo. Memory: about
/// `6 / sqrt(P / 1024)` more than the points (12% at 3.3M points, 5% at
/// 16M).
fn fill_with_slack<S: PointSource + ?Sized>(
    source: &S,
    total: usize,
    shift: u32,
) -> Option<Filled> {
    let buckets = 1usize << (32 - shift);
    let expected = total.div_ceil(buckets);
    let cap = expected + 6 * (expected as f64).sqrt().ceil() as usize + 64;
    let mut points = vec![0u64; cap * buckets];
    let mut fill: Vec<usize> = (0..buckets).map(|b| b * cap).collect();
    let mut overflowed = false;
    source.for_each_point(|tag, h| {
        let b = (h >> shift) as usize;
        let f = fill[b];
        if f < (b + 1) * cap {
            points[f] = pack(h, tag);
            fill[b] = f + 1;
        } else {
            overflowed = true;
        }
    });
    if overflowed {
        return None;
    }
    let ranges = fill
        .iter()
        .enumerate()
        .map(|(b, &e)| (b * cap, e))
        .collect();
    Some((points, ranges))
}

/// [`fill_with_slack`] with exact room: one pass to count each bucket, a
/// second to fill. Memory: 8 bytes a point.
fn fill_exact<S: PointSource + ?Sized>(source: &S, total: usize, shift: u32) -> Filled {
    let buckets = 1usize << (32 - shift);
    let mut starts = vec![0usize; buckets + 1];
    source.for_each_point(|_, h| starts[(h >> shift) as usize + 1] += 1);
    for b in 1..=buckets {
        starts[b] += starts[b - 1];
    }
    let mut points = vec![0u64; total];
    let mut fill = starts[..buckets].to_vec();
    source.for_each_point(|tag, h| {
        let b = (h >> shift) as usize;
        points[fill[b]] = pack(h, tag);
        fill[b] += 1;
    });
    (points, starts.windows(2).map(|w| (w[0], w[1])).collect())
}

/// Sorts `data` by the low `bits` bits of the hash with LSD radix passes of
/// at most 11 bits, ping-ponging with `scratch` (same length). Returns
/// whether the result is in `data` (else it is in `scratch`).
fn sort_low_bits(data: &mut [u64], scratch: &mut [u64], bits: u32, counts: &mut Vec<u32>) -> bool {
    if data.len() < 64 {
        data.sort_unstable_by_key(|&p| hash_of(p));
        return true;
    }
    let passes = bits.div_ceil(11);
    let width = bits.div_ceil(passes);
    let m = (1u32 << width) - 1;
    let digits = 1usize << width;
    // Every pass's histogram from one read: a pass's counts do not depend
    // on the order the previous pass left.
    counts.clear();
    counts.resize(digits * passes as usize, 0);
    for &p in data.iter() {
        let h = hash_of(p);
        for pass in 0..passes as usize {
            counts[pass * digits + ((h >> (pass as u32 * width)) & m) as usize] += 1;
        }
    }
    let (mut src, mut dst) = (data, scratch);
    for pass in 0..passes {
        let sh = pass * width;
        let counts = &mut counts[pass as usize * digits..][..digits];
        let mut sum = 0;
        for c in counts.iter_mut() {
            let v = *c;
            *c = sum;
            sum += v;
        }
        for &p in src.iter() {
            let d = ((hash_of(p) >> sh) & m) as usize;
            dst[counts[d] as usize] = p;
            counts[d] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    passes % 2 == 0
}

/// Compacts sorted points in place to one per hash, the one with the
/// smallest rank, re-tagged with its node. Returns how many remain. A hash
/// shared by several nodes is recorded in `collisions` (at output index
/// `base + w`), every node in rank order, for exact subset lookups.
fn dedup_min_rank(
    v: &mut [u64],
    rank_to_node: &[u32],
    base: usize,
    collisions: &mut Collisions,
) -> usize {
    let (mut w, mut i) = (0, 0);
    let mut ranks: Vec<u32> = Vec::new();
    while i < v.len() {
        let h = hash_of(v[i]);
        let mut best = node_of(v[i]);
        let mut j = i + 1;
        while j < v.len() && hash_of(v[j]) == h {
            best = best.min(node_of(v[j]));
            j += 1;
        }
        if j - i > 1 {
            ranks.clear();
            ranks.extend(v[i..j].iter().map(|&p| node_of(p)));
            ranks.sort_unstable();
            ranks.dedup();
            if ranks.len() > 1 {
                collisions.push(base + w, ranks.iter().map(|&r| rank_to_node[r as usize]));
            }
        }
        v[w] = pack(h, rank_to_node[best as usize]);
        w += 1;
        i = j;
    }
    w
}

/// Points whose hash several nodes generated: the point's index and every
/// such node in tie order (the winner first). A ring of P points has about
/// P^2 / 2^33 of them, so this stays small: 8 bytes per collided point plus
/// 4 per node in it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Collisions {
    /// Sorted point indices.
    pub points: Vec<u32>,
    /// `nodes[starts[k]..starts[k + 1]]` are point `points[k]`'s nodes.
    pub starts: Vec<u32>,
    pub nodes: Vec<u32>,
    /// One bit per block of `2^shift` point indices, set if the block holds
    /// a collided point: a walk rules out nearly every point with one bit
    /// test (8 KiB at most) instead of a search.
    blocks: Vec<u64>,
    shift: u32,
}

impl Collisions {
    pub(crate) fn push(&mut self, point: usize, nodes: impl Iterator<Item = u32>) {
        if self.starts.is_empty() {
            self.starts.push(0);
        }
        self.points.push(point as u32);
        self.nodes.extend(nodes);
        self.starts.push(self.nodes.len() as u32);
    }

    /// Builds the block filter once the ring has `len` points.
    pub(crate) fn index(&mut self, len: usize) {
        self.shift = bits_for_usize(len >> 16);
        let blocks = (len >> self.shift) + 1;
        self.blocks = vec![0; blocks.div_ceil(64)];
        for &p in &self.points {
            let b = p as usize >> self.shift;
            self.blocks[b / 64] |= 1 << (b % 64);
        }
    }

    /// The nodes (tie order) sharing point `i`, or `None` if it is not
    /// collided. One bit test, and `O(log C)` in the rare blocks that hold
    /// a collided point.
    #[inline]
    pub(crate) fn at(&self, i: usize) -> Option<&[u32]> {
        let b = i >> self.shift;
        if self
            .blocks
            .get(b / 64)
            .is_none_or(|w| w & (1 << (b % 64)) == 0)
        {
            return None;
        }
        let k = self.points.binary_search(&(i as u32)).ok()?;
        Some(&self.nodes[self.starts[k] as usize..self.starts[k + 1] as usize])
    }

    /// Heap bytes.
    pub(crate) fn heap_bytes(&self) -> usize {
        (self.points.capacity() + self.starts.capacity() + self.nodes.capacity()) * 4
            + self.blocks.capacity() * 8
    }
}

fn bits_for_usize(x: usize) -> u32 {
    usize::BITS - x.leading_zeros()
}

/// Removes every point whose hash equals the previous point's, keeping the
/// first: the collision rule once points are in tie order.
pub(crate) fn dedup_first(points: &mut Vec<u64>) {
    points.dedup_by(|b, a| hash_of(*a) == hash_of(*b));
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn sorts_low_bits_with_ties() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for (n, bits) in [
            (0usize, 20u32),
            (1, 20),
            (63, 31),
            (64, 20),
            (1000, 23),
            (20_000, 31),
            (5000, 8),
        ] {
            // Few distinct hashes so that ties are common.
            let mut v: Vec<u64> = (0..n)
                .map(|i| {
                    pack(
                        rng.random_range(0..(n as u32 / 3 + 1)) & ((1u64 << bits) - 1) as u32,
                        i as u32,
                    )
                })
                .collect();
            let mut want: Vec<u32> = v.iter().map(|&p| hash_of(p)).collect();
            want.sort_unstable();
            let mut scratch = vec![0; n];
            let in_place = sort_low_bits(&mut v, &mut scratch, bits, &mut Vec::new());
            let got: Vec<u32> = (if in_place { &v } else { &scratch })
                .iter()
                .map(|&p| hash_of(p))
                .collect();
            assert_eq!(got, want, "n = {n}, bits = {bits}");
        }
    }

    /// Both fills (one pass with slack, and the exact two-pass fallback a
    /// skewed source forces) give the sorted, deduplicated points a naive
    /// sort gives: uniform hashes, a few hot buckets that overflow their
    /// slack, every point in one bucket, and ties between ranks.
    #[test]
    fn generate_sorted_matches_a_naive_sort() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let ranks = 64u32;
        let rank_to_node: Vec<u32> = (0..ranks).map(|r| ranks - 1 - r).collect();
        for (n, skew) in [
            (10usize, 0u32),
            (5000, 0),
            (50_000, 0),
            (50_000, 1),
            (50_000, 2),
        ] {
            let raw: Vec<u64> = (0..n)
                .map(|_| {
                    let h: u32 = rng.random();
                    let h = match skew {
                        0 => h,
                        // A tenth of the points in one bucket: overflows.
                        1 if rng.random_range(0..10) == 0 => h & 0x00ff_ffff,
                        1 => h,
                        // Everything in one bucket, with many ties.
                        _ => h & 0x0000_0fff,
                    };
                    pack(h, rng.random_range(0..ranks))
                })
                .collect();
            let (got, _) = generate_sorted(&raw[..], n, &rank_to_node);
            let mut want: Vec<(u32, u32)> = raw.iter().map(|&p| (hash_of(p), node_of(p))).collect();
            want.sort_unstable();
            want.dedup_by_key(|p| p.0);
            let want: Vec<u64> = want
                .iter()
                .map(|&(h, r)| pack(h, rank_to_node[r as usize]))
                .collect();
            assert_eq!(got, want, "n = {n}, skew = {skew}");
        }
    }

    #[test]
    fn dedup_keeps_smallest_rank() {
        let mut v = vec![
            pack(1, 9),
            pack(1, 3),
            pack(2, 4),
            pack(2, 1),
            pack(2, 2),
            pack(3, 0),
        ];
        let to_node: Vec<u32> = (0..10).map(|r| 100 + r).collect();
        let mut c = Collisions::default();
        let kept = dedup_min_rank(&mut v, &to_node, 10, &mut c);
        assert_eq!(&v[..kept], &[pack(1, 103), pack(2, 101), pack(3, 100)]);
        c.index(13);
        assert_eq!(c.at(10), Some(&[103, 109][..]));
        assert_eq!(c.at(11), Some(&[101, 102, 104][..]));
        assert_eq!(c.at(12), None);
    }

    #[test]
    fn generate_sorted_matches_naive() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(9);
        for (nodes, per) in [(1usize, 1u64), (3, 5), (50, 160), (2000, 40), (300, 1000)] {
            let jobs: Vec<ChainJob> = (0..nodes)
                .map(|r| {
                    ChainJob::new(
                        &[format!("n{r}").as_bytes()],
                        rng.random_range(0..=per),
                        r as u32,
                    )
                })
                .collect();
            let total = jobs.iter().map(|j| j.count as usize).sum();
            let to_node: Vec<u32> = (0..nodes as u32).rev().collect();
            let (got, _) = generate_sorted(&jobs[..], total, &to_node);
            let mut want: Vec<u64> = Vec::new();
            for j in &jobs {
                let chain = crc::PointChain::new(&[format!("n{}", j.tag).as_bytes()]);
                want.extend(chain.take(j.count as usize).map(|h| pack(h, j.tag)));
            }
            want.sort_unstable(); // by hash, then smallest rank first
            want.dedup_by(|b, a| hash_of(*a) == hash_of(*b));
            for p in want.iter_mut() {
                *p = pack(hash_of(*p), to_node[node_of(*p) as usize]);
            }
            assert_eq!(got, want, "{nodes} nodes");
        }
    }
}
