//! The HTTP/1 heads the engine writes, whichever protocol the other side
//! spoke: a request head for a backend (from any [`Req`], as nginx's
//! proxy writes it: the fields nginx never forwards ([`NOT_FORWARDED`])
//! dropped or written anew, `Content-Length` as a plain number, a
//! WebSocket upgrade's fields normalized, `X-Forwarded-*` added), a
//! response head for a client (from any [`ResponseView`], with the
//! router's `Date`, `Connection` and `x-ketama-*` fields), and the
//! router's own answers. Every piece is copied from the buffers it was
//! read into, or from bytes prepared once: no allocation once the output
//! buffer has grown.

use super::fields::{response_field_passes, NOT_FORWARDED};
use super::request::Req;
use super::response_head::ResponseView;

/// What the request head for a backend is made of, besides the
/// client's request.
pub struct Upstream<'a> {
    /// The body goes chunked (a chunked HTTP/1 body, or an HTTP/2 body of
    /// no announced length).
    pub chunked: bool,
    /// `X-Forwarded-For`'s last hop and `X-Forwarded-Proto`, when on.
    pub forwarded: Option<(Option<std::net::IpAddr>, bool)>,
    /// `[migration] previous_owner_header` (the client's fields of it are
    /// dropped) and, when the backend gets one, its value.
    pub hint: Option<(&'a [u8], Option<&'a [u8]>)>,
}

/// Whether a request field goes to a backend as the client sent it: not
/// one nginx never forwards (see [`NOT_FORWARDED`]; `Host` stays unless
/// `host_replaced`), not `X-Forwarded-*` when the router writes them, not
/// the previous-owner hint's name.
pub fn forwarded_as_sent(name: &[u8], host_replaced: bool, up: &Upstream<'_>) -> bool {
    if name.eq_ignore_ascii_case(b"host") {
        return !host_replaced;
    }
    if NOT_FORWARDED.iter().any(|n| name.eq_ignore_ascii_case(n)) {
        return false;
    }
    if let Some((ip, _)) = up.forwarded {
        if name.eq_ignore_ascii_case(b"x-forwarded-proto")
            || (ip.is_some() && name.eq_ignore_ascii_case(b"x-forwarded-for"))
        {
            return false;
        }
    }
    !up.hint.is_some_and(|(h, _)| name.eq_ignore_ascii_case(h))
}

/// Writes `X-Forwarded-For` (the client's values, in order, then its
/// address) into `out` as `name: value\r\n`.
pub fn forwarded_for(req: &impl Req, ip: std::net::IpAddr, out: &mut Vec<u8>) {
    out.extend_from_slice(b"x-forwarded-for: ");
    write_forwarded_for(req, ip, out);
    out.extend_from_slice(b"\r\n");
}

/// The value of `X-Forwarded-For` into `out`.
pub fn write_forwarded_for(req: &impl Req, ip: std::net::IpAddr, out: &mut Vec<u8>) {
    for (n, v) in req.fields() {
        if n.eq_ignore_ascii_case(b"x-forwarded-for") {
            out.extend_from_slice(v);
            out.extend_from_slice(b", ");
        }
    }
    write_ip(ip, out);
}

