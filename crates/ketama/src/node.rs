//! Nodes (servers) and how each hashing scheme turns one into point hashes.

use std::fmt;
use std::net::SocketAddr;

/// A server on the ring: the string a user writes in nginx's `server`
/// directive, a weight and an administrative `down` flag.
///
/// The string is hashed as written (`10.0.0.1:443`, `[2001:db8::1]:443`,
/// `cache-17.example:8080`, `unix:/run/cache.sock` or a bare name).
/// Weight 0 means drained: the node stays known but owns no points.
/// A `down` node keeps its points, but lookups skip it and take the next
/// distinct node in ring order, as nginx does for `down` servers.
///
/// Cost: 56 bytes, plus the server string, the name if any, and each
/// label (16 bytes of pointer and length each, plus its text).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Node {
    server: Box<str>,
    weight: u32,
    /// The `down` flag in the top bit, the HAProxy id (0: none) below it:
    /// one word instead of two keeps a node at 56 bytes.
    meta: u32,
    labels: Box<[Box<str>]>,
    name: Option<Box<str>>,
}

const DOWN: u32 = 1 << 31;

impl Node {
    /// A node for `server` with `weight` (points = weight x point multiple).
    pub fn new(server: impl Into<String>, weight: u32) -> Self {
        Node {
            server: server.into().into_boxed_str(),
            weight,
            meta: 0,
            labels: Box::new([]),
            name: None,
        }
    }

    /// Gives the node a twemproxy server name (`- 10.0.0.1:11211:1 NAME`):
    /// `Scheme::Twemproxy` hashes the name instead of the address, so that
    /// a server can move to another address and keep its keys. Other
    /// schemes refuse named nodes.
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into().into_boxed_str());
        self
    }

    /// The twemproxy server name, if given.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// Gives the node labels (compliance zones, cache features...): a
    /// lookup may require a set of labels, and only nodes carrying all of
    /// them serve it. A ring holds at most 64 distinct labels.
    pub fn with_labels<S: Into<String>>(mut self, labels: impl IntoIterator<Item = S>) -> Self {
        let mut l: Vec<Box<str>> = labels
            .into_iter()
            .map(|s| s.into().into_boxed_str())
            .collect();
        l.sort();
        l.dedup();
        self.labels = l.into_boxed_slice();
        self
    }

    /// The node's labels, sorted.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.labels.iter().map(|l| &**l)
    }

    /// Marks the node down (kept on the ring, skipped by lookups) or up.
    pub fn with_down(mut self, down: bool) -> Self {
        self.meta = (self.meta & !DOWN) | if down { DOWN } else { 0 };
        self
    }

    /// Gives the node a HAProxy server id (`server NAME ADDR id N`): the
    /// HAProxy scheme places its points by it, so that a server keeps its
    /// keys wherever it moves in the list. Ids run from 1 to
    /// [`crate::haproxy::MAX_ID`] (a ring refuses others); a node without
    /// one takes HAProxy's next free id. Other schemes refuse nodes with
    /// an id.
    pub fn with_id(mut self, id: u32) -> Self {
        self.meta = (self.meta & DOWN) | (id & !DOWN);
        if id & DOWN != 0 {
            // Out of range either way; keep it visibly out of range.
            self.meta |= !DOWN;
        }
        self
    }

    /// The HAProxy server id, if given (a HAProxy ring's nodes all carry
    /// one: those given, and those HAProxy's counter rule assigned).
    pub fn id(&self) -> Option<u32> {
        let id = self.meta & !DOWN;
        (id != 0).then_some(id)
    }

    /// The server string as written.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The weight.
    pub fn weight(&self) -> u32 {
        self.weight
    }

    /// Whether the node is marked down.
    pub fn is_down(&self) -> bool {
        self.meta & DOWN != 0
    }
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.server)
    }
}

/// Splits a server string into the host and port that nginx's
/// `ngx_http_upstream_init_chash` hashes:
///
/// - a `unix:` prefix (any case) is dropped and the rest is the host, with no
///   port;
/// - otherwise, if the string ends in `:` followed only by ASCII digits (none
///   at all counts), the host is what precedes that `:` and the port is the
///   digits;
/// - otherwise the whole string is the host and the port is empty.
///
/// IPv6 brackets are kept: `[::1]:80` hashes host `[::1]`, port `80`.
pub(crate) fn nginx_host_port(server: &str) -> (&[u8], &[u8]) {
    let b = server.as_bytes();
    if b.len() >= 5 && b[..5].eq_ignore_ascii_case(b"unix:") {
        return (&b[5..], b"");
    }
    for j in 0..b.len() {
        let c = b[b.len() - j - 1];
        if c == b':' {
            return (&b[..b.len() - j - 1], &b[b.len() - j..]);
        }
        if !c.is_ascii_digit() {
            break;
        }
    }
    (b, b"")
}

/// The bytes pingora-ketama hashes for a socket address: the IP as Rust's
/// `Display` writes it (IPv6 without brackets, compressed, no scope id), a
/// NUL byte, and the decimal port. Written into `out` (cleared first).
pub(crate) fn pingora_prefix(addr: &SocketAddr, out: &mut Vec<u8>) {
    use std::io::Write;
    out.clear();
    // Writing to a Vec cannot fail.
    let _ = write!(out, "{}\0{}", addr.ip(), addr.port());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nginx_split() {
        let cases: &[(&str, &str, &str)] = &[
            ("10.0.0.1:443", "10.0.0.1", "443"),
            ("[2001:db8::1]:443", "[2001:db8::1]", "443"),
            ("cache-17.example:8080", "cache-17.example", "8080"),
            ("unix:/run/cache.sock", "/run/cache.sock", ""),
            ("UNIX:/run/x", "/run/x", ""),
            ("bare", "bare", ""),
            ("host:", "host", ""),
            ("a:b:12", "a:b", "12"),
            ("a:12b", "a:12b", ""),
            ("", "", ""),
            ("unix:", "", ""),
            ("[::1]", "[::1]", ""),
        ];
        for &(s, h, p) in cases {
            let (gh, gp) = nginx_host_port(s);
            assert_eq!((gh, gp), (h.as_bytes(), p.as_bytes()), "{s}");
        }
    }

    #[test]
    fn pingora_bytes() {
        let mut out = Vec::new();
        pingora_prefix(&"[2001:0db8::0001]:443".parse().unwrap(), &mut out);
        assert_eq!(out, b"2001:db8::1\x00443");
        pingora_prefix(&"10.0.0.1:80".parse().unwrap(), &mut out);
        assert_eq!(out, b"10.0.0.1\x0080");
    }
}

#[cfg(test)]
mod size {
    /// The size the docs state (`Node`, `lib.rs`, `Ring`): keep them true.
    #[test]
    fn a_node_is_56_bytes() {
        assert_eq!(std::mem::size_of::<super::Node>(), 56);
    }
}
