//! The `Compact` layout's code; its fields and math are explained in the
//! [`layout`](super) module docs; the bit-level helpers are
//! `layout::bits`.

use super::bits::{bits64, bits_for, byte_prefix, mask, read, select};
use crate::sort;
use pack::{choose, parts_for};

mod pack;
#[cfg(test)]
mod tests;

/// Elias-Fano coded points; see the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Compact {
    len: usize,
    rem_bits: u32,
    node_bits: u32,
    width: u32,
    /// Per point, `rem << node_bits | node` in `width` bits.
    entries: Box<[u64]>,
    /// The bucket sizes in unary: point `i` of bucket `q` sets bit `q + i`;
    /// bucket `q` ends with its zero bit. `len + B` bits, then padding.
    upper: Box<[u64]>,
    /// The bit where bucket `j << sample_shift` starts in `upper` is
    /// `coarse[j >> (coarse_shift - sample_shift)] + fine[j]`.
    fine: Box<[u16]>,
    coarse: Box<[u32]>,
    sample_shift: u32,
    coarse_shift: u32,
    /// Average points per bucket, in 1/65536ths.
    per_bucket: u64,
}

impl Compact {
    /// Packs sorted, deduplicated points (see `sort::pack`) owned by nodes
    /// indexed below `nodes`, on up to `threads` threads for rings of
    /// 2^18 points or more (the result is the same whatever the count).
    pub(crate) fn new(sorted: Vec<u64>, nodes: usize, threads: usize) -> Self {
        let node_bits = bits_for(nodes.saturating_sub(1) as u64);
        let rem_bits = choose(sorted.len() as u64, node_bits);
        let parts = parts_for(sorted.len(), threads);
        Self::with_shape(sorted, nodes, rem_bits, parts)
    }

    /// [`new`](Self::new) with the remainder width of `like`, a ring of
    /// about as many points (a rebuild after a small change): the same
    /// width would be chosen again, give or take the smallest difference.
    pub(crate) fn new_like(sorted: Vec<u64>, nodes: usize, like: &Compact, threads: usize) -> Self {
        let (len, was) = (sorted.len() as u64, like.len as u64);
        if len * 10 < was * 9 || len * 10 > was * 11 {
            return Self::new(sorted, nodes, threads);
        }
        let parts = parts_for(sorted.len(), threads);
        Self::with_shape(sorted, nodes, like.rem_bits, parts)
    }

    /// The bit of `upper` where bucket `q` starts, from its sample's
    /// (`sample`, the bit where the first bucket of `q`'s sample starts):
    /// as many zeros further as buckets between them, a word or a few, a popcount each and one
    /// branch-free select within the last.
    #[inline(always)]
    fn bucket_pos_from(&self, sample: usize, q: usize) -> usize {
        let zeros = (q & ((1 << self.sample_shift) - 1)) as u32;
        if zeros == 0 {
            return sample;
        }
        // The next 128 bits (256 with 128 buckets a sample) hold the zero
        // sought nearly always: count the words at once and pick the one
        // holding it without a data-dependent branch, which a word-by-word
        // loop mispredicts about once a lookup.
        let found = match self.sample_shift {
            0..=4 => self.pick::<1>(sample, zeros),
            5 => self.pick::<2>(sample, zeros),
            6 => self.pick::<3>(sample, zeros),
            _ => self.pick::<4>(sample, zeros),
        };
        let (pos, zeros) = match found {
            Ok(pos) => return pos,
            Err(rest) => rest,
        };
        let (mut pos, mut zeros) = (pos, zeros);
        loop {
            let w = !bits64(&self.upper, pos);
            let prefix = byte_prefix(w);
            let c = (prefix >> 56) as u32;
            if c >= zeros {
                return pos + select(w, prefix, zeros - 1) as usize + 1;
            }
            zeros -= c;
            pos += 64;
        }
    }

    /// The bit after the `zeros`-th zero from `pos` if it lies in the `W`
    /// aligned words from `pos`'s on, else where to go on and how many
    /// zeros are left. Aligned words are one load each; the bits of the
    /// first word below `pos` are masked off.
    #[inline(always)]
    fn pick<const W: usize>(&self, pos: usize, zeros: u32) -> Result<usize, (usize, u32)> {
        let base = pos / 64;
        let mut w: [u64; W] = std::array::from_fn(|k| !self.upper[base + k]);
        w[0] &= u64::MAX << (pos % 64);
        let p = w.map(byte_prefix);
        let mut before = [0u32; W];
        let mut total = 0u32;
        for k in 0..W {
            before[k] = total;
            total += (p[k] >> 56) as u32;
        }
        if zeros > total {
            return Err((64 * (base + W), zeros - total));
        }
        let k = before[1..].iter().filter(|&&b| b < zeros).count();
        Ok(64 * (base + k) + select(w[k], p[k], zeros - 1 - before[k]) as usize + 1)
    }