/// Writes the HTTP/1 request head for a backend into `out` (cleared
/// first).
pub fn request_head(req: &impl Req, up: &Upstream<'_>, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(req.method());
    out.push(b' ');
    let (slash, target) = req.forward_target();
    if slash {
        out.push(b'/');
    }
    out.extend_from_slice(target);
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let authority = req.authority();
    for (name, value) in req.fields() {
        if forwarded_as_sent(name, authority.is_some(), up) {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
    }
    if let Some(host) = authority {
        out.extend_from_slice(b"Host: ");
        out.extend_from_slice(host);
        out.extend_from_slice(b"\r\n");
    }
    if up.chunked {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
    } else if let Some(n) = req.content_length() {
        out.extend_from_slice(b"Content-Length: ");
        out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if req.websocket() {
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
            forwarded_for(req, ip, out);
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
    match ip {
        // Every request writes one: by hand, a tenth of `Display`'s
        // instructions (measured with callgrind: about 700 a request).
        std::net::IpAddr::V4(v4) => {
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                if octet >= 100 {
                    out.push(b'0' + octet / 100);
                }
                if octet >= 10 {
                    out.push(b'0' + octet / 10 % 10);
                }
                out.push(b'0' + octet % 10);
            }
        }
        std::net::IpAddr::V6(_) => {
            use std::io::Write as _;
            let _ = write!(out, "{ip}");
        }
    }
}

/// What the response head for an HTTP/1 client is made of, besides the
/// backend's.
pub struct Downstream<'a> {
    /// `Connection: keep-alive` (else `close`).
    pub keep_alive: bool,
    /// The body goes to the client chunked.
    pub chunked: bool,
    /// The `Date` value.
    pub date: &'a [u8],
}

/// Writes the response head for an HTTP/1 client into `out` (cleared
/// first), `ketama` (the `x-ketama-*` fields) after the backend's.
pub fn response_head<'k>(
    r: &impl ResponseView,
    d: &Downstream<'_>,
    ketama: impl Iterator<Item = (&'k [u8], &'k [u8])>,
    out: &mut Vec<u8>,
) {
    out.clear();
    let status = r.status();
    out.extend_from_slice(b"HTTP/1.1 ");
    let mut code = itoa::Buffer::new();
    out.extend_from_slice(code.format(status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(r.reason());
    out.extend_from_slice(b"\r\n");
    // A 101's fields go as they came (no Date or Connection on an
    // informational response); any other's lose those the router writes
    // itself.
    let switching = status == 101;
    for (name, value) in r.fields() {
        if !switching && !response_field_passes(name, false) {
            continue;
        }
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
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
    for (name, value) in ketama {
        out.extend_from_slice(name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

/// The reason phrase of the statuses the router answers with itself.
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        400 => "Bad Request",
        405 => "Not Allowed",
        408 => "Request Timeout",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => http::StatusCode::from_u16(status)
            .ok()
            .and_then(|s| s.canonical_reason())
            .unwrap_or("Unknown"),
    }
}

/// The router's own answer, either protocol.
#[derive(Clone, Copy)]
pub enum Own<'a> {
    /// `status` with `ketama-router: WORDS` as its plain-text body (none
    /// for a `HEAD` request, its length still said).
    Plain {
        /// The status.
        status: u16,
        /// What the body says.
        words: &'a str,
        /// The request was a `HEAD`.
        head_request: bool,
    },
    /// To a gRPC call: trailers-only, as gRPC (and gRPC-Web) reads one:
    /// `200`, `grpc-status: CODE` and `grpc-message`, no body.
    Grpc {
        /// The gRPC status code.
        code: u8,
        /// Its message (percent-encoded as gRPC's grammar wants).
        words: &'a str,
    },
}

impl Own<'_> {
    /// The status.
    pub fn status(&self) -> u16 {
        match self {
            Own::Plain { status, .. } => *status,
            Own::Grpc { .. } => 200,
        }
    }

    /// Its fields after `Server` and `Date`, in order, each handed to
    /// `field` (names as HTTP/1 writes them; HTTP/2 lowers them), then
    /// `x-ketama-backend` naming the backend tried when given. HTTP/1
    /// and HTTP/2 answers are built from this one list.
    pub fn fields(&self, backend: Option<&[u8]>, mut field: impl FnMut(&'static str, &[u8])) {
        let mut n = itoa::Buffer::new();
        match *self {
            Own::Plain { words, .. } => {
                field("Content-Type", b"text/plain");
                let len = "ketama-router: ".len() + words.len() + 1;
                field("Content-Length", n.format(len).as_bytes());
            }
            Own::Grpc { code, words } => {
                field("Content-Type", b"application/grpc");
                field("grpc-status", n.format(code).as_bytes());
                field(
                    "grpc-message",
                    super::grpc::encode_message(words).as_bytes(),
                );
                field("Content-Length", b"0");
            }
        }
        field("Cache-Control", b"private, no-store");
        if let Some(b) = backend {
            field("x-ketama-backend", b);
        }
    }

    /// Appends its body (`ketama-router: WORDS\n`; nothing for a `HEAD`
    /// request or a gRPC call) to `out`.
    pub fn body(&self, out: &mut Vec<u8>) {
        if let Own::Plain {
            words,
            head_request: false,
            ..
        } = self
        {
            out.extend_from_slice(b"ketama-router: ");
            out.extend_from_slice(words.as_bytes());
            out.push(b'\n');
        }
    }
}

/// Writes the router's own HTTP/1 answer into `out` (cleared first): its
/// status line, `Server`, `Date`, [`Own::fields`], the connection kept or
/// closed as `keep` says, and its body.
pub fn answer(own: Own<'_>, backend: Option<&[u8]>, keep: bool, out: &mut Vec<u8>) {
    out.clear();
    let status = own.status();
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(itoa::Buffer::new().format(status).as_bytes());
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\nServer: ketama-router\r\nDate: ");
    out.extend_from_slice(&super::date::now());
    out.extend_from_slice(b"\r\n");
    own.fields(backend, |name, value| {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    });
    out.extend_from_slice(if keep {
        b"Connection: keep-alive\r\n\r\n"
    } else {
        b"Connection: close\r\n\r\n"
    });
    own.body(out);
}

#[cfg(test)]
mod ip_tests {
    #[test]
    fn ipv4_as_display_writes_it() {
        for ip in [
            "0.0.0.0",
            "127.0.0.1",
            "10.20.30.40",
            "255.255.255.255",
            "1.100.9.199",
        ] {
            let mut out = Vec::new();
            super::write_ip(ip.parse().unwrap(), &mut out);
            assert_eq!(out, ip.as_bytes());
        }
        let mut out = Vec::new();
        super::write_ip("::1".parse().unwrap(), &mut out);
        assert_eq!(out, b"::1");
    }
}

#[cfg(test)]
mod own_tests {
    use super::*;

    fn fields(own: Own<'_>, backend: Option<&[u8]>) -> Vec<(String, String)> {
        let mut out = Vec::new();
        own.fields(backend, |n, v| {
            out.push((n.to_string(), String::from_utf8_lossy(v).into_owned()))
        });
        out
    }

    #[test]
    fn the_routers_own_answers_say_their_length_type_and_backend() {
        let plain = Own::Plain {
            status: 502,
            words: "no backend answered",
            head_request: false,
        };
        let f = fields(plain, Some(b"10.0.0.1:80"));
        let body = "ketama-router: no backend answered\n";
        let want = [
            ("Content-Type", "text/plain"),
            ("Content-Length", &*body.len().to_string()),
            ("Cache-Control", "private, no-store"),
            ("x-ketama-backend", "10.0.0.1:80"),
        ];
        let f: Vec<(&str, &str)> = f.iter().map(|(n, v)| (&**n, &**v)).collect();
        assert_eq!(f, want);
        let mut out = Vec::new();
        answer(plain, Some(b"10.0.0.1:80"), false, &mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 502 Bad Gateway\r\nServer: ketama-router\r\nDate: "));
        assert!(text.ends_with(&format!(
            "\r\nx-ketama-backend: 10.0.0.1:80\r\nConnection: close\r\n\r\n{body}"
        )));
        // A HEAD request's: the same length said, no body.
        let head = Own::Plain {
            status: 502,
            words: "no backend answered",
            head_request: true,
        };
        let mut out = Vec::new();
        answer(head, None, true, &mut out);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains(&format!("Content-Length: {}\r\n", body.len())));
        assert!(text.ends_with("Connection: keep-alive\r\n\r\n"));
        let grpc = Own::Grpc {
            code: 14,
            words: "no backend: 100%",
        };
        assert_eq!(grpc.status(), 200);
        let f = fields(grpc, None);
        assert_eq!(f[0], ("Content-Type".into(), "application/grpc".into()));
        assert_eq!(f[1], ("grpc-status".into(), "14".into()));
        assert_eq!(f[2], ("grpc-message".into(), "no backend: 100%25".into()));
        let mut body = Vec::new();
        grpc.body(&mut body);
        assert!(body.is_empty());
    }
}
