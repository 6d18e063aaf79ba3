//! A request as the engine reads it, whichever protocol carried it: what
//! routing reads ([`RequestView`]) and what forwarding writes ([`Req`]).
//! An HTTP/1 request is positions in its connection's buffer
//! ([`H1Request`]); an HTTP/2 stream's is the `h2` crate's parts
//! ([`super::h2::H2Request`]).

use std::net::{IpAddr, SocketAddr};

use http::HeaderName;

use super::request_head::Head;
use crate::policy::route::RequestView;

/// What forwarding and the record read of a request, besides routing's
/// view.
pub trait Req: RequestView {
    /// The method, as sent.
    fn method(&self) -> &[u8];
    /// The target to write to a backend, as nginx forwards it (origin
    /// form); with `true`, a `/` goes before the returned bytes.
    fn forward_target(&self) -> (bool, &[u8]);
    /// What stands for `Host` on the way to a backend when the request
    /// says it elsewhere than in a `Host` field: an absolute-form target's
    /// authority, HTTP/2's `:authority`.
    fn authority(&self) -> Option<&[u8]>;
    /// The request's fields in order, as read (pseudo-headers aside).
    fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])>;
    /// Its `Content-Length`, when sent.
    fn content_length(&self) -> Option<u64>;
    /// Whether it asks for a WebSocket upgrade the router forwards:
    /// HTTP/1.1 with `Upgrade: websocket` (its first `Upgrade` field, as
    /// nginx's `$http_upgrade`).
    fn websocket(&self) -> bool;
    /// The protocol as nginx's `$server_protocol` writes it.
    fn protocol(&self) -> &'static str;
    /// The head as the `http` crate holds it, when it came that way (an
    /// HTTP/2 stream's): an HTTP/2 backend is then handed its fields and
    /// target without parsing them again.
    fn parts(&self) -> Option<&http::request::Parts> {
        None
    }

    /// The first value of field `name` (any case), if sent.
    fn field(&self, name: &[u8]) -> Option<&[u8]> {
        self.fields()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }

    /// Whether the method is `HEAD` (its response has no body).
    fn is_head(&self) -> bool {
        self.method() == b"HEAD"
    }

    /// Whether a request of this method may be sent twice (RFC 9110
    /// section 9.2.2).
    fn idempotent(&self) -> bool {
        matches!(
            self.method(),
            b"GET" | b"HEAD" | b"PUT" | b"DELETE" | b"OPTIONS" | b"TRACE"
        )
    }
}

/// A client connection's two ends, with their ports: the client's address
/// and the listener's (what Envoy's generated cookie hashes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ends {
    /// The client's address.
    pub client: SocketAddr,
    /// The address the client connected to.
    pub local: SocketAddr,
}

/// An HTTP/1 request: its head's positions over the connection's buffer.
pub struct H1Request<'a> {
    /// The head's positions.
    pub head: &'a Head,
    /// The connection's buffer.
    pub buf: &'a [u8],
    /// The connection's ends.
    pub peer: Option<Ends>,
    /// Whether the connection is TLS.
    pub tls: bool,
}

impl Req for H1Request<'_> {
    fn method(&self) -> &[u8] {
        self.head.method.of(self.buf)
    }

    fn forward_target(&self) -> (bool, &[u8]) {
        (self.head.empty_path, self.head.request_uri.of(self.buf))
    }

    fn authority(&self) -> Option<&[u8]> {
        self.head.authority.map(|a| a.of(self.buf))
    }

    fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.head
            .headers
            .iter()
            .map(|h| (h.name.of(self.buf), h.value.of(self.buf)))
    }

    fn content_length(&self) -> Option<u64> {
        self.head.content_length
    }

    fn websocket(&self) -> bool {
        self.head.http11
            && self
                .head
                .header(self.buf, b"upgrade")
                .is_some_and(|v| v.eq_ignore_ascii_case(b"websocket"))
    }

    fn protocol(&self) -> &'static str {
        if self.head.http11 {
            "HTTP/1.1"
        } else {
            "HTTP/1.0"
        }
    }

    fn field(&self, name: &[u8]) -> Option<&[u8]> {
        self.head.header(self.buf, name)
    }
}

impl ketama::request::Request for H1Request<'_> {
    fn request_uri(&self) -> &[u8] {
        self.head.request_uri.of(self.buf)
    }

    fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        Req::fields(self)
    }

    fn absolute_authority(&self) -> Option<&[u8]> {
        Req::authority(self)
    }

    fn remote_addr(&self) -> Option<IpAddr> {
        self.peer.map(|p| p.client.ip())
    }

    fn sockets(&self) -> Option<(SocketAddr, SocketAddr)> {
        self.peer.map(|p| (p.client, p.local))
    }

    fn tls(&self) -> bool {
        self.tls
    }

    fn absolute_target(&self) -> Option<&[u8]> {
        self.head.authority.map(|_| self.head.target.of(self.buf))
    }
}

impl RequestView for H1Request<'_> {
    fn header(&self, name: &HeaderName) -> Option<&[u8]> {
        if name == http::header::HOST {
            if let Some(a) = Req::authority(self) {
                return Some(a);
            }
        }
        self.head.header(self.buf, name.as_str().as_bytes())
    }
}

#[cfg(test)]
mod tests;
