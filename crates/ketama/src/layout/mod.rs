//! How a built ring stores its points. A layout never changes routing, only
//! bytes and speed.
//!
//! `Wide` keeps each point as one `u64`, `hash << 32 | node`: the very
//! buffer the build sorted, so it costs no conversion. `Packed` keeps the
//! sorted hashes in one dense `u32` array (the binary search touches only
//! hashes, 16 to a cache line) and the owners in a parallel `u16` array:
//!
//! | layout   | hash | owner | bytes/point | nodes it holds |
//! |----------|------|-------|-------------|----------------|
//! | `Wide`   | u32  | u32   | 8           | 2^32           |
//! | `Packed` | u32  | u16   | 6           | 65,536         |
//! | `Compact`| r low bits + Elias-Fano upper bits | ceil(log2 N) bits | 3.0 to 3.5 (see below) | 2^32 |
//!
//! Under Envoy's schemes ([`crate::envoy`]): a `ring_hash` entry costs 4
//! bytes more in every layout (the low half of its 64-bit hash, in an array
//! beside the layout); a Maglev table is a ring of one point a slot in
//! `Wide` and `Packed`, and in `Compact` a table of owners alone,
//! `ceil(log2 N)` bits a slot (the slots' hashes are computed).
//!
//! Lookup cost: `Wide` and `Packed` binary-search (`log2 P` dependent loads,
//! the last ten or so missing cache on large rings); `Compact` finds one
//! bucket in its unary upper bits and scans its few entries (three or four
//! cache lines).
//!
//! `Packed` spends the same 6 bytes as pingora-ketama's `PointV2`
//! (`[u8; 6]`: hash then u16 node), split into two arrays instead of one.
//!
//! # `Compact`
//!
//! The sorted hashes in Elias-Fano code, each with its owner: 3.0 to 3.5
//! bytes per point at CDN sizes (measured: 3.07 at 16M points over 10,000
//! nodes, 3.51 at 1.6M), within 8% of the information-theoretic floor
//! (2.85 and 3.27 there), against pingora-ketama v2's 6; a lookup touches
//! three or four cache lines (a sample, the bucket's upper bits, its
//! entries) instead of a binary search's twenty-odd.
//!
//! ## Fields
//!
//! With `P` sorted, distinct point hashes, `N` nodes and `r` low bits
//! chosen at build time, a hash's top `32 - r` bits name its bucket (there
//! are `B = 2^(32 - r)`) and its low `r` bits its remainder:
//!
//! - **entries**: for each point in ring order, its remainder and its
//!   owner's node index in `n = ceil(log2 N)` bits, packed back to back as
//!   one `w = r + n`-bit field (`rem << n | node`). `P * w` bits.
//! - **upper**: the bucket of every point in unary: point `i` (in ring
//!   order) of bucket `q` sets bit `q + i`, and each bucket ends with a
//!   zero. `P + B` bits; bucket `q` starts right after the `q`-th zero, and
//!   its first point is number `position - q`.
//! - **samples**: for every `S`-th bucket, the bit where it starts in
//!   `upper`, as a u16 from a coarse u32 kept every 2^14 buckets (whose
//!   span, about 2^15 bits, fits 16 bits; rings whose points crowd into a
//!   few buckets get narrower coarse blocks). `16 * B / S` bits plus a few
//!   KB; `S` is 16 below 2^20 points, 32 below 2^23, 64 above (denser
//!   samples mean shorter scans, and cost little where rings are small).
//! - fields are read from 64-bit words, two adjacent loads combined; each
//!   array ends with a padding word so the second load stays in bounds.
//!
//! Bytes per point are therefore `(w + 1 + B / P + 16 B / (S P)) / 8`;
//! the build takes the `r` that makes them smallest, which is about
//! `log2(2^32 / P)` (one bucket per point or two), so a hash costs about
//! `r + 2.3` bits where the floor is `log2 C(2^32, P) / P`, about
//! `log2(2^32 / P) + 1.44`. At 16M points over 10,000 nodes that is
//! `r = 8`, `n = 14`, `S = 64`: 22 bits of entry, 2.05 of upper and 0.26
//! of samples, 3.04 B a point, plus the ring's collision lists (about 0.03
//! B: 16 bytes per collided point, P^2 / 2^33 of them); at 1.6M, `r = 11`,
//! `S = 32`: 25 + 2.31 + 0.66 bits, 3.50 B. The rest of the distance to
//! the floor is the owner (14 bits where `log2 10,000` is 13.3) and the
//! unary code's extra bit per bucket.
//!
//! ## Lookup
//!
//! A key hash `h` falls in bucket `q = h >> r`. Its sample (two
//! independent loads, the coarse one from a table of a few KB) gives the
//! start of bucket `q - q % S` in `upper`; from there the lookup skips
//! `q % S` zeros (one to three aligned words counted at once, a SWAR
//! popcount each, then a branch-free select within the word that holds the
//! zero), which gives bucket `q`'s first bit `p` and first point `p - q`;
//! the ones after `p` count its points. The entry where the bucket is
//! expected to start (the sample's first point plus the
//! average bucket size times `q % S`) is touched at the same time, so the
//! entries' cache miss overlaps the upper bits' instead of following it.
//! The first entry of the bucket whose remainder is `>= h`'s low `r` bits
//! is the answer; if there is none, the answer is the first point of the
//! following buckets, which is simply the next point in ring order
//! (wrapping to point 0). A bucket holds one or two points on average.
//!
//! Against the previous layout (a directly indexed offset per bucket, 3.2
//! to 3.8 B a point) the sample is one more dependent load before the
//! upper bits, and the select is some 40 instructions: single lookups cost
//! a few percent to about 40% more depending on the ring's size (most where
//! the ring fits in cache and the instructions show), while batches
//! ([`Ring::node_indices_for_hashes`](crate::Ring::node_indices_for_hashes)),
//! which load the samples, upper bits and predicted entries of 16 keys at
//! once, cost the same or less at 16M points.
//!
//! Any node count `Wide` holds fits (`n <= 32`, `r <= 24`, so `w <= 56`).

