//! Stable LSD radix sort of ring points.
//!
//! A point is packed in a `u64` as `hash << 32 | node`. Sorting by the high
//! 32 bits only, stably, keeps points of equal hash in the order they were
//! generated, which is how the tie rules are expressed: generate points in
//! tie order (configuration order for nginx, address order for pingora v2)
//! and the first of equal hashes is the winner.
//!
//! Three passes of 11 bits (2,048 buckets, 8 KiB of counters each, all
//! counted in one read) and one scratch buffer of the same size as the input:
//! 16 bytes per point at the peak, no per-point allocation.

const BITS: u32 = 11;
const BUCKETS: usize = 1 << BITS;
const PASSES: usize = 3;

/// Packs a point.
#[inline(always)]
pub fn pack(hash: u32, node: u32) -> u64 {
    (hash as u64) << 32 | node as u64
}

/// The hash of a packed point.
#[inline(always)]
pub fn hash_of(p: u64) -> u32 {
    (p >> 32) as u32
}

/// The node of a packed point.
#[inline(always)]
pub fn node_of(p: u64) -> u32 {
    p as u32
}

/// Sorts packed points by hash, stably.
pub fn sort_points(points: &mut Vec<u64>) {
    let n = points.len();
    if n < 64 {
        // Insertion sort is stable and cheaper than three passes here.
        points.sort_by_key(|&p| hash_of(p));
        return;
    }
    let mut counts = vec![[0usize; BUCKETS]; PASSES];
    for &p in points.iter() {
        let h = hash_of(p);
        for (pass, c) in counts.iter_mut().enumerate() {
            c[digit(h, pass)] += 1;
        }
    }
    let mut src = std::mem::take(points);
    let mut dst: Vec<u64> = vec![0; n];
    for (pass, c) in counts.iter_mut().enumerate() {
        // A pass where every point has the same digit moves nothing.
        if c.contains(&n) {
            continue;
        }
        let mut sum = 0;
        for k in c.iter_mut() {
            let v = *k;
            *k = sum;
            sum += v;
        }
        for &p in src.iter() {
            let d = digit(hash_of(p), pass);
            dst[c[d]] = p;
            c[d] += 1;
        }
        std::mem::swap(&mut src, &mut dst);
    }
    *points = src;
}

#[inline(always)]
fn digit(h: u32, pass: usize) -> usize {
    ((h >> (pass as u32 * BITS)) as usize) & (BUCKETS - 1)
}

/// Removes every point whose hash equals the previous point's, keeping the
/// first: the collision rule once points are in tie order.
pub fn dedup_first(points: &mut Vec<u64>) {
    points.dedup_by(|b, a| hash_of(*a) == hash_of(*b));
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn sorts_stably() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for n in [0usize, 1, 5, 63, 64, 1000, 100_000] {
            // Few distinct hashes so that ties are common.
            let mut v: Vec<u64> = (0..n)
                .map(|i| pack(rng.random_range(0..(n as u32 / 3 + 1)) << 7, i as u32))
                .collect();
            let mut want = v.clone();
            want.sort_by_key(|&p| hash_of(p)); // std's stable sort
            sort_points(&mut v);
            assert_eq!(v, want, "n = {n}");
        }
    }

    #[test]
    fn sorts_full_range() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(8);
        let mut v: Vec<u64> = (0..50_000).map(|i| pack(rng.random(), i)).collect();
        v.push(pack(u32::MAX, 1));
        v.push(pack(0, 2));
        let mut want = v.clone();
        want.sort_by_key(|&p| hash_of(p));
        sort_points(&mut v);
        assert_eq!(v, want);
    }

    #[test]
    fn dedup_keeps_first() {
        let mut v = vec![pack(1, 9), pack(1, 3), pack(2, 4), pack(2, 1), pack(3, 0)];
        dedup_first(&mut v);
        assert_eq!(v, vec![pack(1, 9), pack(2, 4), pack(3, 0)]);
    }
}
