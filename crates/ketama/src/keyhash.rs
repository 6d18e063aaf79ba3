//! twemproxy's key hashes, each exactly as nutcracker 0.5 computes it
//! (`src/hashkit/nc_*.c`), quirks included:
//!
//! - C's `char` is signed on x86: where twemproxy widens a key byte with
//!   `(uint32_t)key[x]` or `(uint64_t)key[x]`, a byte >= 0x80 is
//!   sign-extended (0xE9 becomes 0xFFFF_FFE9) before it is mixed in
//!   (`fnv1_64`, `fnv1a_64`, `fnv1_32`, `fnv1a_32`, `one_at_a_time`, and
//!   `hsieh`'s third tail byte); the others read unsigned bytes.
//! - `fnv1a_64` is not 64-bit FNV-1a: it runs in 32 bits with the 64-bit
//!   offset basis and prime truncated (`0x8422_2325`, `0x1b3`).
//! - `fnv1_64` runs in 64 bits and returns the low 32.
//! - `crc32` is libmemcached's "crc": the top 15 bits of the CRC-32,
//!   `(~crc >> 16) & 0x7fff`, so its hashes fall in 0..=32767 and every
//!   key lands on the first few points of the ring (twemproxy's behaviour:
//!   avoid it). `crc32a` is the plain CRC-32.
//! - `crc16` keeps the register in 32 bits without masking, so the high
//!   half carries earlier steps' remainders.
//! - `md5` is the first little-endian word of the digest, as libmemcached's.
//!
//! Each costs one pass over the key; `md5` is about 5-10x the others.

use std::fmt;
use std::str::FromStr;

/// A key hash of twemproxy (nutcracker 0.5 `hash:`); see the module docs.
/// The variants carry twemproxy's names (`Fnv1_64` is `fnv1_64`).
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum KeyHash {
    /// `md5`: the digest's first little-endian 32-bit word.
    Md5,
    /// `fnv1a_64`, twemproxy's default (32-bit arithmetic, see the module docs).
    #[default]
    Fnv1a_64,
    /// `fnv1a_32`.
    Fnv1a_32,
    /// `fnv1_64` (low 32 bits of 64-bit FNV-1).
    Fnv1_64,
    /// `fnv1_32`.
    Fnv1_32,
    /// `crc16` (XMODEM table, unmasked 32-bit register).
    Crc16,
    /// `crc32`: 15 bits of CRC-32 (libmemcached's "crc").
    Crc32,
    /// `crc32a`: the full CRC-32.
    Crc32a,
    /// `one_at_a_time` (Bob Jenkins').
    OneAtATime,
    /// `hsieh` (Paul Hsieh's SuperFastHash).
    Hsieh,
    /// `murmur` (MurmurHash2 with seed `0xdeadbeef * len`).
    Murmur,
    /// `jenkins` (lookup3 `hashlittle`, initval 13).
    Jenkins,
}

#[allow(non_upper_case_globals)]
impl KeyHash {
    /// The old name of [`KeyHash::Fnv1_64`] (read as "FNV-164").
    #[deprecated(
        since = "0.1.0",
        note = "renamed `Fnv1_64`; this alias goes in the next release"
    )]
    pub const Fnv164: KeyHash = KeyHash::Fnv1_64;
    /// The old name of [`KeyHash::Fnv1_32`].
    #[deprecated(
        since = "0.1.0",
        note = "renamed `Fnv1_32`; this alias goes in the next release"
    )]
    pub const Fnv132: KeyHash = KeyHash::Fnv1_32;
    /// The old name of [`KeyHash::Fnv1a_64`].
    #[deprecated(
        since = "0.1.0",
        note = "renamed `Fnv1a_64`; this alias goes in the next release"
    )]
    pub const Fnv1a64: KeyHash = KeyHash::Fnv1a_64;
    /// The old name of [`KeyHash::Fnv1a_32`].
    #[deprecated(
        since = "0.1.0",
        note = "renamed `Fnv1a_32`; this alias goes in the next release"
    )]
    pub const Fnv1a32: KeyHash = KeyHash::Fnv1a_32;

    /// Every key hash, in twemproxy's documentation order.
    pub const ALL: [KeyHash; 12] = [
        KeyHash::OneAtATime,
        KeyHash::Md5,
        KeyHash::Crc16,
        KeyHash::Crc32,
        KeyHash::Crc32a,
        KeyHash::Fnv1_64,
        KeyHash::Fnv1a_64,
        KeyHash::Fnv1_32,
        KeyHash::Fnv1a_32,
        KeyHash::Hsieh,
        KeyHash::Murmur,
        KeyHash::Jenkins,
    ];

    /// The name twemproxy's `hash:` key uses.
    pub fn name(self) -> &'static str {
        match self {
            KeyHash::Md5 => "md5",
            KeyHash::Fnv1a_64 => "fnv1a_64",
            KeyHash::Fnv1a_32 => "fnv1a_32",
            KeyHash::Fnv1_64 => "fnv1_64",
            KeyHash::Fnv1_32 => "fnv1_32",
            KeyHash::Crc16 => "crc16",
            KeyHash::Crc32 => "crc32",
            KeyHash::Crc32a => "crc32a",
            KeyHash::OneAtATime => "one_at_a_time",
            KeyHash::Hsieh => "hsieh",
            KeyHash::Murmur => "murmur",
            KeyHash::Jenkins => "jenkins",
        }
    }

    /// Whether the hash spreads keys over all 2^32 values, so that a key's
    /// chance of landing in an arc is the arc's length over 2^32 (what exact
    /// keyspace shares and diffs assume). `crc32` gives 15 bits and `crc16`
    /// 16 bits plus what its unmasked register carries: shares of those are
    /// estimated from sampled keys instead.
    pub fn is_uniform(self) -> bool {
        !matches!(self, KeyHash::Crc32 | KeyHash::Crc16)
    }

    /// The key's hash. Cost: one pass over the key.
    pub fn hash(self, key: &[u8]) -> u32 {
        match self {
            KeyHash::Md5 => crate::md5::digest(key)[0],
            KeyHash::Fnv1a_64 => fnv1a_64(key),
            KeyHash::Fnv1a_32 => fnv1a_32(key),
            KeyHash::Fnv1_64 => fnv1_64(key),
            KeyHash::Fnv1_32 => fnv1_32(key),
            KeyHash::Crc16 => crc16(key),
            KeyHash::Crc32 => (crc32fast::hash(key) >> 16) & 0x7fff,
            KeyHash::Crc32a => crc32fast::hash(key),
            KeyHash::OneAtATime => one_at_a_time(key),
            KeyHash::Hsieh => hsieh(key),
            KeyHash::Murmur => murmur(key),
            KeyHash::Jenkins => jenkins(key),
        }
    }
}

