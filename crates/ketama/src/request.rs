//! What a routing key reads of an HTTP request, whichever face carried
//! it (the router's HTTP/1 or HTTP/2 engine, a trace line, an access-log
//! record): the key forms of [`crate::nginx`] evaluate over this trait,
//! so that the router and the command-line tools compute the same key
//! from the same request.
//!
//! Every method returns bytes as the client sent them; nothing here
//! decodes or validates. An implementation costs what its lookups cost;
//! the router's answer from positions in its buffer, without copying.

use std::net::{IpAddr, SocketAddr};

/// What a key form takes of a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken<'r> {
    /// These bytes, hashed by the ring's scheme.
    Bytes(&'r [u8]),
    /// The client's address, hashed as HAProxy's `balance source` hashes
    /// it ([`crate::haproxy::source_hash`], [`crate::route::PeerHash`]).
    Address(IpAddr),
    /// A 64-bit hash Envoy's hash policies made
    /// ([`crate::envoy::policy`], [`crate::route::PeerHash::Envoy`]).
    Envoy(u64),
    /// Nothing: the peer falls back to round robin (an empty nginx key, a
    /// HAProxy parameter, field or cookie not there).
    Nothing,
}

/// A request as key forms read it.
pub trait Request {
    /// nginx's `$request_uri`: an origin-form target as sent; an
    /// absolute-form target from its path on (`?q` when it has no path,
    /// empty for `http://host` alone); HTTP/2's `:path`.
    fn request_uri(&self) -> &[u8];

    /// The header fields in the order sent, as nginx holds them: for
    /// HTTP/2, `:authority` stands as a `host` field when no `host` was
    /// sent, and the `cookie` fields are one, joined by `; `.
    fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])>;

    /// The authority of an absolute-form target (`GET http://host/x`).
    fn absolute_authority(&self) -> Option<&[u8]> {
        None
    }

    /// The client's address (nginx's `$remote_addr`), when known.
    fn remote_addr(&self) -> Option<IpAddr> {
        None
    }

    /// The connection's two ends, the client's and the listener's, with
    /// their ports (Envoy's generated cookie hashes them).
    fn sockets(&self) -> Option<(SocketAddr, SocketAddr)> {
        None
    }

    /// Whether the request came over TLS (nginx's `$scheme` is then
    /// `https`).
    fn tls(&self) -> bool {
        false
    }

    /// The values of its `Cookie` fields, in order.
    fn cookie_lines(&self) -> impl Iterator<Item = &[u8]> {
        self.headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case(b"cookie"))
            .map(|(_, v)| v)
    }

    /// An absolute-form target as sent, scheme and authority included
    /// (HAProxy's `balance uri` hashes it whole).
    fn absolute_target(&self) -> Option<&[u8]> {
        None
    }
    /// HTTP/2's `:scheme` and `:authority` (HAProxy hashes an HTTP/2
    /// request's target as `scheme://authority/path`).
    fn scheme_authority(&self) -> Option<(&[u8], &[u8])> {
        None
    }
    /// The target's host when the request has no `Host` field (HTTP/2).
    fn uri_host(&self) -> Option<&[u8]> {
        None
    }
    /// The host the request names, before nginx validates it: an
    /// absolute-form target's authority, else its first `host` field.
    fn raw_host(&self) -> Option<&[u8]> {
        self.absolute_authority().or_else(|| {
            self.headers()
                .find(|(n, _)| n.eq_ignore_ascii_case(b"host"))
                .map(|(_, v)| v)
        })
    }
}
