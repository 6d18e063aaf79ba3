//! Hashing schemes: which peer a ring is byte-identical to.

use std::fmt;
use std::str::FromStr;

use crate::envoy::{Maglev, RingHash, RingHashFunction};
use crate::haproxy::HaproxyHash;
use crate::KeyHash;

/// The hashing scheme, each identical to a peer implementation.
///
/// The CRC-32 schemes hash a key with CRC-32 and give a node
/// `weight x point_multiple` points from the chain
/// `crc32(HOST \0 PORT prev_hash_le)`. The memcached schemes hash a key
/// with their own key hash and give a server
/// `floor(weight / total x 40 x N) x 4` points (N servers), four per MD5
/// digest of `NAME-I` (see [`crate::continuum`]). All send a key to the
/// first point whose hash is at or after the key's, wrapping around; they
/// differ in what they hash and in which node wins when two points have the
/// same hash:
///
/// | scheme | key hash | point strings | equal hashes | build |
/// |---|---|---|---|---|
/// | `Nginx` | CRC-32 | the server string split as nginx splits it | first node in configuration order | radix sort |
/// | `PingoraV2` | CRC-32 | the socket address, IPv6 without brackets | smallest socket address | radix sort |
/// | `PingoraV1` | CRC-32 | as `PingoraV2` | wherever std's unstable sort leaves it | comparison sort |
/// | `Libmemcached` | MD5 | `host` (port 11211) or `host:port`, `-I` | first server in configuration order | MD5 x8 lanes, radix sort |
/// | `Twemproxy(h)` | `h` ([`KeyHash`]) | as libmemcached, or the server's `name=` | first server in name order | MD5 x8 lanes, radix sort |
/// | `Haproxy(h)` | `h` ([`HaproxyHash`]) | none: `full_hash(id x 4096 + j)`, 16 a weight unit | none (a bijection) | radix sort |
/// | `EnvoyRingHash(r)` | XXH64 (or MurmurHash2), 64 bits | `SERVER_I`, the ring's size from `r` and the weights | first node in configuration order | comparison sort |
/// | `Maglev(m)` | XXH64, 64 bits, modulo the table size | none: a table of `m.table_size` slots | none | none |
///
/// The last two come from Envoy and gRPC ([`crate::envoy`]): their hashes
/// are 64-bit, and every key-based lookup uses all 64 bits. A 32-bit hash
/// stands for them where one is asked for ([`Scheme::hash_key`]): the top
/// 32 bits under `EnvoyRingHash`, the slot's ring hash under `Maglev`.
///
/// `Haproxy` differs in its lookup: a key goes to the **nearer** of the
/// points before and after its hash (the point before on a tie), and a
/// down server's keys to the nearest remaining point in either direction
/// ([`crate::haproxy`]). [`Scheme::nearer`] says which rule a scheme uses.
///
/// `PingoraV1`'s tie winner depends on the Rust standard library's
/// `sort_unstable`, which may change between Rust releases: ketama sorts the
/// same 8-byte records the same way, so ketama and pingora-ketama built by
/// the same toolchain agree on every input, but ties are arbitrary and the
/// build is a comparison sort (several times slower than the radix sort).
/// Because ties are arbitrary, `PingoraV1` does not obey the laws the other
/// schemes do at collided points: adding a node can move a key between two
/// other nodes whose points collide. The memcached schemes do not obey the
/// add/remove laws at all: every server's point count depends on N and the
/// total weight, so adding a server also moves some keys between others.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// nginx's `hash $key consistent` (`ngx_http_upstream_hash_module`).
    #[default]
    Nginx,
    /// pingora-ketama 0.9.1, `Version::V1`.
    PingoraV1,
    /// pingora-ketama 0.9.1, `Version::V2 { point_multiple }`.
    PingoraV2,
    /// libmemcached 1.x, `MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED` (MD5 keys).
    Libmemcached,
    /// twemproxy (nutcracker) 0.5, `distribution: ketama`, with its `hash:`.
    Twemproxy(KeyHash),
    /// HAProxy 2.6's `hash-type consistent`, with its hash function and
    /// modifier ([`HaproxyHash::default`]: sdbm with avalanche, what a bare
    /// `hash-type consistent` means).
    Haproxy(HaproxyHash),
    /// Envoy's `ring_hash` and gRPC's ring hash (C core, Go, Java), with
    /// the ring's sizes and hash function ([`RingHash::GRPC`] for gRPC's
    /// defaults).
    EnvoyRingHash(RingHash),
    /// Envoy's `maglev`, with its table size.
    Maglev(Maglev),
}