impl fmt::Display for KeyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for an unknown key hash name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown key hash {0:?}: expected one of one_at_a_time, md5, crc16, crc32, crc32a, fnv1_64, fnv1a_64, fnv1_32, fnv1a_32, hsieh, murmur, jenkins (twemproxy's `hash:` names)")]
pub struct UnknownKeyHash(pub String);

impl FromStr for KeyHash {
    type Err = UnknownKeyHash;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        KeyHash::ALL
            .into_iter()
            .find(|h| h.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownKeyHash(s.to_string()))
    }
}

/// A key byte as C's signed `char` widened to 32 bits.
#[inline(always)]
fn signed(b: u8) -> u32 {
    b as i8 as u32
}

fn fnv1a_64(key: &[u8]) -> u32 {
    let mut h: u32 = 0xcbf2_9ce4_8422_2325u64 as u32;
    for &b in key {
        h ^= signed(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3u64 as u32);
    }
    h
}

fn fnv1_64(key: &[u8]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in key {
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        h ^= b as i8 as u64;
    }
    h as u32
}

fn fnv1_32(key: &[u8]) -> u32 {
    let mut h: u32 = 2_166_136_261;
    for &b in key {
        h = h.wrapping_mul(16_777_619);
        h ^= signed(b);
    }
    h
}

fn fnv1a_32(key: &[u8]) -> u32 {
    let mut h: u32 = 2_166_136_261;
    for &b in key {
        h ^= signed(b);
        h = h.wrapping_mul(16_777_619);
    }
    h
}

