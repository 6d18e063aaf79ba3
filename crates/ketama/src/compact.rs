//! The `Compact` layout: a bucket index over the top hash bits and
//! bit-packed (remainder, node) entries. About 3.5 to 3.8 bytes per point at
//! CDN sizes, against pingora-ketama v2's 6, and a lookup touches two or
//! three cache lines instead of a binary search's twenty-odd.
//!
//! # Layout
//!
//! With `P` sorted, distinct point hashes, `N` nodes and a bucket count
//! `B = 2^b` chosen at build time:
//!
//! - **entries**: for each point in ring order, `r = 32 - b` low bits of its
//!   hash (the top `b` bits are implied by its bucket) and the owner's node
//!   index in `n = ceil(log2 N)` bits, packed back to back as one
//!   `w = r + n`-bit field (`rem << n | node`). `P * w` bits.
//! - **offsets**: where each bucket's entries start, in two levels: one u32
//!   base per superblock of `S = 2^s` buckets, and per bucket a `k`-bit
//!   offset from its superblock's base, `k` being the bits the largest such
//!   offset needs. `(B + 1) * k + (B / S + 1) * 32` bits.
//! - 8 bytes of padding after each packed array, so that every field is
//!   read as one unaligned little-endian u64 (fields are at most 57 bits).
//!
//! Bytes per point are therefore
//! `(w + (k + 32 / S) * B / P) / 8`. The build tries every `b` around
//! `log2 P` and `S` from 8 to 128 and keeps the smallest. For 1.6M points
//! over 10,000 nodes that is `b = 18` or `19` and about 3.7 B/point; the
//! information-theoretic floor there is about 3.3 (`log2 C(2^32, P) / P`
//! bits per hash plus `log2 N` for the owner).
//!
//! # Lookup
//!
//! A key hash `h` falls in bucket `h >> r`; its entries lie between that
//! bucket's start and the next one's (both in the same one or two cache
//! lines of offsets). The first entry whose remainder is `>= h`'s low `r`
//! bits is the answer; if there is none, the answer is the first entry of
//! the following buckets, which is simply the next entry in ring order
//! (wrapping to entry 0). A bucket holds `P / B` entries on average, 2 to 8
//! with the chosen `b`: a short linear scan of one or two cache lines.
//!
//! Any node count `Wide` holds fits (`n <= 32`, `r <= 24`, so `w <= 56`).

use crate::sort;

const MIN_BUCKET_BITS: u32 = 8;
const MAX_BUCKET_BITS: u32 = 28;

/// Bit-packed points; see the module docs.
#[derive(Clone, Debug)]
pub(crate) struct Compact {
    len: usize,
    rem_bits: u32,
    node_bits: u32,
    width: u32,
    sb_shift: u32,
    off_bits: u32,
    entries: Box<[u8]>,
    offsets: Box<[u8]>,
    bases: Box<[u32]>,
}

/// Reads the `bits`-bit field at bit position `pos` of `data`.
#[inline(always)]
fn read(data: &[u8], pos: usize, bits: u32) -> u64 {
    let byte = pos / 8;
    let word = u64::from_le_bytes(data[byte..byte + 8].try_into().expect("8 bytes"));
    (word >> (pos % 8)) & mask(bits)
}

#[inline(always)]
fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

fn write(data: &mut [u8], pos: usize, bits: u32, value: u64) {
    debug_assert!(value <= mask(bits));
    for i in 0..bits as usize {
        if value >> i & 1 == 1 {
            let p = pos + i;
            data[p / 8] |= 1 << (p % 8);
        }
    }
}

/// Bits needed to hold `x`.
fn bits_for(x: u64) -> u32 {
    64 - x.leading_zeros()
}