impl Scheme {
    /// Every scheme, in the order tools list them (twemproxy with its
    /// default key hash, `fnv1a_64`; HAProxy with sdbm and avalanche).
    pub const ALL: [Scheme; 8] = [
        Scheme::Nginx,
        Scheme::PingoraV1,
        Scheme::PingoraV2,
        Scheme::Libmemcached,
        Scheme::Twemproxy(KeyHash::Fnv1a_64),
        Scheme::Haproxy(HaproxyHash {
            function: crate::haproxy::HaproxyFunction::Sdbm,
            avalanche: true,
        }),
        Scheme::EnvoyRingHash(RingHash {
            min_ring_size: 1024,
            max_ring_size: 8 * 1024 * 1024,
            function: RingHashFunction::XxHash,
        }),
        Scheme::Maglev(Maglev { table_size: 65537 }),
    ];

    /// The most nodes a ring of this scheme may have (pingora keeps a u16
    /// node index and would misroute past it; HAProxy's ids stop at
    /// [`crate::haproxy::MAX_ID`]).
    pub fn max_nodes(self) -> usize {
        match self {
            Scheme::PingoraV1 | Scheme::PingoraV2 => 1 << 16,
            Scheme::Haproxy(_) => crate::haproxy::MAX_ID as usize,
            _ => usize::MAX,
        }
    }

    /// Whether a key goes to the nearer of the points before and after its
    /// hash (HAProxy) instead of the first point at or after it (all the
    /// others).
    #[inline]
    pub fn nearer(self) -> bool {
        matches!(self, Scheme::Haproxy(_))
    }

    /// Whether servers must be socket addresses.
    pub fn needs_socket_addrs(self) -> bool {
        matches!(self, Scheme::PingoraV1 | Scheme::PingoraV2)
    }

    /// Whether this is a memcached scheme (MD5 continuum, points per server
    /// from the weight shares).
    pub fn is_memcached(self) -> bool {
        matches!(self, Scheme::Libmemcached | Scheme::Twemproxy(_))
    }

    /// Whether every label requirement gets a ring of its own eligible
    /// nodes (Envoy's and gRPC's schemes, whose subset load balancer builds
    /// each subset its own ring or table, sized and weighted anew, so that
    /// no walk of the shared one can match it) instead of a walk of the
    /// shared ring.
    pub fn dedicated_subsets(self) -> bool {
        self.is_envoy()
    }

    /// Whether the scheme comes from Envoy or gRPC (64-bit hashes, the
    /// ring's or table's size from its own settings, not a point multiple).
    pub fn is_envoy(self) -> bool {
        matches!(self, Scheme::EnvoyRingHash(_) | Scheme::Maglev(_))
    }

    /// The point multiple the scheme requires, if it fixes one (the
    /// memcached schemes: 160 per server on average; HAProxy: 16 per
    /// weight unit; Envoy's and gRPC's size their rings otherwise, and take
    /// only the default, 160, which they ignore).
    pub fn fixed_point_multiple(self) -> Option<u32> {
        match self {
            Scheme::Haproxy(_) => Some(crate::haproxy::POINTS_PER_WEIGHT),
            Scheme::EnvoyRingHash(_) | Scheme::Maglev(_) => Some(crate::DEFAULT_POINT_MULTIPLE),
            s => s
                .is_memcached()
                .then_some(crate::continuum::POINTS_PER_SERVER),
        }
    }

