//! The two fixed mixing functions the crate uses wherever a number must be
//! the same on every machine and release: FNV-1a 64 over bytes and
//! SplitMix64 (its output function, and the stream built on it).

/// FNV-1a, 64-bit (offset `0xcbf29ce484222325`, prime `0x100000001b3`).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// SplitMix64's output function: a bijection of u64 that spreads every
/// input bit over the output.
pub fn mix64(h: u64) -> u64 {
    let z = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The SplitMix64 generator: a Weyl sequence (step `0x9E3779B97F4A7C15`)
/// through [`mix64`]. Deterministic from its seed on every platform.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A stream starting after `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next value.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }

    /// A value in `0..n` (n > 0), by multiply-shift: no modulo bias worth
    /// naming for `n` far below 2^32.
    pub fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }

    /// A float in `[0, 1)` with 53 random bits.
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_vectors() {
        // FNV-1a 64: the reference implementation's test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
        // SplitMix64 seeded with 0: its reference output (Vigna's splitmix64.c).
        let mut s = SplitMix64::new(0);
        assert_eq!(s.next(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(s.next(), 0x6e78_9e6a_a1b9_65f4);
    }
}
