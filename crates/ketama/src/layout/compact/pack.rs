//! Packing sorted points into the `Compact` layout: the remainder width,
//! the sample spacing, and the one pass (in ranges on threads for large
//! rings) that writes the entries, the upper bits and the samples.

use super::super::bits::{bits_for, mask};
use super::Compact;

/// Buckets per sample of the upper bits' positions, as a power of two:
/// 16 below 2^20 points (rings small enough that a denser index costs
/// little and keeps the lookup to one or two words of upper bits), 32 below
/// 2^23, 64 above (where the sample table is what keeps the layout within
/// 8% of the floor).
pub(super) fn sample_shift(len: usize) -> u32 {
    match len {
        0..0x10_0000 => 4,
        0x10_0000..0x80_0000 => 5,
        _ => 6,
    }
}

/// Buckets per coarse sample (at most): a u32 every 2^14 buckets, to which
/// each u16 sample is relative.
const MAX_COARSE_SHIFT: u32 = 14;

const MIN_REM_BITS: u32 = 4;
const MAX_REM_BITS: u32 = 24;

impl Compact {
    /// Packs the points in `parts` ranges of points, each on its own
    /// scoped thread but the first: a range starts at a multiple of 64
    /// points, so its entries start on a word boundary; each range packs
    /// its entries over its own sorted points (in place, as one range
    /// would), sets the upper bits and samples in its own slices of them
    /// (the one upper word a range shares with the one before is kept
    /// aside and ORed in after), and the entries then close up.
    pub(super) fn with_shape(sorted: Vec<u64>, nodes: usize, rem_bits: u32, parts: usize) -> Self {
        let len = sorted.len();
        let node_bits = bits_for(nodes.saturating_sub(1) as u64);
        let width = rem_bits + node_bits;
        let buckets = 1usize << (32 - rem_bits);
        let upper_bits = len + buckets;
        // Padding: `pick` reads up to four aligned words from any bucket.
        let mut upper = vec![0u64; upper_bits.div_ceil(64) + 4];
        let shift = sample_shift(len);
        let sample = 1usize << shift;
        let mut samples = vec![0u32; buckets.div_ceil(sample) + 1];
        let shape = Shape {
            bucket_shift: 32 + rem_bits,
            rem_mask: mask(rem_bits),
            node_bits,
            width,
            sample,
        };
        let mut words = sorted;
        // Range starts (multiples of 64 points), then where each range's
        // upper words and samples begin.
        let mut starts: Vec<usize> = (0..parts).map(|t| (len * t / parts) & !63).collect();
        starts.dedup();
        starts.retain(|&s| s == 0 || s < len);
        let q = |i: usize| (words[i] >> shape.bucket_shift) as usize;
        let upper_from: Vec<usize> = starts
            .iter()
            .map(|&s| if s == 0 { 0 } else { (q(s) + s) / 64 + 1 })
            .collect();
        let sample_from: Vec<usize> = starts
            .iter()
            .map(|&s| if s == 0 { 0 } else { q(s - 1) / sample + 1 })
            .collect();
        let mut jobs = Vec::with_capacity(starts.len());
        {
            let (mut w, mut u, mut m) = (&mut words[..], &mut upper[..], &mut samples[..]);
            for t in (0..starts.len()).rev() {
                let (w_rest, w_part) = w.split_at_mut(starts[t]);
                let (u_rest, u_part) = u.split_at_mut(upper_from[t]);
                let (m_rest, m_part) = m.split_at_mut(sample_from[t]);
                jobs.push(Range {
                    start: starts[t],
                    points: w_part,
                    upper: u_part,
                    upper_from: upper_from[t],
                    samples: m_part,
                    sample_from: sample_from[t],
                });
                (w, u, m) = (w_rest, u_rest, m_rest);
            }
            jobs.reverse();
        }
        let packed: Vec<Packed> = std::thread::scope(|scope| {
            let shape = &shape;
            let mut jobs = jobs.into_iter();
            let first = jobs.next().expect("one range at least");
            let others: Vec<_> = jobs.map(|r| scope.spawn(move || r.pack(shape))).collect();
            let mut done = vec![first.pack(shape)];
            // A range panics only on a bug: propagate it.
            done.extend(others.into_iter().map(|h| h.join().unwrap()));
            done
        });
        let (mut k, mut acc) = (0usize, 0u64);
        for (p, &s) in packed.iter().zip(&starts) {
            if let Some((at, word)) = p.shared {
                upper[at] |= word;
            }
            if s != k {
                words.copy_within(s..s + p.words, k);
            }
            k += p.words;
            acc = p.acc;
        }
        let mut next_sample = packed.last().map_or(0, |p| p.next_sample);
        while next_sample < samples.len() {
            samples[next_sample] = (len + (next_sample * sample).min(buckets)) as u32;
            next_sample += 1;
        }
        words.truncate(k);
        // The partial last word, then padding for the reader's second load.
        words.extend_from_slice(&[acc, 0]);
        words.shrink_to_fit();
        // Each sample as a u16 from its coarse sample: the widest coarse
        // blocks whose spans all fit 16 bits (2^14 buckets span about 2^15
        // bits; only rings whose points crowd into a few buckets need
        // narrower ones, down to one sample a block, which always fits).
        let mut coarse_shift = MAX_COARSE_SHIFT.max(shift);
        let fits = |cs: u32| {
            samples
                .chunks(1 << (cs - shift))
                .all(|c| c[c.len() - 1] - c[0] <= u16::MAX as u32)
        };
        while coarse_shift > shift && !fits(coarse_shift) {
            coarse_shift -= 1;
        }
        let per = 1usize << (coarse_shift - shift);
        let coarse: Box<[u32]> = samples.iter().step_by(per).copied().collect();
        let fine: Box<[u16]> = samples
            .iter()
            .enumerate()
            .map(|(j, &p)| (p - coarse[j / per]) as u16)
            .collect();
        Compact {
            len,
            rem_bits,
            node_bits,
            width,
            entries: words.into_boxed_slice(),
            upper: upper.into_boxed_slice(),
            fine,
            coarse,
            sample_shift: shift,
            coarse_shift,
            per_bucket: ((len as u64) << 16) >> (32 - rem_bits),
        }
    }
}

