//! The `Compact` layout's code; its fields and math are explained in the
//! [`layout`](crate::layout) module docs.

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
    entries: Box<[u64]>,
    offsets: Box<[u64]>,
    bases: Box<[u32]>,
    /// Average points per bucket, in 1/65536ths.
    per_bucket: u64,
}

/// Reads the `bits`-bit field (at most 57 bits) at bit `pos` of `words`.
/// The array ends with a padding word, so the second load is always in
/// bounds.
#[inline(always)]
fn read(words: &[u64], pos: usize, bits: u32) -> u64 {
    let (w, o) = (pos / 64, (pos % 64) as u32);
    let lo = words[w] >> o;
    // `<< 1 << (63 - o)` is `<< (64 - o)`, and 0 when `o` is 0.
    let hi = words[w + 1] << 1 << (63 - o);
    (lo | hi) & mask(bits)
}

#[inline(always)]
fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Appends bit fields back to back into a pre-sized word array.
struct BitWriter {
    words: Vec<u64>,
    pos: usize,
}

impl BitWriter {
    fn with_bits(total_bits: usize) -> Self {
        BitWriter {
            // One spare word for a field's spill and one of padding.
            words: vec![0; total_bits.div_ceil(64) + 2],
            pos: 0,
        }
    }

    #[inline(always)]
    fn push(&mut self, value: u64, width: u32) {
        let (w, o) = (self.pos / 64, (self.pos % 64) as u32);
        self.words[w] |= value << o;
        self.words[w + 1] |= value >> 1 >> (63 - o);
        self.pos += width as usize;
    }

    fn finish(self) -> Box<[u64]> {
        self.words.into_boxed_slice()
    }
}

/// Bits needed to hold `x`.
fn bits_for(x: u64) -> u32 {
    64 - x.leading_zeros()
}

impl Compact {
    /// Packs sorted, deduplicated points (see `sort::pack`) owned by nodes
    /// indexed below `nodes`.
    pub(crate) fn new(sorted: Vec<u64>, nodes: usize) -> Self {
        let node_bits = bits_for(nodes.saturating_sub(1) as u64);
        let (bucket_bits, sb_shift) = choose(&sorted, node_bits);
        Self::with_shape(sorted, nodes, bucket_bits, sb_shift)
    }

    /// [`new`](Self::new) with the bucket and superblock sizes of `like`,
    /// a ring of about as many points (a rebuild after a small change):
    /// skips the search for the best sizes, a pass over the points. Any
    /// other count of points gets its own search.
    pub(crate) fn new_like(sorted: Vec<u64>, nodes: usize, like: &Compact) -> Self {
        let (len, was) = (sorted.len() as u64, like.len as u64);
        if len * 10 < was * 9 || len * 10 > was * 11 {
            return Self::new(sorted, nodes);
        }
        Self::with_shape(sorted, nodes, 32 - like.rem_bits, like.sb_shift)
    }