    /// Why label requirements cannot match this scheme's peer, or `None`
    /// where they can (nginx, pingora-v2).
    pub fn requirement_obstacle(self) -> Option<&'static str> {
        match self {
            Scheme::Nginx | Scheme::PingoraV2 | Scheme::Haproxy(_) => None,
            Scheme::PingoraV1 => Some("pingora-v1's ties depend on std's unstable sort, so no subset ring can match it"),
            Scheme::Libmemcached | Scheme::Twemproxy(_) => Some("a dedicated ring of a subset gives every server a different point count, so no walk of the shared ring can match it"),
            // Envoy's subset load balancer builds each subset its own ring
            // or table, sized and weighted anew: every requirement gets a
            // dedicated one ([`Scheme::dedicated_subsets`]), which matches.
            Scheme::EnvoyRingHash(_) | Scheme::Maglev(_) => None,
        }
    }

    /// The scheme's key hash: plain CRC-32 ([`KeyHash::Crc32a`]) for
    /// nginx and pingora, MD5 for libmemcached, twemproxy's own, HAProxy's
    /// own (its `crc32` without avalanche is CRC-32). Two rings with the
    /// same key hash share one hash space, so the keys that move between
    /// them can be counted exactly.
    pub fn key_hash(self) -> KeyFn {
        KeyFn(match self {
            Scheme::Nginx | Scheme::PingoraV1 | Scheme::PingoraV2 => Inner::Key(KeyHash::Crc32a),
            Scheme::Libmemcached => Inner::Key(KeyHash::Md5),
            Scheme::Twemproxy(h) => Inner::Key(h),
            Scheme::Haproxy(h) if h == CRC32_PLAIN => Inner::Key(KeyHash::Crc32a),
            Scheme::Haproxy(h) => Inner::Haproxy(h),
            Scheme::EnvoyRingHash(r) => Inner::Wide(r.function),
            Scheme::Maglev(m) => Inner::Maglev(m),
        })
    }

    /// The hash this scheme gives a lookup key: CRC-32 of its bytes, as
    /// nginx's `ngx_crc32_long` and pingora-ketama compute it, or the
    /// memcached scheme's key hash, or HAProxy's; under Envoy's and gRPC's
    /// schemes, whose hashes are 64-bit, the 32 bits that stand for it (see
    /// [`Scheme`]): key-based lookups use [`hash_key64`](Self::hash_key64).
    /// Cost: one pass over the key (SIMD on long keys for CRC-32).
    #[inline]
    pub fn hash_key(self, key: &[u8]) -> u32 {
        match self {
            Scheme::Nginx | Scheme::PingoraV1 | Scheme::PingoraV2 => crate::crc::hash(key),
            Scheme::Libmemcached => KeyHash::Md5.hash(key),
            Scheme::Twemproxy(h) => h.hash(key),
            Scheme::Haproxy(h) => h.hash(key),
            Scheme::EnvoyRingHash(_) | Scheme::Maglev(_) => self.probe(key).hash,
        }
    }

    /// The 64-bit hash Envoy and gRPC give a key (XXH64 with seed 0, or
    /// MurmurHash2 where the ring says so); `None` under the 32-bit
    /// schemes. Cost: one pass over the key.
    #[inline]
    pub fn hash_key64(self, key: &[u8]) -> Option<u64> {
        match self {
            Scheme::EnvoyRingHash(r) => Some(r.function.hash(key)),
            Scheme::Maglev(_) => Some(crate::envoy::xxh64(key, 0)),
            _ => None,
        }
    }

    /// A key's hashes: the 32-bit one and, under the 64-bit schemes, the
    /// full one.
    #[inline]
    pub(crate) fn probe(self, key: &[u8]) -> Probe {
        match self.hash_key64(key) {
            Some(wide) => self.probe64(wide),
            None => Probe {
                hash: self.hash_key(key),
                wide: 0,
            },
        }
    }

    /// The probe of a 64-bit hash under Envoy's schemes: its top 32 bits,
    /// or its Maglev slot's ring hash (under the others, its low 32 bits,
    /// which no caller asks for).
    #[inline]
    pub(crate) fn probe64(self, wide: u64) -> Probe {
        let hash = match self {
            Scheme::EnvoyRingHash(_) => (wide >> 32) as u32,
            Scheme::Maglev(m) => m.slot_hash(m.slot(wide, 0)),
            _ => wide as u32,
        };
        Probe { hash, wide }
    }

    /// What is wrong with the scheme's own settings, if anything (a ring
    /// size or table size its peer refuses).
    pub fn settings_problem(self) -> Option<String> {
        match self {
            Scheme::EnvoyRingHash(r) => r.problem(),
            Scheme::Maglev(m) => m.problem(),
            _ => None,
        }
    }

    /// The scheme's family name: `nginx`, `pingora-v1`, `pingora-v2`,
    /// `libmemcached`, `twemproxy` or `haproxy` (its
    /// [`Display`](fmt::Display) adds twemproxy's key hash, and HAProxy's
    /// unless it is the default).
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Nginx => "nginx",
            Scheme::PingoraV1 => "pingora-v1",
            Scheme::PingoraV2 => "pingora-v2",
            Scheme::Libmemcached => "libmemcached",
            Scheme::Twemproxy(_) => "twemproxy",
            Scheme::Haproxy(_) => "haproxy",
            Scheme::EnvoyRingHash(_) => "envoy-ring-hash",
            Scheme::Maglev(_) => "maglev",
        }
    }
}

