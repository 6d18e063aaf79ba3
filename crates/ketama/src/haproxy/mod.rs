//! HAProxy 2.6's consistent hashing (`hash-type consistent`), exactly as
//! `src/lb_chash.c`, `src/hash.c` and `src/backend.c` compute it:
//!
//! - a server gets `weight x 16` points (`BE_WEIGHT_SCALE`; weights 0 to
//!   256), point `j` at `full_hash(id x 4096 + j)` (`SRV_EWGHT_RANGE` is
//!   256 x 16), where `id` is the server's `puid` (given, or HAProxy's
//!   counter rule, which a build applies).
//!   [`full_hash`] is a bijection of 32-bit integers, so no two points of a
//!   ring share a hash (ids stay below [`MAX_ID`] so that `id x 4096 + j`
//!   does not wrap);
//! - a key goes to the **nearer** of the points before and after its hash
//!   (`chash_get_server_hash`): distances are taken on the 32-bit circle,
//!   and when both are equal the point before wins;
//! - a down server's points leave the tree, so its keys go to the nearest
//!   remaining point in either direction: the failover order of a key is
//!   its servers in order of their nearest point's distance;
//! - the key hash is one of [`HaproxyFunction`] (`gen_hash`), then, with
//!   `avalanche`, [`full_hash`] of it. A bare `hash-type consistent` means
//!   sdbm with avalanche: [`HaproxyHash::default`].
//!
//! Cost: a point is generated with six integer steps (no chain, no digest);
//! a key hash is one pass over the key.

use std::fmt;
use std::str::FromStr;

mod balance;
mod config;
mod key;

pub use balance::{
    domain_only, rdp_cookie, req_cook, req_hdr, sample_url_param, source_hash, url_param, Balance,
    Fetch,
};
pub use config::{parse_backend, Backend};
pub use key::{header_key, UriKey};

/// HAProxy's points per weight unit (`BE_WEIGHT_SCALE`).
pub const POINTS_PER_WEIGHT: u32 = 16;

/// HAProxy's largest server weight (`SRV_UWGHT_MAX`).
pub const MAX_WEIGHT: u32 = 256;

/// The ids a server may take: from 1 to 2^20 - 1. HAProxy computes
/// `id x 4096 + j` in 32 bits, so ids from 2^20 on wrap onto smaller ones'
/// points; ketama refuses them instead of colliding.
pub const MAX_ID: u32 = (1 << 20) - 1;

/// `SRV_EWGHT_RANGE`: the id's stride in the point numbering.
const ID_STRIDE: u32 = MAX_WEIGHT * POINTS_PER_WEIGHT;

/// HAProxy's `full_hash` (`intops.h`, `__full_hash`: Bob Jenkins' 32-bit
/// integer mix, then a multiplication by the prime 3221225473 "to spread
/// values around the tree"): the points' hash and the `avalanche`
/// modifier. A bijection (each step is invertible, the prime is odd).
#[inline]
pub fn full_hash(mut a: u32) -> u32 {
    a = a.wrapping_add(0x7ed5_5d16).wrapping_add(a << 12);
    a = (a ^ 0xc761_c23c) ^ (a >> 19);
    a = a.wrapping_add(0x1656_67b1).wrapping_add(a << 5);
    a = a.wrapping_add(0xd3a2_646c) ^ (a << 9);
    a = a.wrapping_add(0xfd70_46c5).wrapping_add(a << 3);
    a = (a ^ 0xb55a_4f09) ^ (a >> 16);
    a.wrapping_mul(3_221_225_473)
}

/// The hash of point `j` of the server with id `id`.
#[inline]
pub fn point_hash(id: u32, j: u32) -> u32 {
    full_hash(id.wrapping_mul(ID_STRIDE).wrapping_add(j))
}

/// A hash function of `hash-type consistent FUNCTION` (`src/hash.c`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum HaproxyFunction {
    /// `sdbm`, HAProxy's default.
    #[default]
    Sdbm,
    /// `djb2`.
    Djb2,
    /// `wt6`.
    Wt6,
    /// `crc32`: the IEEE CRC-32, the same function as nginx's.
    Crc32,
}

impl HaproxyFunction {
    /// Every function, in HAProxy's documentation order.
    pub const ALL: [HaproxyFunction; 4] = [
        HaproxyFunction::Sdbm,
        HaproxyFunction::Djb2,
        HaproxyFunction::Wt6,
        HaproxyFunction::Crc32,
    ];

