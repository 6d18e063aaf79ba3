//! MurmurHash64A, Envoy's `MURMUR_HASH_2` for `ring_hash`
//! (`source/common/common/hash.h`, `MurmurHash::murmurHash2`, with its
//! `STD_HASH_SEED`, 0xc70f6907): the hash libstdc++'s `std::hash<string>`
//! uses on 64-bit targets. Cost: one multiply-xor round per 8 bytes.

/// The seed Envoy passes (`MurmurHash::STD_HASH_SEED`).
pub const STD_HASH_SEED: u64 = 0xc70f_6907;

/// MurmurHash64A of `key` with `seed`.
pub fn murmur2_64(key: &[u8], seed: u64) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = seed ^ (key.len() as u64).wrapping_mul(M);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^ (h >> R)
}