/// A key's hashes under a scheme ([`Scheme::probe`]): `hash` is the 32-bit
/// one every layout searches; `wide` the 64-bit one of Envoy's and gRPC's
/// schemes (0 under the others).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Probe {
    pub(crate) hash: u32,
    pub(crate) wide: u64,
}

impl Probe {
    /// A probe of a bare 32-bit hash under `scheme`: under `EnvoyRingHash`
    /// the 64-bit hash `hash << 32`; under `Maglev` the slot it falls in
    /// (which is its own slot again, so that retries start there).
    pub(crate) fn of_hash(scheme: Scheme, hash: u32) -> Probe {
        let wide = match scheme {
            Scheme::Maglev(m) => m.slot_of_hash(hash),
            _ => u64::from(hash) << 32,
        };
        Probe { hash, wide }
    }
}

/// HAProxy's `crc32` without avalanche: the same function as nginx's.
const CRC32_PLAIN: HaproxyHash = HaproxyHash {
    function: crate::haproxy::HaproxyFunction::Crc32,
    avalanche: false,
};

/// The function a scheme hashes keys with ([`Scheme::key_hash`]): compare
/// two to know whether two rings share a hash space, print one to name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KeyFn(Inner);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Inner {
    Key(KeyHash),
    Haproxy(HaproxyHash),
    /// The top 32 bits of a 64-bit ring hash.
    Wide(RingHashFunction),
    /// XXH64 modulo a Maglev table, as the slot's ring hash.
    Maglev(Maglev),
}

impl KeyFn {
    /// The name: twemproxy's for the CRC-32 and memcached hashes (`crc32a`,
    /// `md5`, ...), `haproxy:FUNCTION[+avalanche]` for HAProxy's.
    pub fn name(self) -> &'static str {
        const NAMES: [&str; 8] = [
            "haproxy:sdbm",
            "haproxy:sdbm+avalanche",
            "haproxy:djb2",
            "haproxy:djb2+avalanche",
            "haproxy:wt6",
            "haproxy:wt6+avalanche",
            "haproxy:crc32",
            "haproxy:crc32+avalanche",
        ];
        match self.0 {
            Inner::Key(k) => k.name(),
            Inner::Haproxy(h) => NAMES[h.function as usize * 2 + h.avalanche as usize],
            Inner::Wide(RingHashFunction::XxHash) => "xxh64",
            Inner::Wide(RingHashFunction::Murmur2) => "murmur2_64",
            Inner::Maglev(_) => "xxh64:maglev-slot",
        }
    }

    /// Whether it spreads keys over all 2^32 values (what exact shares and
    /// diffs assume); see [`KeyHash::is_uniform`] and
    /// [`HaproxyHash::is_uniform`].
    pub fn is_uniform(self) -> bool {
        match self.0 {
            Inner::Key(k) => k.is_uniform(),
            Inner::Haproxy(h) => h.is_uniform(),
            Inner::Wide(_) | Inner::Maglev(_) => true,
        }
    }

    /// The hash of `key`. Cost: one pass over the key.
    pub fn hash(self, key: &[u8]) -> u32 {
        match self.0 {
            Inner::Key(k) => k.hash(key),
            Inner::Haproxy(h) => h.hash(key),
            Inner::Wide(f) => (f.hash(key) >> 32) as u32,
            Inner::Maglev(m) => Scheme::Maglev(m).hash_key(key),
        }
    }
}