    /// The name `hash-type consistent` takes.
    pub fn name(self) -> &'static str {
        match self {
            HaproxyFunction::Sdbm => "sdbm",
            HaproxyFunction::Djb2 => "djb2",
            HaproxyFunction::Wt6 => "wt6",
            HaproxyFunction::Crc32 => "crc32",
        }
    }

    /// The function of `key`. Cost: one pass over the key.
    pub fn hash(self, key: &[u8]) -> u32 {
        match self {
            HaproxyFunction::Sdbm => sdbm(key),
            HaproxyFunction::Djb2 => djb2(key),
            HaproxyFunction::Wt6 => wt6(key),
            HaproxyFunction::Crc32 => crc32fast::hash(key),
        }
    }
}

/// A HAProxy key hash: a function and whether `avalanche` follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HaproxyHash {
    /// The function.
    pub function: HaproxyFunction,
    /// Whether [`full_hash`] is applied to the function's result.
    pub avalanche: bool,
}

/// A bare `hash-type consistent`: sdbm with avalanche.
impl Default for HaproxyHash {
    fn default() -> Self {
        HaproxyHash {
            function: HaproxyFunction::Sdbm,
            avalanche: true,
        }
    }
}

impl HaproxyHash {
    /// Every function, without and with avalanche.
    pub const ALL: [HaproxyHash; 8] = {
        const fn h(i: usize, avalanche: bool) -> HaproxyHash {
            HaproxyHash {
                function: HaproxyFunction::ALL[i],
                avalanche,
            }
        }
        [
            h(0, false),
            h(0, true),
            h(1, false),
            h(1, true),
            h(2, false),
            h(2, true),
            h(3, false),
            h(3, true),
        ]
    };

    /// The key's hash. Cost: one pass over the key and six integer steps.
    #[inline]
    pub fn hash(self, key: &[u8]) -> u32 {
        let h = self.function.hash(key);
        if self.avalanche {
            full_hash(h)
        } else {
            h
        }
    }

    /// The name as `FUNCTION` or `FUNCTION+avalanche` (what follows
    /// `haproxy:` in a scheme name).
    pub fn name(self) -> &'static str {
        const NAMES: [&str; 8] = [
            "sdbm",
            "sdbm+avalanche",
            "djb2",
            "djb2+avalanche",
            "wt6",
            "wt6+avalanche",
            "crc32",
            "crc32+avalanche",
        ];
        NAMES[self.function as usize * 2 + self.avalanche as usize]
    }

    /// Whether the hash spreads keys over all 2^32 values, so that exact
    /// keyspace shares mean what they say: only with `avalanche` or
    /// `crc32`. sdbm, djb2 and wt6 of short, similar keys (URLs) cluster,
    /// and HAProxy's documentation asks for `avalanche` with them.
    pub fn is_uniform(self) -> bool {
        self.avalanche || self.function == HaproxyFunction::Crc32
    }
}

impl fmt::Display for HaproxyHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error for an unknown HAProxy hash name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown HAProxy hash {0:?}: expected sdbm, djb2, wt6 or crc32, each optionally followed by +avalanche (as in `hash-type consistent djb2 avalanche`)")]
pub struct UnknownHaproxyHash(pub String);

/// Reads `FUNCTION` or `FUNCTION+avalanche` (a space works as the `+`).
impl FromStr for HaproxyHash {
    type Err = UnknownHaproxyHash;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || UnknownHaproxyHash(s.to_string());
        let (name, avalanche) = match s.split_once(['+', ' ']) {
            Some((n, m)) if m.trim().eq_ignore_ascii_case("avalanche") => (n.trim(), true),
            Some(_) => return Err(err()),
            None => (s.trim(), false),
        };
        let function = HaproxyFunction::ALL
            .into_iter()
            .find(|f| f.name().eq_ignore_ascii_case(name))
            .ok_or_else(err)?;
        Ok(HaproxyHash {
            function,
            avalanche,
        })
    }
}

/// The ids HAProxy gives servers in configuration order
/// (`cfgparse.c`, "assign automatic UIDs"): a counter starts at 1 and moves
/// on by one per server, those with an explicit id included; a server
/// without one takes the first id at or above the counter that no server
/// uses. `None` names the first explicit id used twice (its two indices).
/// Cost: `O(N log N)`.
pub(crate) fn resolve_ids(explicit: &[Option<u32>]) -> Result<Vec<u32>, (usize, usize)> {
    let mut used: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    for (i, id) in explicit.iter().enumerate() {
        if let Some(id) = *id {
            if let Some(first) = used.insert(id, i) {
                return Err((first, i));
            }
        }
    }
    let mut next: u32 = 1;
    let mut out = Vec::with_capacity(explicit.len());
    for (i, id) in explicit.iter().enumerate() {
        let id = match *id {
            Some(id) => id,
            None => {
                while used.contains_key(&next) {
                    next += 1;
                }
                used.insert(next, i);
                next
            }
        };
        out.push(id);
        next += 1;
    }
    Ok(out)
}