impl Compact {
    /// Packs sorted, deduplicated points (see `sort::pack`) owned by nodes
    /// indexed below `nodes`.
    pub(crate) fn new(sorted: &[u64], nodes: usize) -> Self {
        let len = sorted.len();
        let node_bits = bits_for(nodes.saturating_sub(1) as u64);
        let (bucket_bits, sb_shift, off_bits) = choose(sorted, node_bits);
        let rem_bits = 32 - bucket_bits;
        let width = rem_bits + node_bits;
        let buckets = 1usize << bucket_bits;

        let mut entries = vec![0u8; (len * width as usize).div_ceil(8) + 8];
        for (i, &p) in sorted.iter().enumerate() {
            let rem = sort::hash_of(p) as u64 & mask(rem_bits);
            let e = rem << node_bits | sort::node_of(p) as u64;
            write(&mut entries, i * width as usize, width, e);
        }

        let mut offsets = vec![0u8; ((buckets + 1) * off_bits as usize).div_ceil(8) + 8];
        let mut bases = vec![0u32; (buckets >> sb_shift) + 1];
        let mut i = 0usize;
        for j in 0..=buckets {
            while i < len && ((sort::hash_of(sorted[i]) as u64) >> rem_bits) < j as u64 {
                i += 1;
            }
            if j & ((1 << sb_shift) - 1) == 0 {
                bases[j >> sb_shift] = i as u32;
            }
            let off = i - bases[j >> sb_shift] as usize;
            write(&mut offsets, j * off_bits as usize, off_bits, off as u64);
        }
        Compact {
            len,
            rem_bits,
            node_bits,
            width,
            sb_shift,
            off_bits,
            entries: entries.into_boxed_slice(),
            offsets: offsets.into_boxed_slice(),
            bases: bases.into_boxed_slice(),
        }
    }

    #[inline(always)]
    fn start(&self, bucket: usize) -> usize {
        self.bases[bucket >> self.sb_shift] as usize
            + read(
                &self.offsets,
                bucket * self.off_bits as usize,
                self.off_bits,
            ) as usize
    }