impl fmt::Display for KeyFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Prints the name, and for twemproxy its key hash after a colon
/// (`twemproxy:md5`), the form [`FromStr`] reads back.
impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scheme::Twemproxy(h) => write!(f, "twemproxy:{h}"),
            Scheme::Haproxy(h) if *h != HaproxyHash::default() => write!(f, "haproxy:{h}"),
            Scheme::EnvoyRingHash(r) if *r != RingHash::default() => {
                write!(f, "envoy-ring-hash:{r}")
            }
            Scheme::Maglev(m) if *m != Maglev::default() => write!(f, "maglev:{}", m.table_size),
            c => f.write_str(c.name()),
        }
    }
}

/// The error for an unknown scheme name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown compat {0:?}: expected one of nginx, pingora-v1, pingora-v2, libmemcached, twemproxy (or twemproxy:HASH, HASH one of twemproxy's key hashes, e.g. twemproxy:md5), haproxy (or haproxy:FUNCTION[+avalanche], FUNCTION one of sdbm, djb2, wt6, crc32, e.g. haproxy:djb2+avalanche), envoy-ring-hash (or envoy-ring-hash:OPTIONS, comma-separated min=N, max=N, cap=N, grpc, xxhash, murmur2, with min <= max <= 8388608, e.g. envoy-ring-hash:grpc), maglev (or maglev:PRIME, a prime table size up to 5000011, e.g. maglev:65537)")]
pub struct UnknownScheme(pub String);

/// Reads `nginx`, `pingora-v1`, `pingora-v2`, `libmemcached`, `twemproxy`
/// (key hash `fnv1a_64`, twemproxy's default), `twemproxy:HASH`,
/// `haproxy` (sdbm with avalanche, a bare `hash-type consistent`),
/// `haproxy:FUNCTION[+avalanche]`, `envoy-ring-hash[:OPTIONS]` (Envoy's
/// defaults; options as [`crate::envoy::parse_options`] reads them, e.g.
/// `envoy-ring-hash:grpc`) or `maglev[:PRIME]` (65,537 slots by default).
/// `_` may stand for `-` (`envoy_ring_hash`, as Envoy spells it).
impl FromStr for Scheme {
    type Err = UnknownScheme;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || UnknownScheme(s.to_string());
        let (family, opts) = match s.split_once(':') {
            Some((f, o)) => (f, Some(o)),
            None => (s, None),
        };
        let family_is = |name: &str| family.replace('_', "-").eq_ignore_ascii_case(name);
        if family_is("envoy-ring-hash") {
            let r = match opts {
                Some(o) => crate::envoy::parse_options(o).ok_or_else(bad)?,
                None => RingHash::default(),
            };
            return match r.problem() {
                None => Ok(Scheme::EnvoyRingHash(r)),
                Some(_) => Err(bad()),
            };
        }
        if family_is("maglev") {
            let m = match opts {
                Some(o) => Maglev {
                    table_size: o.trim().parse().map_err(|_| bad())?,
                },
                None => Maglev::default(),
            };
            return match m.problem() {
                None => Ok(Scheme::Maglev(m)),
                Some(_) => Err(bad()),
            };
        }
        if let Some((family, hash)) = s.split_once(':') {
            if family.eq_ignore_ascii_case("twemproxy") {
                return hash
                    .parse()
                    .map(Scheme::Twemproxy)
                    .map_err(|_| UnknownScheme(s.to_string()));
            }
            if family.eq_ignore_ascii_case("haproxy") {
                return hash
                    .parse()
                    .map(Scheme::Haproxy)
                    .map_err(|_| UnknownScheme(s.to_string()));
            }
        }
        Scheme::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownScheme(s.to_string()))
    }
}
