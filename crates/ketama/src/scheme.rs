//! Hashing schemes: which peer a ring is byte-identical to.

use std::fmt;
use std::str::FromStr;

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
}

impl Scheme {
    /// Every scheme, in the order tools list them (twemproxy with its
    /// default key hash, `fnv1a_64`).
    pub const ALL: [Scheme; 5] = [
        Scheme::Nginx,
        Scheme::PingoraV1,
        Scheme::PingoraV2,
        Scheme::Libmemcached,
        Scheme::Twemproxy(KeyHash::Fnv1a_64),
    ];

    /// The most nodes a ring of this scheme may have (pingora keeps a u16
    /// node index and would misroute past it).
    pub fn max_nodes(self) -> usize {
        match self {
            Scheme::PingoraV1 | Scheme::PingoraV2 => 1 << 16,
            _ => usize::MAX,
        }
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
    /// memcached schemes: 160 per server on average).
    pub fn fixed_point_multiple(self) -> Option<u32> {
        self.is_memcached()
            .then_some(crate::continuum::POINTS_PER_SERVER)
    }

    /// Why label requirements cannot match this scheme's peer, or `None`
    /// where they can (nginx, pingora-v2).
    pub fn requirement_obstacle(self) -> Option<&'static str> {
        match self {
            Scheme::Nginx | Scheme::PingoraV2 => None,
            Scheme::PingoraV1 => Some("pingora-v1's ties depend on std's unstable sort, so no subset ring can match it"),
            Scheme::Libmemcached | Scheme::Twemproxy(_) => Some("a dedicated ring of a subset gives every server a different point count, so no walk of the shared ring can match it"),
        }
    }

    /// The scheme's key hash: [`KeyHash::Crc32a`] (plain CRC-32) for
    /// nginx and pingora, [`KeyHash::Md5`] for libmemcached, twemproxy's
    /// own. Two rings with the same key hash share one hash space, so the
    /// keys that move between them can be counted exactly.
    pub fn key_hash(self) -> KeyHash {
        match self {
            Scheme::Nginx | Scheme::PingoraV1 | Scheme::PingoraV2 => KeyHash::Crc32a,
            Scheme::Libmemcached => KeyHash::Md5,
            Scheme::Twemproxy(h) => h,
        }
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
        }
    }

    /// The scheme's family name: `nginx`, `pingora-v1`, `pingora-v2`,
    /// `libmemcached` or `twemproxy` (its [`Display`](fmt::Display) adds
    /// twemproxy's key hash).
    pub fn name(self) -> &'static str {
        match self {
            Scheme::Nginx => "nginx",
            Scheme::PingoraV1 => "pingora-v1",
            Scheme::PingoraV2 => "pingora-v2",
            Scheme::Libmemcached => "libmemcached",
            Scheme::Twemproxy(_) => "twemproxy",
        }
    }
}

/// Prints the name, and for twemproxy its key hash after a colon
/// (`twemproxy:md5`), the form [`FromStr`] reads back.
impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scheme::Twemproxy(h) => write!(f, "twemproxy:{h}"),
            c => f.write_str(c.name()),
        }
    }
}

/// The error for an unknown scheme name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown compat {0:?}: expected one of nginx, pingora-v1, pingora-v2, libmemcached, twemproxy (or twemproxy:HASH, HASH one of twemproxy's key hashes, e.g. twemproxy:md5)")]
pub struct UnknownScheme(pub String);

/// Reads `nginx`, `pingora-v1`, `pingora-v2`, `libmemcached`, `twemproxy`
/// (key hash `fnv1a_64`, twemproxy's default) or `twemproxy:HASH`.
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
        }
        Scheme::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownScheme(s.to_string()))
    }
}