/// The CRC-16/XMODEM table twemproxy uses (polynomial 0x1021).
static CRC16: [u16; 256] = {
    let mut t = [0u16; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = (i as u16) << 8;
        let mut k = 0;
        while k < 8 {
            c = if c & 0x8000 != 0 {
                (c << 1) ^ 0x1021
            } else {
                c << 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

fn crc16(key: &[u8]) -> u32 {
    let mut crc: u32 = 0;
    for &b in key {
        crc = (crc << 8) ^ CRC16[(((crc >> 8) ^ signed(b)) & 0xff) as usize] as u32;
    }
    crc
}

fn one_at_a_time(key: &[u8]) -> u32 {
    let mut v: u32 = 0;
    for &b in key {
        v = v.wrapping_add(signed(b));
        v = v.wrapping_add(v << 10);
        v ^= v >> 6;
    }
    v = v.wrapping_add(v << 3);
    v ^= v >> 11;
    v.wrapping_add(v << 15)
}

fn hsieh(key: &[u8]) -> u32 {
    if key.is_empty() {
        return 0;
    }
    let get16 = |d: &[u8]| ((d[1] as u32) << 8).wrapping_add(d[0] as u32);
    let mut hash: u32 = 0;
    let mut chunks = key.chunks_exact(4);
    for c in &mut chunks {
        hash = hash.wrapping_add(get16(c));
        let tmp = (get16(&c[2..]) << 11) ^ hash;
        hash = (hash << 16) ^ tmp;
        hash = hash.wrapping_add(hash >> 11);
    }
    let rest = chunks.remainder();
    match rest.len() {
        3 => {
            hash = hash.wrapping_add(get16(rest));
            hash ^= hash << 16;
            hash ^= signed(rest[2]) << 18;
            hash = hash.wrapping_add(hash >> 11);
        }
        2 => {
            hash = hash.wrapping_add(get16(rest));
            hash ^= hash << 11;
            hash = hash.wrapping_add(hash >> 17);
        }
        1 => {
            hash = hash.wrapping_add(rest[0] as u32);
            hash ^= hash << 10;
            hash = hash.wrapping_add(hash >> 1);
        }
        _ => {}
    }
    hash ^= hash << 3;
    hash = hash.wrapping_add(hash >> 5);
    hash ^= hash << 4;
    hash = hash.wrapping_add(hash >> 17);
    hash ^= hash << 25;
    hash.wrapping_add(hash >> 6)
}

fn murmur(key: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let len = key.len() as u32;
    let mut h = 0xdead_beefu32.wrapping_mul(len) ^ len;
    let mut chunks = key.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let rest = chunks.remainder();
    if rest.len() >= 3 {
        h ^= (rest[2] as u32) << 16;
    }
    if rest.len() >= 2 {
        h ^= (rest[1] as u32) << 8;
    }
    if !rest.is_empty() {
        h ^= rest[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

fn jenkins(key: &[u8]) -> u32 {
    let init = 0xdead_beefu32
        .wrapping_add(key.len() as u32)
        .wrapping_add(13);
    let (mut a, mut b, mut c) = (init, init, init);
    let word = |k: &[u8]| {
        let mut w = [0u8; 4];
        w[..k.len()].copy_from_slice(k);
        u32::from_le_bytes(w)
    };
    let mut k = key;
    while k.len() > 12 {
        a = a.wrapping_add(word(&k[0..4]));
        b = b.wrapping_add(word(&k[4..8]));
        c = c.wrapping_add(word(&k[8..12]));
        // mix(a, b, c)
        a = a.wrapping_sub(c);
        a ^= c.rotate_left(4);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a);
        b ^= a.rotate_left(6);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b);
        c ^= b.rotate_left(8);
        b = b.wrapping_add(a);
        a = a.wrapping_sub(c);
        a ^= c.rotate_left(16);
        c = c.wrapping_add(b);
        b = b.wrapping_sub(a);
        b ^= a.rotate_left(19);
        a = a.wrapping_add(c);
        c = c.wrapping_sub(b);
        c ^= b.rotate_left(4);
        b = b.wrapping_add(a);
        k = &k[12..];
    }
    if k.is_empty() {
        return c;
    }
    a = a.wrapping_add(word(&k[..k.len().min(4)]));
    if k.len() > 4 {
        b = b.wrapping_add(word(&k[4..k.len().min(8)]));
    }
    if k.len() > 8 {
        c = c.wrapping_add(word(&k[8..]));
    }
    // final(a, b, c)
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(14));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(11));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(25));
    c ^= b;
    c = c.wrapping_sub(b.rotate_left(16));
    a ^= c;
    a = a.wrapping_sub(c.rotate_left(4));
    b ^= a;
    b = b.wrapping_sub(a.rotate_left(14));
    c ^= b;
    c.wrapping_sub(b.rotate_left(24))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for h in KeyHash::ALL {
            assert_eq!(h.name().parse::<KeyHash>().unwrap(), h);
        }
        assert!("fnv"
            .parse::<KeyHash>()
            .unwrap_err()
            .to_string()
            .contains("fnv1a_64"));
    }

    /// Published vectors for the hashes twemproxy did not change (its
    /// quirks are covered by the golden traces from a live nutcracker).
    #[test]
    fn published_vectors() {
        assert_eq!(KeyHash::Fnv1a_32.hash(b"a"), 0xe40c_292c);
        assert_eq!(KeyHash::Fnv1_32.hash(b"a"), 0x050c_5d7e);
        assert_eq!(KeyHash::Fnv1_64.hash(b"a"), 0xaf63bd4c8601b7beu64 as u32);
        assert_eq!(KeyHash::Crc32a.hash(b"123456789"), 0xcbf4_3926);
        // CRC-16/XMODEM check value; the unmasked register keeps 0x31c3's
        // predecessors above bit 16.
        assert_eq!(KeyHash::Crc16.hash(b"123456789") & 0xffff, 0x31c3);
        // lookup3 hashlittle("", 0) = 0xdeadbeef; with initval 13 the
        // empty key returns the initial c unmixed.
        assert_eq!(KeyHash::Jenkins.hash(b""), 0xdead_beef + 13);
        assert_eq!(
            KeyHash::Md5.hash(b""),
            u32::from_le_bytes([0xd4, 0x1d, 0x8c, 0xd9])
        );
        assert!(KeyHash::Crc32.hash(b"any key at all") <= 0x7fff);
    }

    #[test]
    fn high_bytes_sign_extend() {
        // Unsigned widening of 0xE9 would give a different FNV.
        let unsigned = (0x811c_9dc5u32 ^ 0xe9).wrapping_mul(16_777_619);
        let signed = (0x811c_9dc5u32 ^ 0xffff_ffe9).wrapping_mul(16_777_619);
        assert_eq!(KeyHash::Fnv1a_32.hash(&[0xe9]), signed);
        assert_ne!(signed, unsigned);
    }
}