/// Points from which packing is split across threads.
const PARALLEL_MIN_POINTS: usize = 1 << 18;

pub(super) fn parts_for(len: usize, threads: usize) -> usize {
    if len >= PARALLEL_MIN_POINTS {
        threads.clamp(1, 16)
    } else {
        1
    }
}

/// What every range of a packing needs to know.
struct Shape {
    bucket_shift: u32,
    rem_mask: u64,
    node_bits: u32,
    width: u32,
    sample: usize,
}

/// One range of points to pack, with its slices of the outputs.
struct Range<'a> {
    /// Index of its first point.
    start: usize,
    /// Its sorted points, overwritten by its entries.
    points: &'a mut [u64],
    /// The upper words from `upper_from` on.
    upper: &'a mut [u64],
    upper_from: usize,
    /// The samples from `sample_from` on.
    samples: &'a mut [u32],
    sample_from: usize,
}

/// A packed range: its entries' whole words (at the front of its points),
/// the bits left over (the last range's only), the upper word it shares
/// with the range before, and the first sample it did not set.
struct Packed {
    words: usize,
    acc: u64,
    shared: Option<(usize, u64)>,
    next_sample: usize,
}

impl Range<'_> {
    /// One pass: each point's upper bit, each sampled bucket's start (the
    /// first point at or past it, plus the bucket number), and the
    /// entries, written over the sorted points themselves: entry `i` ends
    /// before bit `64 * (i + 1)`, so a word is only written once the point
    /// stored there has been read. No second ring-sized buffer.
    fn pack(self, shape: &Shape) -> Packed {
        let Shape {
            bucket_shift,
            rem_mask,
            node_bits,
            width,
            sample,
        } = *shape;
        let mut shared = None;
        let mut next_sample = self.sample_from;
        let words = self.points;
        // A 64-bit accumulator: `acc` holds `acc_bits < 64` pending bits.
        let (mut acc, mut acc_bits, mut k) = (0u64, 0u32, 0usize);
        for local in 0..words.len() {
            let i = self.start + local;
            let p = words[local];
            let q = (p >> bucket_shift) as usize;
            while next_sample * sample <= q {
                self.samples[next_sample - self.sample_from] = (i + next_sample * sample) as u32;
                next_sample += 1;
            }
            let bit = q + i;
            match (bit / 64).checked_sub(self.upper_from) {
                Some(w) => self.upper[w] |= 1 << (bit % 64),
                None => {
                    let (at, word) = shared.get_or_insert((bit / 64, 0u64));
                    debug_assert_eq!(*at, bit / 64);
                    *word |= 1 << (bit % 64);
                }
            }
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
        Packed {
            words: k,
            acc,
            shared,
            next_sample,
        }
    }
}

/// The remainder width that makes the structure smallest:
/// `P (r + n) + P + 2^(32 - r) + 16 x 2^(32 - r) / S` bits (S buckets a
/// sample), which is
/// smallest near `r = log2(2^32 / P)`. Cost: `O(1)`.
pub(super) fn choose(len: u64, node_bits: u32) -> u32 {
    let sample = 1u64 << sample_shift(len as usize);
    (MIN_REM_BITS..=MAX_REM_BITS)
        .min_by_key(|&r| {
            let buckets = 1u64 << (32 - r);
            len * (r + node_bits) as u64 + len + buckets + 16 * buckets.div_ceil(sample)
        })
        .expect("a range of widths")
}
