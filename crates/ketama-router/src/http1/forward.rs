//! The heads the engine writes: a request head for the backend (from the
//! client's, rewritten as the router's proxy rewrote it through Pingora:
//! hop-by-hop fields and those the client's `Connection` names dropped, a
//! WebSocket upgrade's fields normalized, `X-Forwarded-*` added), and a
//! response head for the client (the backend's, with the router's `Date`,
//! `Connection` and `x-ketama-*` fields). Every piece is copied from the
//! buffers it was read into, or from bytes prepared once: no allocation
//! once the output buffer has grown.

use super::head::{is_tchar, Head};
use super::response::ResponseHead;

/// More `Connection` tokens than this refuse the request (Pingora's bound
/// on the work a header may ask for).
const MAX_NOMINATIONS: usize = 10;

/// Fields never forwarded to a backend: hop-by-hop ones (RFC 9110 section
/// 7.6.1, and the obsolete ones proxies still see), and `Expect`, which
/// the router answers itself as nginx does.
const HOP_BY_HOP: [&[u8]; 11] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"proxy-authenticate",
    b"proxy-authorization",
    b"te",
    b"trailer",
    b"transfer-encoding",
    b"upgrade",
    b"http2-settings",
    b"expect",
];

/// Why a request cannot be forwarded: its `Connection` field names what
/// must not be dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadConnection(pub &'static str);

/// The fields the client's `Connection` names (dropped on the way; case
/// ignored), checked as Pingora checks them: no more than
/// [`MAX_NOMINATIONS`] tokens, each a token, none naming `Host`, an
/// `X-Forwarded-*` field or a pseudo-header.
pub struct Nominated<'a> {
    tokens: [&'a [u8]; MAX_NOMINATIONS],
    len: usize,
}

impl<'a> Nominated<'a> {
    /// Reads the request's `Connection` lines.
    pub fn of(head: &Head, buf: &'a [u8]) -> Result<Nominated<'a>, BadConnection> {
        let mut n = Nominated {
            tokens: [&[]; MAX_NOMINATIONS],
            len: 0,
        };
        let lines = head
            .headers
            .iter()
            .filter(|h| h.name.of(buf).eq_ignore_ascii_case(b"connection"));
        for h in lines {
            for token in h
                .value
                .of(buf)
                .split(|&b| b == b',')
                .map(<[u8]>::trim_ascii)
            {
                if token.is_empty() {
                    continue;
                }
                if n.len + 1 >= MAX_NOMINATIONS {
                    return Err(BadConnection("too many Connection header nominations"));
                }
                if token.starts_with(b":") || !token.iter().all(|&b| is_tchar(b)) {
                    return Err(BadConnection(
                        "an invalid token nominated by the Connection header",
                    ));
                }
                let protected = [
                    &b"host"[..],
                    b"x-forwarded-for",
                    b"x-forwarded-host",
                    b"x-forwarded-proto",
                ];
                if protected.iter().any(|p| token.eq_ignore_ascii_case(p)) {
                    return Err(BadConnection(
                        "a protected header nominated by the Connection header",
                    ));
                }
                n.tokens[n.len] = token;
                n.len += 1;
            }
        }
        Ok(n)
    }

    fn names(&self, name: &[u8]) -> bool {
        self.tokens[..self.len]
            .iter()
            .any(|t| t.eq_ignore_ascii_case(name))
    }
}

/// What the request head for the backend is made of, besides the
/// client's head.
pub struct Upstream<'a> {
    /// The target to write (nginx's: origin-form, byte for byte).
    pub target: &'a [u8],
    /// `Host` replaces the client's: an absolute-form target's authority.
    pub host: Option<&'a [u8]>,
    /// The body is chunked (written chunked again).
    pub chunked: bool,
    /// A WebSocket upgrade to forward.
    pub websocket: bool,
    /// `X-Forwarded-For`'s last hop and `X-Forwarded-Proto`, when on.
    pub forwarded: Option<(Option<std::net::IpAddr>, bool)>,
    /// `[migration] previous_owner_header` (the client's lines of it are
    /// dropped) and, when the backend gets one, its value.
    pub hint: Option<(&'a [u8], Option<&'a [u8]>)>,
}

/// Whether the request asks for a WebSocket upgrade Pingora forwarded:
/// HTTP/1.1 with `Upgrade: websocket`.
pub fn is_websocket(head: &Head, buf: &[u8]) -> bool {
    head.http11
        && head
            .header(buf, b"upgrade")
            .is_some_and(|v| v.eq_ignore_ascii_case(b"websocket"))
}