    fn with_shape(sorted: Vec<u64>, nodes: usize, bucket_bits: u32, sb_shift: u32) -> Self {
        let len = sorted.len();
        let node_bits = bits_for(nodes.saturating_sub(1) as u64);
        let rem_bits = 32 - bucket_bits;
        let width = rem_bits + node_bits;
        let buckets = 1usize << bucket_bits;

        // Each bucket's start: a histogram of the buckets, then one pass
        // over them writing superblock bases and offsets. (Finding starts
        // while walking the points branches on every bucket boundary, a
        // coin flip at about four points a bucket: three times slower.)
        let mut starts = vec![0u32; buckets + 1];
        let bucket_shift = 32 + rem_bits;
        for &p in &sorted {
            starts[(p >> bucket_shift) as usize + 1] += 1;
        }
        // An offset counts the points of the buckets before it in its
        // superblock: its width is that of the fullest superblock's.
        let sb_points = starts[1..]
            .chunks(1 << sb_shift)
            .map(|c| c.iter().sum::<u32>());
        let off_bits = bits_for(sb_points.max().unwrap_or(0) as u64);
        let mut offsets = BitWriter::with_bits((buckets + 1) * off_bits as usize);
        let mut bases = vec![0u32; (buckets >> sb_shift) + 1];
        let (mut at, mut base) = (0u32, 0u32);
        for (b, n) in starts.iter().enumerate() {
            at += n;
            if b & ((1 << sb_shift) - 1) == 0 {
                base = at;
                bases[b >> sb_shift] = at;
            }
            offsets.push((at - base) as u64, off_bits);
        }
        drop(starts);

        // Then the entries, written over the sorted points themselves:
        // entry `i` ends before bit `64 * (i + 1)`, so a word is only
        // written once the point stored there has been read. No second
        // ring-sized buffer.
        let mut words = sorted;
        let rem_mask = mask(rem_bits);
        // A 64-bit accumulator: `acc` holds `acc_bits < 64` pending bits.
        let (mut acc, mut acc_bits, mut k) = (0u64, 0u32, 0usize);
        for i in 0..len {
            let p = words[i];
            let e = (p >> 32 & rem_mask) << node_bits | (p & 0xffff_ffff);
            acc |= e << acc_bits;
            acc_bits += width;
            if acc_bits >= 64 {
                words[k] = acc;
                k += 1;
                acc_bits -= 64;
                // The bits of `e` that did not fit (none when it ended the word).
                acc = e >> (width - acc_bits);
            }
        }
        words.truncate(k);
        // The partial last word, then padding for the reader's second load.
        words.extend_from_slice(&[acc, 0]);
        words.shrink_to_fit();
        let entries = words.into_boxed_slice();
        let offsets = offsets.finish();
        Compact {
            len,
            rem_bits,
            node_bits,
            width,
            sb_shift,
            off_bits,
            entries,
            offsets,
            bases: bases.into_boxed_slice(),
            per_bucket: ((len as u64) << 16) >> bucket_bits,
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

    /// Every point's (hash, node) in ring order: `O(P + B)`, sequential.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, usize)> + '_ {
        let mut bucket = 0usize;
        let mut next_start = self.start(1);
        (0..self.len).map(move |i| {
            while next_start <= i {
                bucket += 1;
                next_start = self.start(bucket + 1);
            }
            let e = self.entry(i);
            let hash = (bucket as u64) << self.rem_bits | e >> self.node_bits;
            (hash as u32, (e & mask(self.node_bits)) as usize)
        })
    }

    /// Calls `f` with every point, packed as `hash << 32 | node`, in ring
    /// order, a few thousand at a time: `O(P + B)`, sequential.
    pub(crate) fn for_each_chunk(&self, mut f: impl FnMut(&[u64])) {
        const CHUNK: usize = 4096;
        let node_mask = mask(self.node_bits);
        let buckets = 1usize << (32 - self.rem_bits);
        let mut buf: Vec<u64> = Vec::with_capacity(CHUNK + 64);
        let mut start = self.start(0);
        for bucket in 0..buckets {
            let end = self.start(bucket + 1);
            let high = (bucket as u64) << (self.rem_bits + 32);
            buf.extend((start..end).map(|i| {
                let e = self.entry(i);
                high | (e >> self.node_bits) << 32 | (e & node_mask)
            }));
            start = end;
            if buf.len() >= CHUNK {
                f(&buf);
                buf.clear();
            }
        }
        f(&buf);
    }

    /// Index of the first point whose hash is >= `hash`, wrapping to 0.
    #[inline]
    pub(crate) fn search(&self, hash: u32) -> usize {
        let bucket = (hash as u64 >> self.rem_bits) as usize;
        let low = hash as u64 & mask(self.rem_bits);
        // Touch the entry where the bucket is expected to start (its
        // superblock's base plus the average bucket size times its place in
        // the superblock) before the bucket's offset arrives: both loads
        // then wait on memory together instead of one after the other, and
        // the real start is nearly always on the same cache line.
        let sb = bucket >> self.sb_shift;
        let within = (bucket & ((1 << self.sb_shift) - 1)) as u64;
        let guess = self.bases[sb] as usize + ((within * self.per_bucket) >> 16) as usize;
        std::hint::black_box(self.entry(guess.min(self.len)));
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
        (self.entries.len() + self.offsets.len()) * 8 + self.bases.len() * 4
    }
}

/// Picks bucket bits, superblock shift and offset bits that make the
/// structure smallest, trying bucket bits from `log2 P - 4` to `log2 P - 1`
/// (2 to 16 points a bucket) and superblocks of 8 to 128 buckets.
///
/// A bucket's offset from its superblock's base is at most the
/// superblock's point count, so the offset width is taken from the fullest
/// superblock (at most one bit more than the tightest bound). Superblock
/// counts at every size are sums of one small histogram of the top
/// `log2 P - 4` bits. Cost: one pass over the points.
fn choose(sorted: &[u64], node_bits: u32) -> (u32, u32) {
    const SHIFTS: std::ops::RangeInclusive<u32> = 3..=7;
    let len = sorted.len() as u64;
    let centre = bits_for(len.max(1));
    let hi = centre
        .saturating_sub(1)
        .clamp(MIN_BUCKET_BITS, MAX_BUCKET_BITS);
    let lo = centre.saturating_sub(4).clamp(MIN_BUCKET_BITS, hi);

    // Point counts of the superblocks at resolution `res` bits, for every
    // `res` from `hi - 3` down to `lo - 7`, as one histogram halved in place.
    let finest = hi - *SHIFTS.start();
    let mut counts = vec![0u32; 1 << finest];
    for &p in sorted {
        counts[(sort::hash_of(p) >> (32 - finest)) as usize] += 1;
    }
    let mut fullest = [0u64; 33];
    let mut n = counts.len();
    let mut res = finest;
    loop {
        fullest[res as usize] = counts[..n].iter().copied().max().unwrap_or(0) as u64;
        if res == 0 || res + SHIFTS.end() <= lo {
            break;
        }
        n /= 2;
        for j in 0..n {
            counts[j] = counts[2 * j] + counts[2 * j + 1];
        }
        res -= 1;
    }
    let mut best: Option<(u64, (u32, u32, u32))> = None;
    for b in lo..=hi {
        let width = (32 - b + node_bits) as u64;
        let buckets = 1u64 << b;
        for s in SHIFTS {
            let off_bits = bits_for(fullest[(b - s) as usize]);
            let bits = len * width + (buckets + 1) * off_bits as u64 + ((buckets >> s) + 1) * 32;
            if best.is_none_or(|(bb, _)| bits < bb) {
                best = Some((bits, (b, s, off_bits)));
            }
        }
    }
    let (b, s, _) = best.expect("at least one candidate").1;
    (b, s)
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
        let c = Compact::new(sorted.clone(), nodes);
        assert_eq!(c.len(), sorted.len());
        for (i, &p) in sorted.iter().enumerate() {
            assert_eq!(c.hash(i), sort::hash_of(p), "hash of point {i}");
            assert_eq!(c.node(i), sort::node_of(p) as usize, "node of point {i}");
        }
        let walked: Vec<(u32, usize)> = c.iter().collect();
        let want: Vec<(u32, usize)> = sorted
            .iter()
            .map(|&p| (sort::hash_of(p), sort::node_of(p) as usize))
            .collect();
        assert_eq!(walked, want);
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
        sorted.sort_unstable();
        sorted.dedup_by_key(|p| sort::hash_of(*p));
        let c = Compact::new(sorted.clone(), 10_000);
        let per_point = c.heap_bytes() as f64 / sorted.len() as f64;
        assert!(per_point < 3.8, "{per_point} B/point");
    }
}