use std::fmt;
use std::str::FromStr;

mod bits;
mod compact;
mod table;

use crate::sort;
use compact::Compact;
pub(crate) use table::Table;

/// A ring's storage layout. See the [module docs](self) for the byte counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Layout {
    /// u32 hash + u32 node index: 8 B/point, any node count.
    #[default]
    Wide,
    /// u32 hash + u16 node index: 6 B/point, at most 65,536 nodes.
    Packed,
    /// Elias-Fano coded hashes with bit-packed owners: 3.0 to 3.5 B/point
    /// at 16+ points per node, any node count, the fastest lookups on large
    /// rings. See the [module docs](self).
    Compact,
}

impl Layout {
    /// Every layout, in the order tools list them.
    pub const ALL: [Layout; 3] = [Layout::Wide, Layout::Packed, Layout::Compact];

    /// The most nodes (counting weight-0 ones) a ring in this layout holds.
    pub fn max_nodes(self) -> usize {
        match self {
            Layout::Wide => u32::MAX as usize,
            Layout::Packed => 1 << 16,
            Layout::Compact => u32::MAX as usize,
        }
    }

    /// The name used on command lines and in configs.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Wide => "wide",
            Layout::Packed => "packed",
            Layout::Compact => "compact",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for an unknown layout name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown layout {0:?}: expected one of wide, packed, compact")]
pub struct UnknownLayout(pub String);

impl FromStr for Layout {
    type Err = UnknownLayout;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Layout::ALL
            .into_iter()
            .find(|l| l.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownLayout(s.to_string()))
    }
}

/// Sorted, deduplicated points in a layout.
#[derive(Clone, Debug)]
pub(crate) enum Points {
    /// `hash << 32 | node` per point: the build's own buffer, kept as is
    /// (its spare capacity is the few points lost to collisions; shrinking
    /// it would copy the whole ring).
    Wide(Vec<u64>),
    /// Dense hashes and u16 owners.
    Packed {
        hashes: Box<[u32]>,
        owners: Box<[u16]>,
    },
    /// See the `Compact` section of the module docs.
    Compact(Compact),
    /// A Maglev table in the `Compact` layout: owners only (see
    /// `table.rs`).
    Table(Table),
}

