//! Hashing schemes: which peer a ring is byte-identical to.

use std::fmt;
use std::str::FromStr;

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
}

impl Scheme {
    /// Every scheme, in the order tools list them (twemproxy with its
    /// default key hash, `fnv1a_64`; HAProxy with sdbm and avalanche).
    pub const ALL: [Scheme; 6] = [
        Scheme::Nginx,
        Scheme::PingoraV1,
        Scheme::PingoraV2,
        Scheme::Libmemcached,
        Scheme::Twemproxy(KeyHash::Fnv1a_64),
        Scheme::Haproxy(HaproxyHash {
            function: crate::haproxy::HaproxyFunction::Sdbm,
            avalanche: true,
        }),
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

    /// The point multiple the scheme requires, if it fixes one (the
    /// memcached schemes: 160 per server on average; HAProxy: 16 per
    /// weight unit).
    pub fn fixed_point_multiple(self) -> Option<u32> {
        match self {
            Scheme::Haproxy(_) => Some(crate::haproxy::POINTS_PER_WEIGHT),
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
        })
    }

    /// The hash this scheme gives a lookup key: CRC-32 of its bytes, as
    /// nginx's `ngx_crc32_long` and pingora-ketama compute it, or the
    /// memcached scheme's key hash. Cost: one pass over the key (SIMD on
    /// long keys for CRC-32).
    #[inline]
    pub fn hash_key(self, key: &[u8]) -> u32 {
        match self {
            Scheme::Nginx | Scheme::PingoraV1 | Scheme::PingoraV2 => crate::crc::hash(key),
            Scheme::Libmemcached => KeyHash::Md5.hash(key),
            Scheme::Twemproxy(h) => h.hash(key),
            Scheme::Haproxy(h) => h.hash(key),
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
        }
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
        }
    }

    /// Whether it spreads keys over all 2^32 values (what exact shares and
    /// diffs assume); see [`KeyHash::is_uniform`] and
    /// [`HaproxyHash::is_uniform`].
    pub fn is_uniform(self) -> bool {
        match self.0 {
            Inner::Key(k) => k.is_uniform(),
            Inner::Haproxy(h) => h.is_uniform(),
        }
    }

    /// The hash of `key`. Cost: one pass over the key.
    pub fn hash(self, key: &[u8]) -> u32 {
        match self.0 {
            Inner::Key(k) => k.hash(key),
            Inner::Haproxy(h) => h.hash(key),
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
            c => f.write_str(c.name()),
        }
    }
}

/// The error for an unknown scheme name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown compat {0:?}: expected one of nginx, pingora-v1, pingora-v2, libmemcached, twemproxy (or twemproxy:HASH, HASH one of twemproxy's key hashes, e.g. twemproxy:md5), haproxy (or haproxy:FUNCTION[+avalanche], FUNCTION one of sdbm, djb2, wt6, crc32, e.g. haproxy:djb2+avalanche)")]
pub struct UnknownScheme(pub String);

/// Reads `nginx`, `pingora-v1`, `pingora-v2`, `libmemcached`, `twemproxy`
/// (key hash `fnv1a_64`, twemproxy's default), `twemproxy:HASH`,
/// `haproxy` (sdbm with avalanche, a bare `hash-type consistent`) or
/// `haproxy:FUNCTION[+avalanche]`.
impl FromStr for Scheme {
    type Err = UnknownScheme;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
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