/// A ring's points as a [`crate::sort::PointSource`]: server `rank` (its
/// configuration index) has `counts[rank]` points of id `ids[rank]`.
pub(crate) struct Points<'a> {
    pub(crate) ids: &'a [u32],
    pub(crate) counts: &'a [u64],
}

impl crate::sort::PointSource for Points<'_> {
    fn for_each_point(&self, mut sink: impl FnMut(u32, u32)) {
        for (rank, (&id, &count)) in self.ids.iter().zip(self.counts).enumerate() {
            for j in 0..count as u32 {
                sink(rank as u32, point_hash(id, j));
            }
        }
    }
}

fn sdbm(key: &[u8]) -> u32 {
    // c + (h << 6) + (h << 16) - h, i.e. h x 65599 + c.
    key.iter()
        .fold(0u32, |h, &c| h.wrapping_mul(65599).wrapping_add(c as u32))
}

fn djb2(key: &[u8]) -> u32 {
    key.iter()
        .fold(5381u32, |h, &c| h.wrapping_mul(33).wrapping_add(c as u32))
}

fn wt6(key: &[u8]) -> u32 {
    let (mut h0, mut h1): (u32, u32) = (0xa53c_965a, 0x5ca6_953a);
    let (mut step0, mut step1): (u32, u32) = (6, 18);
    for &c in key {
        let t = c as u32;
        h0 = !(h0 ^ t);
        h1 = !(h1.wrapping_add(t));
        let t = h1.rotate_left(step0);
        h1 = h0.rotate_left(step1);
        h0 = t;
        let t = ((h0 >> 16) ^ h1) & 0xffff;
        step0 = t & 0x1f;
        step1 = t >> 11;
    }
    h0 ^ h1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_match_haproxy_on_known_inputs() {
        // The definitions by hand, and CRC-32's check value; the golden
        // traces (testdata/haproxy) check every function against a live
        // HAProxy.
        assert_eq!(sdbm(b""), 0);
        assert_eq!(sdbm(b"a"), 97);
        assert_eq!(sdbm(b"ab"), 97u32.wrapping_mul(65599) + 98);
        assert_eq!(djb2(b""), 5381);
        assert_eq!(djb2(b"a"), 5381 * 33 + 97);
        assert_eq!(HaproxyFunction::Crc32.hash(b"123456789"), 0xcbf4_3926);
        assert_eq!(wt6(b""), 0xa53c_965a ^ 0x5ca6_953a);
    }

    #[test]
    fn full_hash_is_a_bijection_on_a_sample() {
        let mut seen = std::collections::HashSet::new();
        for i in 0..200_000u32 {
            assert!(seen.insert(full_hash(i.wrapping_mul(2_654_435_761))));
        }
    }

    #[test]
    fn ids_follow_the_counter_rule() {
        // s1 gets 1; s2 says 3; s3 takes the first free id at or above the
        // counter (3, moved on past s2): 4, and the counter goes on from
        // there; s4 says 2 (counter 6); s5 takes 6.
        assert_eq!(
            resolve_ids(&[None, Some(3), None, Some(2), None]).unwrap(),
            vec![1, 3, 4, 2, 6]
        );
        assert_eq!(resolve_ids(&[Some(1), None, None]).unwrap(), vec![1, 2, 3]);
        assert_eq!(resolve_ids(&[None, Some(1)]).unwrap(), vec![2, 1]);
        assert_eq!(resolve_ids(&[Some(5), Some(5)]), Err((0, 1)));
    }

    #[test]
    fn names_round_trip() {
        for h in HaproxyHash::ALL {
            assert_eq!(h.name().parse::<HaproxyHash>().unwrap(), h);
        }
        assert_eq!(
            "djb2 avalanche".parse::<HaproxyHash>().unwrap(),
            HaproxyHash {
                function: HaproxyFunction::Djb2,
                avalanche: true
            }
        );
        assert!("md5".parse::<HaproxyHash>().is_err());
        assert!("sdbm+fast".parse::<HaproxyHash>().is_err());
    }
}