    #[inline(always)]
    fn entry(&self, i: usize) -> u64 {
        read(&self.entries, i * self.width as usize, self.width)
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn node(&self, i: usize) -> usize {
        (self.entry(i) & mask(self.node_bits)) as usize
    }

    /// The full hash of point `i`: its bucket (found by binary search over
    /// bucket starts, `O(log B)`) and its stored remainder.
    pub(crate) fn hash(&self, i: usize) -> u32 {
        let buckets = 1usize << (32 - self.rem_bits);
        // The last bucket whose start is <= i.
        let (mut lo, mut hi) = (0usize, buckets);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if self.start(mid) <= i {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let rem = self.entry(i) >> self.node_bits;
        ((lo as u64) << self.rem_bits | rem) as u32
    }

    /// Index of the first point whose hash is >= `hash`, wrapping to 0.
    #[inline]
    pub(crate) fn search(&self, hash: u32) -> usize {
        let bucket = (hash as u64 >> self.rem_bits) as usize;
        let low = hash as u64 & mask(self.rem_bits);
        let (start, end) = (self.start(bucket), self.start(bucket + 1));
        for i in start..end {
            if self.entry(i) >> self.node_bits >= low {
                return i;
            }
        }
        if end == self.len {
            0
        } else {
            end
        }
    }

    /// [`search`](Self::search) for up to `GROUP` hashes: every bucket's
    /// bounds are loaded first (independent loads that overlap), then each
    /// bucket is scanned.
    pub(crate) fn search_group(&self, qs: &[u32], out: &mut [usize]) {
        let mut bounds = [(0usize, 0usize); crate::layout::GROUP];
        for (b, &q) in bounds.iter_mut().zip(qs) {
            let bucket = (q as u64 >> self.rem_bits) as usize;
            *b = (self.start(bucket), self.start(bucket + 1));
        }
        for ((o, &(start, end)), &q) in out.iter_mut().zip(&bounds).zip(qs) {
            let low = q as u64 & mask(self.rem_bits);
            let mut i = start;
            while i < end && self.entry(i) >> self.node_bits < low {
                i += 1;
            }
            *o = if i == self.len { 0 } else { i };
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.entries.len() + self.offsets.len() + self.bases.len() * 4
    }
}

/// Picks bucket bits, superblock shift and offset bits that make the
/// structure smallest.
fn choose(sorted: &[u64], node_bits: u32) -> (u32, u32, u32) {
    let len = sorted.len() as u64;
    // Around log2(P): fewer buckets cost remainder bits, more cost offsets.
    let centre = bits_for(len.max(1)).clamp(MIN_BUCKET_BITS, MAX_BUCKET_BITS);
    let lo = centre.saturating_sub(4).max(MIN_BUCKET_BITS);
    let hi = (centre + 1).min(MAX_BUCKET_BITS);

    // Bucket counts at the finest resolution; coarser ones are sums.
    let mut counts = vec![0u32; 1 << hi];
    for &p in sorted {
        counts[(sort::hash_of(p) >> (32 - hi)) as usize] += 1;
    }
    let mut best: Option<(u64, (u32, u32, u32))> = None;
    let mut b = hi;
    loop {
        let width = (32 - b + node_bits) as u64;
        for sb_shift in 3..=7u32 {
            let sb = 1usize << sb_shift;
            // Largest offset of a bucket start from its superblock's base:
            // the points in the superblock's buckets before it.
            let mut max_off = 0u64;
            for chunk in counts.chunks(sb) {
                let mut run = 0u64;
                for &c in &chunk[..chunk.len() - 1] {
                    run += c as u64;
                }
                max_off = max_off.max(run);
            }
            let off_bits = bits_for(max_off);
            let buckets = counts.len() as u64;
            let bits =
                len * width + (buckets + 1) * off_bits as u64 + ((buckets >> sb_shift) + 1) * 32;
            if best.is_none_or(|(bb, _)| bits < bb) {
                best = Some((bits, (b, sb_shift, off_bits)));
            }
        }
        if b == lo {
            break;
        }
        b -= 1;
        counts = counts.chunks(2).map(|c| c[0] + c[1]).collect();
    }
    best.expect("at least one candidate").1
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Compares every query against a plain sorted array.
    fn check(hashes: &[u32], nodes: usize, queries: impl IntoIterator<Item = u32>) {
        let mut sorted: Vec<u64> = hashes
            .iter()
            .enumerate()
            .map(|(i, &h)| sort::pack(h, (i % nodes) as u32))
            .collect();
        sorted.sort_unstable();
        sorted.dedup_by_key(|p| sort::hash_of(*p));
        let c = Compact::new(&sorted, nodes);
        assert_eq!(c.len(), sorted.len());
        for (i, &p) in sorted.iter().enumerate() {
            assert_eq!(c.hash(i), sort::hash_of(p), "hash of point {i}");
            assert_eq!(c.node(i), sort::node_of(p) as usize, "node of point {i}");
        }
        if sorted.is_empty() {
            return;
        }
        let plain: Vec<u32> = sorted.iter().map(|&p| sort::hash_of(p)).collect();
        let mut qs: Vec<u32> = queries.into_iter().collect();
        for &h in &plain {
            qs.extend([h, h.wrapping_sub(1), h.wrapping_add(1)]);
        }
        qs.extend([0, 1, u32::MAX, u32::MAX - 1]);
        for q in qs {
            let want = match plain.partition_point(|&h| h < q) {
                i if i == plain.len() => 0,
                i => i,
            };
            assert_eq!(c.search(q), want, "query {q:#x}");
        }
    }

    #[test]
    fn edge_cases() {
        check(&[], 1, []);
        check(&[12345], 1, []);
        check(&[0], 3, []);
        check(&[u32::MAX], 3, []);
        check(&[0, u32::MAX], 2, []);
        // Every point in one bucket, whatever the bucket count chosen.
        let same: Vec<u32> = (0..5000).map(|i| 0x8000_0000 + i).collect();
        check(&same, 7, []);
        // All points at the very end: keys past the last point wrap to 0.
        let end: Vec<u32> = (0..300).map(|i| u32::MAX - i * 3).collect();
        check(&end, 300, [u32::MAX]);
        // Points in the first bucket only.
        let start: Vec<u32> = (0..300).collect();
        check(&start, 1, []);
    }

    #[test]
    fn random_sizes_and_node_counts() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        for (n, nodes) in [
            (100usize, 1usize),
            (1000, 2),
            (5000, 300),
            (70_000, 70_000),
            (200_000, 1 << 20),
        ] {
            let hashes: Vec<u32> = (0..n).map(|_| rng.random()).collect();
            let queries: Vec<u32> = (0..20_000).map(|_| rng.random()).collect();
            check(&hashes, nodes, queries);
        }
    }

    #[test]
    fn chooses_few_bytes_per_point() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(6);
        let mut sorted: Vec<u64> = (0..1_600_000u32)
            .map(|i| sort::pack(rng.random(), i % 10_000))
            .collect();
        sort::sort_points(&mut sorted);
        sort::dedup_first(&mut sorted);
        let c = Compact::new(&sorted, 10_000);
        let per_point = c.heap_bytes() as f64 / sorted.len() as f64;
        assert!(per_point < 3.8, "{per_point} B/point");
    }
}