    /// Where bucket `q`'s first point probably is, from its sample alone:
    /// the sample's first point plus the average bucket size times the
    /// buckets in between. Touching that entry early overlaps its cache
    /// miss with the upper bits'.
    #[inline(always)]
    fn guess(&self, sample: usize, q: usize) -> usize {
        let within = q & ((1 << self.sample_shift) - 1);
        let first = sample - (q - within);
        (first + ((within as u64 * self.per_bucket) >> 16) as usize).min(self.len)
    }

    /// Points in the bucket whose first bit is `pos`: the ones before the
    /// next zero.
    #[inline(always)]
    fn bucket_len(&self, mut pos: usize) -> usize {
        let mut n = 0;
        loop {
            let t = (!bits64(&self.upper, pos)).trailing_zeros() as usize;
            n += t;
            if t < 64 {
                return n;
            }
            pos += 64;
        }
    }

    /// The bit where bucket `j << sample_shift` starts: two independent
    /// loads, the coarse one from a table of a few KB.
    #[inline(always)]
    fn sample(&self, j: usize) -> usize {
        self.coarse[j >> (self.coarse_shift - self.sample_shift)] as usize + self.fine[j] as usize
    }

    /// Loads the word holding entry `i` (to start its cache miss early).
    #[inline(always)]
    fn touch(&self, i: usize) {
        std::hint::black_box(self.entries[i * self.width as usize / 64]);
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

    /// The full hash of point `i`: its bucket (a binary search over the
    /// samples, then a walk of at most one sample's buckets, `O(log B)`) and
    /// its stored remainder.
    pub(crate) fn hash(&self, i: usize) -> u32 {
        // The last sample whose bucket starts at or before point i.
        let (mut lo, mut hi) = (0usize, self.fine.len());
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if self.sample(mid) - (mid << self.sample_shift) <= i {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        let mut q = lo << self.sample_shift;
        let mut pos = self.sample(lo);
        loop {
            let start = pos - q;
            let n = self.bucket_len(pos);
            if i < start + n {
                break;
            }
            pos += n + 1;
            q += 1;
        }
        let rem = self.entry(i) >> self.node_bits;
        ((q as u64) << self.rem_bits | rem) as u32
    }

    /// Every point's (hash, node) in ring order: `O(P + B)`, sequential.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, usize)> + '_ {
        let (mut q, mut pos) = (0usize, 0usize);
        let node_mask = mask(self.node_bits);
        (0..self.len).map(move |i| {
            // Skip the zeros (bucket ends) before point i's bit.
            while self.upper[pos / 64] >> (pos % 64) & 1 == 0 {
                q += 1;
                pos += 1;
            }
            pos += 1;
            let e = self.entry(i);
            let hash = (q as u64) << self.rem_bits | e >> self.node_bits;
            (hash as u32, (e & node_mask) as usize)
        })
    }

    /// Calls `f` with points `from..to`, packed as `hash << 32 | node`, in
    /// ring order, a few thousand at a time: `O(log B)` to find point
    /// `from`'s bit, then sequential. A rebuild reads the whole old ring
    /// through this, so it scans the upper bits a word at a time (each set
    /// bit is a point; its bucket is its bit position less the points
    /// before it) rather than a bit at a time.
    pub(crate) fn for_each_chunk_in(&self, from: usize, to: usize, mut f: impl FnMut(&[u64])) {
        const CHUNK: usize = 4096;
        if from >= to {
            return;
        }
        let mut buf: Vec<u64> = Vec::with_capacity(CHUNK.min(to - from));
        let (width, node_bits, rem_bits) = (self.width as usize, self.node_bits, self.rem_bits);
        let node_mask = mask(node_bits);
        let mut i = from;
        // Point `from`'s bit: its bucket plus the points before it.
        let start = (self.hash(from) >> rem_bits) as usize + from;
        for w in start / 64..self.upper.len() {
            let mut bits = self.upper[w];
            if w == start / 64 {
                bits &= u64::MAX << (start % 64);
            }
            while bits != 0 && i < to {
                let q = (w * 64 + bits.trailing_zeros() as usize) - i;
                bits &= bits - 1;
                let e = read(&self.entries, i * width, self.width);
                let hash = (q as u64) << rem_bits | e >> node_bits;
                buf.push(sort::pack(hash as u32, (e & node_mask) as u32));
                i += 1;
                if buf.len() == CHUNK {
                    f(&buf);
                    buf.clear();
                }
            }
            if i == to {
                break;
            }
        }
        f(&buf);
    }

    /// Index of the first point whose hash is >= `hash`, wrapping to 0.
    #[inline]
    pub(crate) fn search(&self, hash: u32) -> usize {
        let q = (hash as u64 >> self.rem_bits) as usize;
        let sample = self.sample(q >> self.sample_shift);
        self.touch(self.guess(sample, q));
        let pos = self.bucket_pos_from(sample, q);
        self.scan(pos, q, hash)
    }

    /// The first point at or after `hash` (wrapping) with its hash, and
    /// the hash of the point before it: what HAProxy's nearer-point lookup
    /// compares. One search; the neighbours outside `hash`'s bucket are
    /// found by scanning the upper bits to the next or previous set bit (a
    /// word or two: `O(1)` expected), their buckets being their bit
    /// positions less their indices.
    pub(crate) fn search_near(&self, hash: u32) -> (usize, u32, u32) {
        let q = (hash as u64 >> self.rem_bits) as usize;
        let sample = self.sample(q >> self.sample_shift);
        let pos = self.bucket_pos_from(sample, q);
        let (start, i, end) = self.in_bucket(pos, q, hash);
        // Point `i`'s hash given the bit `b` that stands for it.
        let at_bit = |i: usize, b: usize| {
            ((((b - i) as u64) << self.rem_bits) | self.entry(i) >> self.node_bits) as u32
        };
        let (at, at_hash) = if i < end {
            (i, at_bit(i, q + i))
        } else if end == self.len {
            (0, self.hash(0))
        } else {
            // Past bucket q's closing zero, the next set bit is point end's.
            let b = self.next_one(pos + (end - start) + 1);
            (end, at_bit(end, b))
        };
        let prev_hash = if i > start {
            at_bit(i - 1, q + i - 1)
        } else if start == 0 {
            self.hash(self.len - 1)
        } else {
            at_bit(start - 1, self.prev_one(pos))
        };
        (at, at_hash, prev_hash)
    }

    /// Bucket `q` (first bit `pos`) as point indices: its first, the first
    /// at or after `hash` (or its end), its end.
    #[inline(always)]
    fn in_bucket(&self, pos: usize, q: usize, hash: u32) -> (usize, usize, usize) {
        let low = hash as u64 & mask(self.rem_bits);
        let start = pos - q;
        let end = start + self.bucket_len(pos);
        let mut i = start;
        while i < end && self.entry(i) >> self.node_bits < low {
            i += 1;
        }
        (start, i, end)
    }

    /// The first set bit of `upper` at or after `from` (one exists).
    fn next_one(&self, from: usize) -> usize {
        let mut w = from / 64;
        let mut bits = self.upper[w] & (u64::MAX << (from % 64));
        while bits == 0 {
            w += 1;
            bits = self.upper[w];
        }
        w * 64 + bits.trailing_zeros() as usize
    }

    /// The last set bit of `upper` before `before` (one exists).
    fn prev_one(&self, before: usize) -> usize {
        let mut w = before / 64;
        let mut bits = if before % 64 == 0 {
            w -= 1;
            self.upper[w]
        } else {
            self.upper[w] & (u64::MAX >> (64 - before % 64))
        };
        while bits == 0 {
            w -= 1;
            bits = self.upper[w];
        }
        w * 64 + 63 - bits.leading_zeros() as usize
    }

    /// The answer for `hash` in bucket `q`, whose first bit is `pos`: the
    /// first of its points at or after `hash`, else the next point in ring
    /// order (wrapping to 0).
    #[inline(always)]
    fn scan(&self, pos: usize, q: usize, hash: u32) -> usize {
        let (_, i, _) = self.in_bucket(pos, q, hash);
        if i == self.len {
            0
        } else {
            i
        }
    }

    /// [`search`](Self::search) for up to `GROUP` hashes in three passes,
    /// each of independent loads that overlap: the samples (and the entries
    /// they predict), the buckets' upper bits, then the buckets' entries.
    pub(crate) fn search_group(&self, qs: &[u32], out: &mut [usize]) {
        let mut at = [0usize; super::GROUP];
        for (a, &h) in at.iter_mut().zip(qs) {
            let q = (h as u64 >> self.rem_bits) as usize;
            let sample = self.sample(q >> self.sample_shift);
            // Both misses of this key start now, beside the other keys'.
            self.touch(self.guess(sample, q));
            std::hint::black_box(self.upper[sample / 64 + 1]);
            *a = sample;
        }
        for (a, &h) in at.iter_mut().zip(qs) {
            let q = (h as u64 >> self.rem_bits) as usize;
            *a = self.bucket_pos_from(*a, q);
        }
        for ((o, &pos), &h) in out.iter_mut().zip(&at).zip(qs) {
            let q = (h as u64 >> self.rem_bits) as usize;
            *o = self.scan(pos, q, h);
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        (self.entries.len() + self.upper.len()) * 8 + self.fine.len() * 2 + self.coarse.len() * 4
    }
}