impl Points {
    /// Stores sorted, deduplicated packed points (see `sort::pack`) owned by
    /// nodes indexed below `nodes`. The caller has checked that every node
    /// index fits the layout.
    pub(crate) fn new(layout: Layout, sorted: Vec<u64>, nodes: usize, threads: usize) -> Self {
        match layout {
            Layout::Wide => Points::Wide(sorted),
            Layout::Packed => Points::Packed {
                hashes: sorted.iter().map(|&p| sort::hash_of(p)).collect(),
                owners: sorted.iter().map(|&p| sort::node_of(p) as u16).collect(),
            },
            Layout::Compact => Points::Compact(Compact::new(sorted, nodes, threads)),
        }
    }

    /// [`new`](Self::new) for a rebuild of `old`: a `Compact` layout takes
    /// `old`'s shape when the point count is about the same.
    pub(crate) fn new_like(
        layout: Layout,
        sorted: Vec<u64>,
        nodes: usize,
        old: &Points,
        threads: usize,
    ) -> Self {
        match (layout, old) {
            (Layout::Compact, Points::Compact(like)) => {
                Points::Compact(Compact::new_like(sorted, nodes, like, threads))
            }
            _ => Self::new(layout, sorted, nodes, threads),
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        match self {
            Points::Wide(p) => p.len(),
            Points::Packed { hashes, .. } => hashes.len(),
            Points::Compact(c) => c.len(),
            Points::Table(t) => t.len(),
        }
    }

    /// The hash of point `i`: `O(1)`, or `O(log B)` in `Compact`.
    #[inline]
    pub(crate) fn hash(&self, i: usize) -> u32 {
        match self {
            Points::Wide(p) => sort::hash_of(p[i]),
            Points::Packed { hashes, .. } => hashes[i],
            Points::Compact(c) => c.hash(i),
            Points::Table(t) => t.hash(i),
        }
    }

    #[inline]
    pub(crate) fn node(&self, i: usize) -> usize {
        match self {
            Points::Wide(p) => sort::node_of(p[i]) as usize,
            Points::Packed { owners, .. } => owners[i] as usize,
            Points::Compact(c) => c.node(i),
            Points::Table(t) => t.node(i),
        }
    }

    /// Calls `f` with points `from..to`, packed as by `sort::pack`, in ring
    /// order, a slice at a time: `O(to - from)` (a ring rebuild reads every
    /// point this way, a range of them per thread).
    pub(crate) fn for_each_chunk_in(&self, from: usize, to: usize, mut f: impl FnMut(&[u64])) {
        const CHUNK: usize = 4096;
        if from >= to {
            return;
        }
        match self {
            Points::Wide(p) => p[from..to].chunks(CHUNK).for_each(f),
            Points::Packed { hashes, owners } => {
                let mut buf = Vec::with_capacity(CHUNK);
                let (hashes, owners) = (&hashes[from..to], &owners[from..to]);
                for (h, o) in hashes.chunks(CHUNK).zip(owners.chunks(CHUNK)) {
                    buf.clear();
                    buf.extend(h.iter().zip(o).map(|(&h, &o)| sort::pack(h, o as u32)));
                    f(&buf);
                }
            }
            Points::Compact(c) => c.for_each_chunk_in(from, to, f),
            Points::Table(t) => {
                let all: Vec<u64> = (from..to)
                    .map(|i| sort::pack(t.hash(i), t.node(i) as u32))
                    .collect();
                all.chunks(CHUNK).for_each(f)
            }
        }
    }

    /// Index of the first point whose hash is >= `hash`, or the point count
    /// when there is none (no wrap, unlike [`search`](Self::search)).
    pub(crate) fn lower_bound(&self, hash: u64) -> usize {
        let len = self.len();
        if hash > u32::MAX as u64 || len == 0 {
            return len;
        }
        match self.search(hash as u32) {
            0 if self.hash(0) < hash as u32 => len,
            i => i,
        }
    }

    /// Every point's (hash, node) in ring order, sequentially: `O(P)`.
    pub(crate) fn iter(&self) -> Box<dyn Iterator<Item = (u32, usize)> + '_> {
        match self {
            Points::Wide(p) => Box::new(
                p.iter()
                    .map(|&x| (sort::hash_of(x), sort::node_of(x) as usize)),
            ),
            Points::Packed { hashes, owners } => Box::new(
                hashes
                    .iter()
                    .zip(owners.iter())
                    .map(|(&h, &o)| (h, o as usize)),
            ),
            Points::Compact(c) => Box::new(c.iter()),
            Points::Table(t) => Box::new((0..t.len()).map(|i| (t.hash(i), t.node(i)))),
        }
    }

