//! Helpers shared by the integration tests: random configurations, an
//! independent reference ring, forged keys and colliding server names.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::OnceLock;

use ketama::{testing, Node};
use rand::{Rng, SeedableRng};

pub fn rng(seed: u64) -> rand::rngs::StdRng {
    rand::rngs::StdRng::seed_from_u64(seed)
}

pub fn random_socket_addr(rng: &mut impl Rng) -> SocketAddr {
    if rng.random::<bool>() {
        SocketAddr::V4(SocketAddrV4::new(
            Ipv4Addr::from_bits(rng.random()),
            rng.random(),
        ))
    } else {
        SocketAddr::V6(SocketAddrV6::new(
            Ipv6Addr::from_bits(rng.random()),
            rng.random(),
            0,
            0,
        ))
    }
}

/// `n` distinct random socket addresses with weights from 1 to 10.
pub fn random_addr_nodes(rng: &mut impl Rng, n: usize) -> Vec<(SocketAddr, u32)> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let a = random_socket_addr(rng);
        if seen.insert(a) {
            out.push((a, rng.random_range(1..=10)));
        }
    }
    out
}

pub fn random_key(rng: &mut impl Rng) -> Vec<u8> {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-?=&";
    let len = rng.random_range(0..40);
    (0..len)
        .map(|_| CHARS[rng.random_range(0..CHARS.len())])
        .collect()
}

/// A key whose CRC-32 is exactly `hash`.
pub fn forge_key(tag: &str, hash: u32) -> Vec<u8> {
    let mut key = format!("/forged/{tag}/").into_bytes();
    let suffix = testing::forge_suffix(&key, hash);
    key.extend_from_slice(&suffix);
    key
}

/// The bytes a scheme hashes in front of each point.
pub enum Prefix {
    Nginx,
    Pingora,
}

/// nginx's split of a server string into host and port (its
/// `ngx_parse_url`, written again here from nginx's rule rather than taken
/// from the library under test): `unix:` paths have no port; otherwise
/// the port is the digits after the last `:`, when there are only digits.
fn nginx_host_port(server: &str) -> (&[u8], &[u8]) {
    let b = server.as_bytes();
    if b.len() >= 5 && b[..5].eq_ignore_ascii_case(b"unix:") {
        return (&b[5..], b"");
    }
    match server.rfind(':') {
        Some(i) if server[i + 1..].bytes().all(|c| c.is_ascii_digit()) => (&b[..i], &b[i + 1..]),
        _ => (b, b""),
    }
}

pub fn prefix_of(server: &str, p: &Prefix) -> Vec<u8> {
    match p {
        Prefix::Nginx => {
            let (h, port) = nginx_host_port(server);
            [h, b"\0", port].concat()
        }
        Prefix::Pingora => {
            let a: SocketAddr = server.parse().unwrap();
            format!("{}\0{}", a.ip(), a.port()).into_bytes()
        }
    }
}

/// Point hashes of one node, computed the slow, obvious way: a fresh CRC of
/// the prefix and the previous hash for every point.
pub fn naive_points(prefix: &[u8], n: u64) -> Vec<u32> {
    let mut out = Vec::with_capacity(n as usize);
    let mut prev = 0u32;
    for _ in 0..n {
        let mut h = crc32fast::Hasher::new();
        h.update(prefix);
        h.update(&prev.to_le_bytes());
        prev = h.finalize();
        out.push(prev);
    }
    out
}

/// An independent reference ring: a BTreeMap from point hash to the index
/// of the winning node, where `rank(i)` orders the nodes for ties (lowest
/// rank wins). Down nodes are skipped by walking to the next distinct node.
pub struct Reference {
    pub map: BTreeMap<u32, usize>,
    pub down: Vec<bool>,
}

impl Reference {
    pub fn new(nodes: &[Node], multiple: u32, p: Prefix, rank: impl Fn(usize) -> u64) -> Self {
        let mut map: BTreeMap<u32, usize> = BTreeMap::new();
        for (i, n) in nodes.iter().enumerate() {
            let pts = naive_points(
                &prefix_of(n.server(), &p),
                n.weight() as u64 * multiple as u64,
            );
            for h in pts {
                map.entry(h)
                    .and_modify(|w| {
                        if rank(i) < rank(*w) {
                            *w = i
                        }
                    })
                    .or_insert(i);
            }
        }
        Reference {
            map,
            down: nodes.iter().map(|n| n.is_down()).collect(),
        }
    }

    pub fn node_for_hash(&self, hash: u32) -> Option<usize> {
        self.map
            .range(hash..)
            .chain(self.map.range(..hash))
            .map(|(_, &n)| n)
            .find(|&n| !self.down[n])
    }

    /// Hashes at which some node's points collided.
    pub fn collided(nodes: &[Node], multiple: u32, p: Prefix) -> Vec<u32> {
        let mut count: BTreeMap<u32, usize> = BTreeMap::new();
        for n in nodes {
            let pts = naive_points(
                &prefix_of(n.server(), &p),
                n.weight() as u64 * multiple as u64,
            );
            for h in pts {
                *count.entry(h).or_default() += 1;
            }
        }
        count
            .into_iter()
            .filter(|&(_, c)| c > 1)
            .map(|(h, _)| h)
            .collect()
    }
}

/// Pairs of IPv4 socket addresses whose point chains collide within their
/// first 16 points (so at any point multiple >= 16 and weight >= 1 the two
/// nodes share a point hash), the same under the nginx and pingora schemes.
/// Found by a birthday search (about 6,000 candidates a pair) once per test
/// binary; no name is in two pairs.
pub fn colliding_pairs() -> &'static [(String, String)] {
    static PAIRS: OnceLock<Vec<(String, String)>> = OnceLock::new();
    PAIRS.get_or_init(|| {
        let mut owner: std::collections::HashMap<u32, String> = Default::default();
        let mut used: std::collections::HashSet<String> = Default::default();
        let mut pairs = Vec::new();
        for x in 0u32.. {
            let name = format!(
                "10.{}.{}.{}:{}",
                64 + (x >> 16),
                (x >> 8) & 255,
                x & 255,
                1000 + x % 50_000
            );
            let chain = testing::PointChain::new(&[&prefix_of(&name, &Prefix::Pingora)]);
            for h in chain.take(16) {
                match owner.get(&h) {
                    Some(other)
                        if *other != name && !used.contains(other) && !used.contains(&name) =>
                    {
                        used.insert(other.clone());
                        used.insert(name.clone());
                        pairs.push((other.clone(), name.clone()));
                    }
                    Some(_) => {}
                    None => {
                        owner.insert(h, name.clone());
                    }
                }
            }
            if pairs.len() == 3 {
                break;
            }
        }
        pairs
    })
}

/// A ring of these settings, shared.
pub fn arc_ring(
    nodes: Vec<ketama::Node>,
    compat: ketama::Scheme,
    layout: ketama::Layout,
    multiple: u32,
) -> std::sync::Arc<ketama::Ring> {
    std::sync::Arc::new(
        ketama::RingBuilder::new()
            .compat(compat)
            .layout(layout)
            .point_multiple(multiple)
            .build(nodes)
            .unwrap(),
    )
}
