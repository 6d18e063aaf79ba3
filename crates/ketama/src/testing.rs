//! Helpers for tests and fuzz targets: forging keys onto chosen ring
//! points, and the ring's invariant checker. Not part of the routing API.

use crate::crc::{hash, step1, TABLES};
use crate::Ring;

pub use crate::crc::PointChain;

/// Returns four bytes that, appended to `prefix`, make the CRC-32 of the
/// whole equal to `target`.
///
/// CRC-32 is linear and its table's top bytes are all distinct, so the four
/// bytes can be solved for backwards. Tests use it to place a key exactly
/// on a chosen ring point (for instance a collided one).
pub fn forge_suffix(prefix: &[u8], target: u32) -> [u8; 4] {
    let start = !hash(prefix);
    let mut reg = !target;
    for _ in 0..4 {
        let top = reg >> 24;
        let idx = (0..256u32)
            .find(|&i| TABLES[0][i as usize] >> 24 == top)
            .expect("the CRC table's top bytes are a permutation of 0..=255");
        reg = ((reg ^ TABLES[0][idx as usize]) << 8) | idx;
    }
    (reg ^ start).to_le_bytes()
}

/// CRC-32 continued from a previous CRC over more bytes (bytewise).
pub fn extend(crc: u32, bytes: &[u8]) -> u32 {
    !bytes.iter().fold(!crc, |r, &b| step1(r, b))
}

/// A broken ring invariant, described.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("ring invariant violated: {0}")]
pub struct Violation(pub String);

/// Checks a ring's invariants: hashes strictly increasing (under
/// `EnvoyRingHash` the 64-bit hashes, non-decreasing), random access
/// agreeing with the sequential walk, every owner a known node of nonzero
/// weight owning no more points than it generated, the live-node count
/// right. `O(P)` (`O(P log B)` in `Compact`).
pub fn check_invariants(ring: &Ring) -> Result<(), Violation> {
    ring.check()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extend_matches_hash() {
        assert_eq!(extend(hash(b"abc"), b"defgh"), hash(b"abcdefgh"));
        assert_eq!(extend(0, b"xyz"), hash(b"xyz"));
    }

    #[test]
    fn forge_hits_target() {
        for (i, target) in [0u32, u32::MAX, 0x1234_5678, 0xdead_beef]
            .into_iter()
            .enumerate()
        {
            let prefix = format!("/forged/{i}");
            let suffix = forge_suffix(prefix.as_bytes(), target);
            let mut key = prefix.into_bytes();
            key.extend_from_slice(&suffix);
            assert_eq!(hash(&key), target);
        }
    }
}
