//! The heads the engine writes: a request head for the backend (from the
//! client's, as nginx's proxy writes it: the fields nginx never forwards
//! ([`NOT_FORWARDED`]) dropped or written anew, `Content-Length` as a plain
//! number, a WebSocket upgrade's fields normalized, `X-Forwarded-*`
//! added), and a response head for the client (the backend's, with the
//! router's `Date`, `Connection` and `x-ketama-*` fields). Every piece is
//! copied from the buffers it was read into, or from bytes prepared once:
//! no allocation once the output buffer has grown.

use super::fields::NOT_FORWARDED;
use super::head::Head;
use super::response::ResponseHead;

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

/// Whether the request asks for a WebSocket upgrade the router forwards:
/// HTTP/1.1 with `Upgrade: websocket` (its first `Upgrade` field, as
/// nginx's `$http_upgrade`).
pub fn is_websocket(head: &Head, buf: &[u8]) -> bool {
    head.http11
        && head
            .header(buf, b"upgrade")
            .is_some_and(|v| v.eq_ignore_ascii_case(b"websocket"))
}

/// Writes the request head for the backend into `out` (cleared first).
pub fn request_head(head: &Head, buf: &[u8], up: &Upstream<'_>, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(head.method.of(buf));
    out.push(b' ');
    out.extend_from_slice(up.target);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut xff_seen = false;
    for h in &head.headers {
        let name = h.name.of(buf);
        // The client's Host stays in place, unless the target's authority
        // replaces it.
        let dropped = if name.eq_ignore_ascii_case(b"host") {
            up.host.is_some()
        } else {
            NOT_FORWARDED.iter().any(|n| name.eq_ignore_ascii_case(n))
        };
        if dropped {
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
    } else if let Some(n) = head.content_length {
        out.extend_from_slice(b"Content-Length: ");
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if up.websocket {
        out.extend_from_slice(b"Connection: upgrade\r\nUpgrade: websocket\r\n");
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
