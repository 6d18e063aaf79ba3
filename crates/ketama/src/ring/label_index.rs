//! The label index: one bit per point and label, so that a walk under a
//! label requirement skips the points it can rule out 64 at a time.

use super::labels::Labels;
use crate::sort::{self, Collisions};

/// Rings with at most this many labels get a label index (at most 2
/// bytes a point), unless the builder turns it off.
pub const LABEL_INDEX_MAX_LABELS: usize = 16;

/// One bit per point and label: bit `i % 64` of word `(i / 64) * F + l` is
/// set when point `i`'s owner carries label `l` (for a collided point: when
/// any node sharing it does). A walk under a requirement ANDs the words of
/// the required labels, block by block of 64 points, and visits only the
/// points whose bit survives; a set bit may still be ineligible (a collided
/// point whose nodes carry the labels between them), so the walk checks
/// each candidate exactly, but no eligible point is ever skipped.
///
/// Cost: `F` bits a point (`ceil(P / 64) * F * 8` bytes), built in one pass
/// over the sorted points; a lookup reads `|required|` words per block of
/// 64 points it crosses (about `1 / (64 f)` blocks beyond the first for a
/// requirement holding a share `f` of the points).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LabelIndex {
    stride: usize,
    words: Box<[u64]>,
}

impl LabelIndex {
    /// The index of `sorted` (packed points in ring order).
    pub(crate) fn new(sorted: &[u64], labels: &Labels, collisions: &Collisions) -> Self {
        let stride = labels.names.len();
        if stride == 0 || sorted.is_empty() {
            return LabelIndex::default();
        }
        let mut words = vec![0u64; sorted.len().div_ceil(64) * stride];
        let blocks = words.chunks_exact_mut(stride);
        for (b, (block, points)) in blocks.zip(sorted.chunks(64)).enumerate() {
            for (j, &p) in points.iter().enumerate() {
                let mut m = labels.point_mask(b * 64 + j, sort::node_of(p) as usize, collisions);
                while m != 0 {
                    block[m.trailing_zeros() as usize] |= 1 << j;
                    m &= m - 1;
                }
            }
        }
        LabelIndex {
            stride,
            words: words.into_boxed_slice(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    /// How far (in points, wrapping after `len`) the first point at or
    /// after `pos` whose owner may carry every label of `mask` lies; `None`
    /// if none lies within `max`.
    #[inline]
    pub(crate) fn next(&self, pos: usize, len: usize, mask: u64, max: usize) -> Option<usize> {
        let (mut p, mut d) = (pos, 0usize);
        loop {
            let block = &self.words[(p / 64) * self.stride..][..self.stride];
            let mut m = mask;
            let mut w = !0u64;
            while m != 0 {
                w &= block[m.trailing_zeros() as usize];
                m &= m - 1;
            }
            let off = p % 64;
            let w = w >> off;
            if w != 0 {
                let t = d + w.trailing_zeros() as usize;
                return (t < max).then_some(t);
            }
            // Bits past `len` are clear, so an empty rest of the last
            // block wraps to the start.
            let step = (64 - off).min(len - p);
            d += step;
            if d >= max {
                return None;
            }
            p += step;
            if p == len {
                p = 0;
            }
        }
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.len() * 8
    }

    /// Whether point `i`'s bit for label `l` is set.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn bit(&self, i: usize, l: usize) -> bool {
        self.words[(i / 64) * self.stride + l] >> (i % 64) & 1 == 1
    }

    /// Labels per block (the ring's label count), 0 when empty.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn stride(&self) -> usize {
        self.stride
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `next` against a point-by-point scan, on random bitmaps of every
    /// length around block edges, every start, several masks and limits.
    #[test]
    fn next_is_the_first_candidate_scan() {
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut rnd = move || {
            state = crate::mix::mix64(state);
            state
        };
        for len in [1usize, 2, 63, 64, 65, 127, 128, 129, 300, 1000] {
            for density in [1u64, 3, 15, 255] {
                let stride = 3;
                let mut words = vec![0u64; len.div_ceil(64) * stride];
                for i in 0..len {
                    for l in 0..stride {
                        // A bit with probability 1 / (density + 1).
                        if rnd() % (density + 1) == 0 {
                            words[(i / 64) * stride + l] |= 1 << (i % 64);
                        }
                    }
                }
                let index = LabelIndex {
                    stride,
                    words: words.into_boxed_slice(),
                };
                for mask in [0b001u64, 0b010, 0b101, 0b111] {
                    let hit = |i: usize| (0..stride).all(|l| mask >> l & 1 == 0 || index.bit(i, l));
                    for pos in 0..len {
                        for max in [1, 2, 64, len, len + 5] {
                            let want = (0..max.min(len)).find(|&d| hit((pos + d) % len));
                            assert_eq!(
                                index.next(pos, len, mask, max),
                                want,
                                "len {len} pos {pos} mask {mask:b} max {max}"
                            );
                        }
                    }
                }
            }
        }
    }
}
