//! CRC-32 (IEEE, reflected, polynomial 0xEDB88320), as nginx's `ngx_crc32`
//! and the `crc32fast` crate compute it.
//!
//! Keys are hashed with `crc32fast` (SIMD on long inputs). Ring points are a
//! chain `crc32(prefix || prev_hash as 4 LE bytes)` over the same per-node
//! prefix, so instead of cloning a hasher per point, [`PointChain`] keeps the
//! prefix's CRC register and advances it over the 4 bytes with one
//! slicing-by-4 table step: four table loads per point.

/// Slicing-by-4 tables: `TABLES[0]` is the classic byte table, `TABLES[k][b]`
/// is the register contribution of byte `b` followed by `k` zero bytes.
/// 4 x 256 x 4 B = 4 KiB, built at compile time.
pub(crate) static TABLES: [[u32; 256]; 4] = make_tables();

const fn make_tables() -> [[u32; 256]; 4] {
    let mut t = [[0u32; 256]; 4];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut s = 1;
    while s < 4 {
        let mut i = 0;
        while i < 256 {
            let prev = t[s - 1][i];
            t[s][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            i += 1;
        }
        s += 1;
    }
    t
}

/// CRC-32 of `bytes`: the hash of a lookup key, identical to nginx's
/// `ngx_crc32_long` and pingora-ketama's `crc32fast::hash`.
#[inline]
pub fn hash(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// Advances a raw (non-inverted) CRC register over four bytes given as a
/// little-endian word.
#[inline(always)]
fn step4(reg: u32, word: u32) -> u32 {
    let r = reg ^ word;
    TABLES[3][(r & 0xff) as usize]
        ^ TABLES[2][((r >> 8) & 0xff) as usize]
        ^ TABLES[1][((r >> 16) & 0xff) as usize]
        ^ TABLES[0][(r >> 24) as usize]
}

/// Advances a raw CRC register over one byte.
#[cfg(any(test, feature = "testing"))]
#[inline(always)]
pub(crate) fn step1(reg: u32, byte: u8) -> u32 {
    (reg >> 8) ^ TABLES[0][((reg ^ byte as u32) & 0xff) as usize]
}

/// The chain of point hashes of one node: point `j` is
/// `crc32(prefix || point[j-1] as 4 LE bytes)`, with `point[-1] = 0`.
///
/// Cost: one slicing-by-4 step (4 table loads, 4 KiB of tables) per point.
#[derive(Clone, Debug)]
pub struct PointChain {
    /// Raw CRC register after the prefix.
    base: u32,
    prev: u32,
}

impl PointChain {
    /// Starts the chain for a node whose hash prefix is the concatenation of
    /// `parts`.
    pub fn new(parts: &[&[u8]]) -> Self {
        let mut h = crc32fast::Hasher::new();
        for p in parts {
            h.update(p);
        }
        PointChain {
            base: !h.finalize(),
            prev: 0,
        }
    }
}

impl Iterator for PointChain {
    type Item = u32;

    #[inline]
    fn next(&mut self) -> Option<u32> {
        let h = !step4(self.base, self.prev);
        self.prev = h;
        Some(h)
    }
}

/// One node's share of a batch point generation: the raw CRC register
/// after its prefix (see [`PointChain`]), how many points, and the tag
/// handed to the sink with each point.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChainJob {
    pub reg: u32,
    pub count: u64,
    pub tag: u32,
}

impl ChainJob {
    /// A job for the node whose hash prefix is the concatenation of `parts`.
    pub(crate) fn new(parts: &[&[u8]], count: u64, tag: u32) -> Self {
        ChainJob {
            reg: PointChain::new(parts).base,
            count,
            tag,
        }
    }
}

/// Lanes advanced together by [`for_each_point`].
const LANES: usize = 8;

/// Calls `sink(tag, hash)` for every point of every job, in no particular
/// order across jobs (each job's own points come in chain order).
///
/// One chain is a serial dependency (each point hashes the previous one),
/// about 20 cycles a point; eight chains advance together so that their
/// table loads overlap, which is several times the throughput.
pub(crate) fn for_each_point(jobs: &[ChainJob], mut sink: impl FnMut(u32, u32)) {
    #[derive(Clone, Copy, Default)]
    struct Lane {
        reg: u32,
        prev: u32,
        left: u64,
        tag: u32,
    }
    let start = |j: &ChainJob| Lane {
        reg: j.reg,
        prev: 0,
        left: j.count,
        tag: j.tag,
    };
    let mut next = jobs.iter().filter(|j| j.count > 0);
    let mut lanes = [Lane::default(); LANES];
    let mut busy = 0;
    for lane in lanes.iter_mut() {
        if let Some(j) = next.next() {
            *lane = start(j);
            busy += 1;
        }
    }
    while busy > 0 {
        for lane in lanes.iter_mut() {
            if lane.left == 0 {
                continue;
            }
            let h = !step4(lane.reg, lane.prev);
            lane.prev = h;
            sink(lane.tag, h);
            lane.left -= 1;
            if lane.left == 0 {
                match next.next() {
                    Some(j) => *lane = start(j),
                    None => busy -= 1,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chain_matches_full_hasher() {
        let mut chain = PointChain::new(&[b"10.0.0.1", b"\0", b"443"]);
        let mut prev = 0u32;
        for _ in 0..1000 {
            let mut bytes = b"10.0.0.1\x00443".to_vec();
            bytes.extend_from_slice(&prev.to_le_bytes());
            let want = crc32fast::hash(&bytes);
            assert_eq!(chain.next(), Some(want));
            prev = want;
        }
    }
}