/// Writes the request head for the backend into `out` (cleared first).
pub fn request_head(
    head: &Head,
    buf: &[u8],
    nominated: &Nominated<'_>,
    up: &Upstream<'_>,
    out: &mut Vec<u8>,
) {
    out.clear();
    out.extend_from_slice(head.method.of(buf));
    out.push(b' ');
    out.extend_from_slice(up.target);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut xff_seen = false;
    for h in &head.headers {
        let name = h.name.of(buf);
        let hop = HOP_BY_HOP.iter().any(|n| name.eq_ignore_ascii_case(n));
        if hop || nominated.names(name) {
            continue;
        }
        if let Some((ip, _)) = up.forwarded {
            if name.eq_ignore_ascii_case(b"x-forwarded-proto") {
                continue;
            }
            // Every line that came in, in order, then the client: written
            // once, after the other fields.
            if name.eq_ignore_ascii_case(b"x-forwarded-for") && ip.is_some() {
                xff_seen = true;
                continue;
            }
        }
        if up.host.is_some() && name.eq_ignore_ascii_case(b"host") {
            continue;
        }
        if up.hint.is_some_and(|(h, _)| name.eq_ignore_ascii_case(h)) {
            continue;
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value.of(buf));
        out.extend_from_slice(b"\r\n");
    }
    if let Some(host) = up.host {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(host);
        out.extend_from_slice(b"\r\n");
    }
    if up.chunked {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    }
    if up.websocket {
        out.extend_from_slice(b"Connection: Upgrade\r\nUpgrade: websocket\r\n");
    }
    if let Some((name, Some(value))) = up.hint {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    if let Some((ip, tls)) = up.forwarded {
        if let Some(ip) = ip {
            out.extend_from_slice(b"x-forwarded-for: ");
            if xff_seen {
                for h in &head.headers {
                    if h.name.of(buf).eq_ignore_ascii_case(b"x-forwarded-for") {
                        out.extend_from_slice(h.value.of(buf));
                        out.extend_from_slice(b", ");
                    }
                }
            }
            write_ip(ip, out);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(if tls {
            b"x-forwarded-proto: https\r\n"
        } else {
            b"x-forwarded-proto: http\r\n"
        });
    }
    out.extend_from_slice(b"\r\n");
}

/// An address in text, without allocating.
fn write_ip(ip: std::net::IpAddr, out: &mut Vec<u8>) {
    use std::io::Write as _;
    let _ = write!(out, "{ip}");
}

/// Fields of a backend's response the router writes itself, or drops.
const RESPONSE_SKIP: [&[u8]; 6] = [
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"date",
    b"trailer",
];

/// What the response head for the client is made of, besides the
/// backend's.
pub struct Downstream<'a> {
    /// `Connection: keep-alive` (else `close`).
    pub keep_alive: bool,
    /// The body goes to the client chunked.
    pub chunked: bool,
    /// `x-ketama-*` lines, ready to write (empty: none).
    pub extra: &'a [u8],
    /// The `Date` value.
    pub date: &'a [u8],
}

/// Writes the response head for the client into `out` (cleared first).
pub fn response_head(r: &ResponseHead, buf: &[u8], d: &Downstream<'_>, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(b"HTTP/1.1 ");
    let mut code = itoa::Buffer::new();
    out.extend_from_slice(code.format(r.status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(r.reason.of(buf));
    out.extend_from_slice(b"\r\n");
    // A 101's fields go as they came (Pingora wrote no Date or Connection
    // on an informational response); any other's lose those the router
    // writes itself.
    let switching = r.status == 101;
    for h in &r.headers {
        let name = h.name.of(buf);
        if !switching && RESPONSE_SKIP.iter().any(|n| name.eq_ignore_ascii_case(n)) {
            continue;
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(h.value.of(buf));
        out.extend_from_slice(b"\r\n");
    }
    if !switching {
        out.extend_from_slice(b"Date: ");
        out.extend_from_slice(d.date);
        out.extend_from_slice(if d.keep_alive {
            b"\r\nConnection: keep-alive\r\n"
        } else {
            b"\r\nConnection: close\r\n"
        });
        if d.chunked {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
        }
    }
    out.extend_from_slice(d.extra);
    out.extend_from_slice(b"\r\n");
}
