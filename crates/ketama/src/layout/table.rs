//! A Maglev table in the `Compact` layout: no hashes at all (slot `s`'s is
//! `floor((s + 1) x 2^32 / M) - 1`, computed), only each slot's owner in
//! `ceil(log2 N)` bits, back to back: 1 byte a slot for up to 256 servers,
//! what Envoy's own compact table spends (`bit_width(N)` bits). A search is
//! one multiplication and a shift; reading an owner, two loads.

use super::bits;

/// The slots' owners, bit-packed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Table {
    /// Slots (the table size, a prime).
    size: u64,
    /// Bits an owner.
    width: u32,
    /// The owners, slot after slot, and a padding word.
    words: Box<[u64]>,
}

impl Table {
    /// Packs `owners` (slot order) of nodes indexed below `nodes`.
    pub(crate) fn new(owners: &[u32], nodes: usize) -> Table {
        let width = bits::bits_for(nodes.saturating_sub(1) as u64).max(1);
        let mut words = vec![0u64; (owners.len() * width as usize).div_ceil(64) + 1];
        for (i, &o) in owners.iter().enumerate() {
            let pos = i * width as usize;
            let (w, b) = (pos / 64, pos % 64);
            words[w] |= u64::from(o) << b;
            if b + width as usize > 64 {
                words[w + 1] |= u64::from(o) >> (64 - b);
            }
        }
        Table {
            size: owners.len() as u64,
            width,
            words: words.into_boxed_slice(),
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.size as usize
    }

    /// Slot `s`'s ring hash.
    #[inline]
    pub(crate) fn hash(&self, s: usize) -> u32 {
        ((((s as u64) + 1) << 32) / self.size - 1) as u32
    }

    #[inline]
    pub(crate) fn node(&self, s: usize) -> usize {
        bits::read(&self.words, s * self.width as usize, self.width) as usize
    }

    /// The first slot whose hash is `>= hash`: `ceil((hash + 1) x M /
    /// 2^32) - 1`. The last slot's hash is `u32::MAX`, so it never wraps.
    #[inline]
    pub(crate) fn search(&self, hash: u32) -> usize {
        crate::envoy::Maglev {
            table_size: self.size,
        }
        .slot_of_hash(hash) as usize
    }

    pub(crate) fn heap_bytes(&self) -> usize {
        self.words.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::Table;

    #[test]
    fn searches_and_owners_are_the_rings() {
        for (size, nodes) in [
            (7usize, 6usize),
            (17, 2),
            (1009, 300),
            (65537, 200),
            (251, 1),
        ] {
            let owners: Vec<u32> = (0..size).map(|i| ((i * 7919) % nodes) as u32).collect();
            let t = Table::new(&owners, nodes);
            let hashes: Vec<u32> = (0..size).map(|s| t.hash(s)).collect();
            assert_eq!(*hashes.last().unwrap(), u32::MAX);
            assert!(hashes.windows(2).all(|w| w[0] < w[1]));
            for (s, &o) in owners.iter().enumerate() {
                assert_eq!(t.node(s), o as usize);
            }
            let mut h = 0u32;
            for step in 0..5000u32 {
                for q in [
                    h,
                    hashes[step as usize % size],
                    hashes[step as usize % size].wrapping_add(1),
                ] {
                    let want = hashes.partition_point(|&x| x < q) % size;
                    assert_eq!(t.search(q), want, "size {size}, hash {q}");
                }
                h = h.wrapping_add(0x9E37_79B9);
            }
            let width = (usize::BITS - (nodes - 1).leading_zeros()).max(1) as usize;
            assert!(t.heap_bytes() <= (size * width).div_ceil(64) * 8 + 8);
        }
    }
}