    /// Index of the first point whose hash is >= `hash`, wrapping to 0 past
    /// the last point. The ring must not be empty.
    #[inline]
    pub(crate) fn search(&self, hash: u32) -> usize {
        let i = match self {
            Points::Wide(p) => p.partition_point(|&x| sort::hash_of(x) < hash),
            Points::Packed { hashes, .. } => hashes.partition_point(|&h| h < hash),
            Points::Compact(c) => return c.search(hash),
            Points::Table(t) => return t.search(hash),
        };
        if i == self.len() {
            0
        } else {
            i
        }
    }

    /// [`search`](Self::search), with the found point's hash and the hash
    /// of the point before it (HAProxy's lookup compares the two). The
    /// ring must not be empty. `O(log P)`, `O(1)` expected in `Compact`.
    #[inline]
    pub(crate) fn search_near(&self, hash: u32) -> (usize, u32, u32) {
        if let Points::Compact(c) = self {
            return c.search_near(hash);
        }
        let pos = self.search(hash);
        let prev = if pos == 0 { self.len() - 1 } else { pos - 1 };
        (pos, self.hash(pos), self.hash(prev))
    }

    /// [`search`](Self::search) for many hashes at once, written to `out`
    /// (same length). Groups of [`GROUP`] searches advance in lock step, so
    /// the memory loads of independent keys overlap instead of waiting on
    /// each other.
    pub(crate) fn search_batch(&self, hashes: &[u32], out: &mut [usize]) {
        debug_assert_eq!(hashes.len(), out.len());
        if self.len() <= SMALL && matches!(self, Points::Wide(_) | Points::Packed { .. }) {
            // Cache-resident: nothing to overlap, lock step only costs.
            for (o, &q) in out.iter_mut().zip(hashes) {
                *o = self.search(q);
            }
            return;
        }
        for (qs, os) in hashes.chunks(GROUP).zip(out.chunks_mut(GROUP)) {
            match self {
                Points::Wide(p) => search_group(p, sort::hash_of, qs, os),
                Points::Packed { hashes, .. } => search_group(hashes, |h| h, qs, os),
                Points::Compact(c) => c.search_group(qs, os),
                Points::Table(t) => {
                    for (o, &q) in os.iter_mut().zip(qs) {
                        *o = t.search(q);
                    }
                }
            }
        }
    }

    /// Heap bytes held by the points.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Points::Wide(p) => p.capacity() * 8,
            Points::Packed { hashes, owners } => hashes.len() * 4 + owners.len() * 2,
            Points::Compact(c) => c.heap_bytes(),
            Points::Table(t) => t.heap_bytes(),
        }
    }
}

/// Rings of at most this many points fit in the L2 cache in every layout;
/// binary searches gain nothing from lock step there.
const SMALL: usize = 1 << 16;

/// Keys searched in lock step by the batch lookups.
pub(crate) const GROUP: usize = 16;

/// Branch-free binary searches of up to [`GROUP`] hashes in lock step: every
/// search halves the same range length each round, so each round issues
/// `qs.len()` independent loads.
fn search_group<T: Copy>(points: &[T], key: impl Fn(T) -> u32, qs: &[u32], out: &mut [usize]) {
    let n = points.len();
    let mut base = [0usize; GROUP];
    let mut len = n;
    while len > 1 {
        let half = len / 2;
        for (b, &q) in base.iter_mut().zip(qs) {
            if key(points[*b + half - 1]) < q {
                *b += half;
            }
        }
        len -= half;
    }
    for ((o, &b), &q) in out.iter_mut().zip(&base).zip(qs) {
        let i = b + (key(points[b]) < q) as usize;
        *o = if i == n { 0 } else { i };
    }
}
