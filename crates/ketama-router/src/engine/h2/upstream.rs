//! One attempt at an HTTP/2 backend (an `h2c` backend, or a TLS backend
//! whose ALPN picked `h2`), on a stream of a shared connection
//! ([`super::conns`]): the request as HTTP/2 (the fields nginx never
//! forwards and those HTTP/2 forbids left out, `Host` as `:authority`,
//! `te: trailers` when the client sent it, a gRPC call's `grpc-timeout`
//! less the time it already spent), its body as DATA frames, and the
//! response relayed through the one copy loop, trailers included.
//!
//! A body the client still streams goes on while the response comes back
//! (gRPC's client and bidirectional streams): the two directions run at
//! once, each held back by its receiver's flow-control window only. A
//! client that resets its stream resets the backend's at once, and a
//! backend's reset reaches the client.
//!
//! A stream the backend refused (`REFUSED_STREAM`), or that its `GOAWAY`
//! says it never processed, is [`Failure::Refused`]: sent again elsewhere
//! whatever the method, the backend not blamed.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use h2::client::ResponseFuture;
use h2::{RecvStream, SendStream};
use http::HeaderName;
use ketama_config::model::ServerSection;

use super::body::{H2Sink, RecvSource};
use super::conns::Sender;
use crate::engine::attempt::{failed, upstream, Attempted, Client, ClientFailure};
use crate::engine::body::Framing;
use crate::engine::copy::{copy, CopyError};
use crate::engine::fields::connection_specific;
use crate::engine::grpc;
use crate::engine::head_write::{forwarded_as_sent, write_forwarded_for, Upstream};
use crate::engine::record::Record;
use crate::engine::relay;
use crate::engine::request::Req;
use crate::engine::response_head::{framing, ResponseView};
use crate::engine::Engine;
use crate::policy::{Failure, Stage};
use crate::state::{BackendLimits, RoutingState};

/// A backend's HTTP/2 response head, as the client's writer reads it.
pub struct H2Response<'a>(pub &'a http::response::Parts);

impl ResponseView for H2Response<'_> {
    fn status(&self) -> u16 {
        self.0.status.as_u16()
    }

    fn reason(&self) -> &[u8] {
        self.0
            .status
            .canonical_reason()
            .unwrap_or("Unknown")
            .as_bytes()
    }

    fn fields(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.0
            .headers
            .iter()
            .map(|(n, v)| (n.as_str().as_bytes(), v.as_bytes()))
    }

    fn values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> {
        self.0.headers.get_all(name).iter().map(|v| v.as_bytes())
    }

    fn headers(&self) -> Option<&http::HeaderMap> {
        Some(&self.0.headers)
    }
}

/// The request as an HTTP/2 backend gets it (see the module docs):
/// `:scheme` `http` for an `h2c` backend, `https` over TLS; a gRPC
/// call's `grpc-timeout` as what is left of `deadline`.
fn request(
    req: &impl Req,
    up: &Upstream<'_>,
    fallback_authority: &str,
    plain: bool,
    deadline: Option<Instant>,
) -> Result<http::Request<()>, http::Error> {
    let scheme = if plain { "http" } else { "https" };
    let mut b = http::Request::builder()
        .method(http::Method::from_bytes(req.method()).unwrap_or(http::Method::GET));
    // What to forward of a field (see the module docs); `te` and
    // `grpc-timeout` are written below.
    let pass = |name: &[u8], trailers: &mut bool, value: &[u8]| {
        if name.eq_ignore_ascii_case(b"te") {
            // nginx's grpc_pass: `te: trailers` only when the client
            // sent it.
            *trailers |= value
                .split(|&b| b == b',')
                .any(|t| t.trim_ascii().eq_ignore_ascii_case(b"trailers"));
            return false;
        }
        if deadline.is_some() && name.eq_ignore_ascii_case(b"grpc-timeout") {
            return false;
        }
        forwarded_as_sent(name, true, up) && !connection_specific(name)
    };
    let mut trailers = false;
    let typed = req.parts().and_then(|p| {
        let host = || {
            p.headers
                .get(http::header::HOST)?
                .to_str()
                .ok()?
                .parse()
                .ok()
        };
        let authority = match p.uri.authority() {
            Some(a) => a.clone(),
            None => host().or_else(|| fallback_authority.parse().ok())?,
        };
        let mut uri = http::uri::Parts::default();
        uri.scheme = Some(if plain {
            http::uri::Scheme::HTTP
        } else {
            http::uri::Scheme::HTTPS
        });
        uri.authority = Some(authority);
        uri.path_and_query = p.uri.path_and_query().cloned();
        Some((p, http::Uri::from_parts(uri).ok()?))
    });
    match typed {
        // An HTTP/2 client's: the target and fields as parsed already.
        Some((p, uri)) => {
            b = b.uri(uri);
            for (n, v) in &p.headers {
                if pass(n.as_str().as_bytes(), &mut trailers, v.as_bytes()) {
                    b = b.header(n.clone(), v.clone());
                }
            }
        }
        None => {
            let authority = req
                .authority()
                .or_else(|| req.field(b"host"))
                .and_then(|a| std::str::from_utf8(a).ok())
                .unwrap_or(fallback_authority);
            let (slash, target) = req.forward_target();
            let mut uri = format!("{scheme}://{authority}");
            if slash {
                uri.push('/');
            }
            encode_target(target, &mut uri);
            b = b.uri(uri);
            for (name, value) in req.fields() {
                if !pass(name, &mut trailers, value) {
                    continue;
                }
                if let (Ok(n), Ok(v)) = (
                    HeaderName::from_bytes(name),
                    http::HeaderValue::from_bytes(value),
                ) {
                    b = b.header(n, v);
                }
            }
        }
    }
    if trailers {
        b = b.header(http::header::TE, "trailers");
    }
    if let Some(d) = deadline {
        let left = d.saturating_duration_since(Instant::now());
        b = b.header("grpc-timeout", grpc::format_timeout(left));
    }
    if let Some(n) = req.content_length() {
        b = b.header(http::header::CONTENT_LENGTH, n);
    }
    if let Some((name, Some(value))) = up.hint {
        b = b.header(name, value);
    }
    if let Some((ip, tls)) = up.forwarded {
        if let Some(ip) = ip {
            let mut v = Vec::new();
            write_forwarded_for(req, ip, &mut v);
            b = b.header("x-forwarded-for", v);
        }
        b = b.header("x-forwarded-proto", if tls { "https" } else { "http" });
    }
    b.body(())
}

/// Bytes a `:path` carries as they are: RFC 3986's unreserved and
/// sub-delims, `:`, `@`, `/`, `?` and `%`.
fn plain_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%".contains(&b)
}

/// Appends `target` as an HTTP/2 `:path`: without its fragment (RFC 9113
/// section 8.3.1), any byte nginx accepts in a target and a URI may not
/// hold (`<`, `{`, `"`, bytes over 0x7f) percent-encoded.
fn encode_target(target: &[u8], out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for &b in target.split(|&b| b == b'#').next().unwrap_or_default() {
        if plain_byte(b) {
            out.push(char::from(b));
        } else {
            out.extend([
                '%',
                char::from(HEX[usize::from(b >> 4)]),
                char::from(HEX[usize::from(b & 15)]),
            ]);
        }
    }
}

/// What an error of `h2`'s on a stream means: the backend refused it
/// or never processed it ([`Failure::Refused`]), or it broke.
fn stream_failure(e: &h2::Error) -> Failure {
    let refused = e.is_reset() && e.reason() == Some(h2::Reason::REFUSED_STREAM);
    if e.is_remote() && (refused || e.is_go_away()) {
        Failure::Refused
    } else {
        Failure::Broken
    }
}

/// One attempt at an HTTP/2 backend.
pub(crate) async fn attempt<C: Client>(
    e: &Engine,
    c: &mut C,
    state: &Arc<RoutingState>,
    r: &mut Record,
    conn: Sender,
) -> Attempted {
    let server = &state.validated.config.server;
    let n = r.backend.unwrap_or_else(|| unreachable!("chosen"));
    let backend = &state.backends[n];
    let limits = backend.limits;
    let up = upstream(e, c, state, r, n, false);
    let plain = backend.tls.is_none();
    let Ok(req) = request(&c.request(), &up, &backend.server, plain, r.deadline) else {
        return failed(Stage::Connect, Failure::Other);
    };
    // The stream's place on its connection is given back when `conn`
    // goes, as this attempt ends.
    let Sender { send, reused, .. } = conn;
    let ready = tokio::time::timeout(limits.write_timeout, send.ready()).await;
    // A connection told GOAWAY since it was picked takes no stream: this
    // one was never sent.
    let mut send = match ready {
        Ok(Ok(s)) => s,
        Ok(Err(err)) if reused => return failed(Stage::AwaitingHead, stream_failure(&err)),
        Ok(Err(_)) => return failed(Stage::AwaitingHead, Failure::Broken),
        Err(_) => return failed(Stage::AwaitingHead, Failure::Timeout),
    };
    let empty = c.buffered().is_some_and(|b| b.is_empty()) && c.trailers().is_none();
    let (response, mut stream) = match send.send_request(req, empty) {
        Ok(s) => s,
        Err(err) => return failed(Stage::AwaitingHead, stream_failure(&err)),
    };
    r.head_sent();
    let timeout = limits.write_timeout;
    let sent = if c.buffered().is_some() {
        send_buffered(c, &mut stream, timeout, empty).await
    } else if let Some(body) = c.take_h2_body() {
        return duplex(e, c, state, r, (response, stream), body, limits).await;
    } else {
        send_streamed(c, &mut stream, timeout, server).await
    };
    if let Err(t) = sent {
        return t;
    }
    let t = receive(e, c, state, r, response, limits).await;
    drop(stream);
    t
}

/// Sends the body read whole (none when `empty`) and the trailers that
/// ended it.
async fn send_buffered<C: Client>(
    c: &C,
    stream: &mut SendStream<Bytes>,
    timeout: Duration,
    empty: bool,
) -> Result<(), Attempted> {
    let Some(body) = c.buffered().filter(|_| !empty) else {
        return Ok(());
    };
    let mut sink = H2Sink {
        send: stream,
        timeout,
    };
    let sent = match sink.send_data(body, false).await {
        Ok(()) => sink.end(c.trailers()),
        Err(e) => Err(e),
    };
    sent.map_err(|_| failed(Stage::AwaitingHead, Failure::Broken))
}

/// Sends an HTTP/1 client's body, whole, before the response is awaited.
async fn send_streamed<C: Client>(
    c: &mut C,
    stream: &mut SendStream<Bytes>,
    timeout: Duration,
    server: &ServerSection,
) -> Result<(), Attempted> {
    let mut sink = H2Sink {
        send: stream,
        timeout,
    };
    let mut body = c.body(server);
    match copy(&mut body, &mut sink).await {
        Ok(_) => Ok(()),
        Err(CopyError::Source(f, _)) => Err(Attempted::ClientFailed(f)),
        Err(CopyError::Sink(_, _)) => Err(failed(Stage::AwaitingHead, Failure::Broken)),
    }
}

/// An HTTP/2 client's `body` streams on to the backend's stream while the
/// response comes back (gRPC's client and bidirectional streams).
async fn duplex<C: Client>(
    e: &Engine,
    c: &mut C,
    state: &Arc<RoutingState>,
    r: &mut Record,
    (response, mut stream): (ResponseFuture, SendStream<Bytes>),
    mut body: RecvStream,
    limits: BackendLimits,
) -> Attempted {
    let client_timeout = c.body_timeout();
    let pump = async {
        let mut src = RecvSource::new(
            &mut body,
            client_timeout,
            ClientFailure::TimedOut,
            ClientFailure::Disconnected,
        );
        let mut sink = H2Sink {
            send: &mut stream,
            timeout: limits.write_timeout,
        };
        copy(&mut src, &mut sink).await
    };
    let ended = {
        let relay = receive(e, c, state, r, response, limits);
        tokio::pin!(pump, relay);
        let mut pumping = true;
        loop {
            tokio::select! {
                t = &mut relay => break Ok(t),
                p = &mut pump, if pumping => {
                    pumping = false;
                    // The client failed its body: the backend's stream was
                    // reset (the sink's abort); the response is moot. A
                    // backend that stopped taking the body answers (or
                    // resets) on the response's side.
                    if let Err(CopyError::Source(f, _)) = p {
                        break Err(f);
                    }
                }
            }
        }
    };
    drop((stream, body));
    match ended {
        Ok(t) => t,
        Err(f) => relay::client_failed(state, r, f),
    }
}

/// The response to an attempt whose request went out: its head within
/// `read_timeout` (the client leaving meanwhile ends the attempt), then
/// [`relay`]'s.
async fn receive<C: Client>(
    e: &Engine,
    c: &mut C,
    state: &Arc<RoutingState>,
    r: &mut Record,
    response: ResponseFuture,
    limits: BackendLimits,
) -> Attempted {
    let head = tokio::select! {
        h = tokio::time::timeout(limits.read_timeout, response) => h,
        () = c.gone() => return relay::client_failed(state, r, ClientFailure::Disconnected),
    };
    let resp = match head {
        Ok(Ok(resp)) => resp,
        Ok(Err(err)) => return failed(Stage::AwaitingHead, stream_failure(&err)),
        Err(_) => return failed(Stage::AwaitingHead, Failure::Timeout),
    };
    let (parts, mut recv) = resp.into_parts();
    let length = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| crate::engine::fields::parse_length(v.as_bytes()));
    let unsaid = match recv.is_end_stream() {
        true => Framing::Empty,
        false => Framing::Chunked,
    };
    let status = parts.status.as_u16();
    let framing = framing(c.request().is_head(), status, false, length, unsaid);
    let view = H2Response(&parts);
    let respond = relay::answered(state, r, &view, framing, false);
    let sent = c.respond(&view, respond).await;
    let sink = match relay::sent(e, state, r, status, sent) {
        Ok(s) => s,
        Err(t) => return t,
    };
    let mut body = RecvSource::new(
        &mut recv,
        limits.read_timeout,
        Failure::Timeout,
        Failure::Broken,
    );
    relay::body(e, state, r, &mut body, sink).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_loses_its_fragment_and_encodes_what_a_uri_cannot_hold() {
        let enc = |t: &[u8]| {
            let mut s = String::new();
            encode_target(t, &mut s);
            s
        };
        assert_eq!(enc(b"/a?b=c&d=%20"), "/a?b=c&d=%20");
        assert_eq!(enc(b"/x<y>\x80#frag"), "/x%3Cy%3E%80");
        assert_eq!(enc(b"/a#b?c"), "/a");
        for t in [&b"/x<y>\x80#frag"[..], b"/{a}|b\\c\"d", b"/~x/(y)*;z:@"] {
            let uri = format!("https://h{}", enc(t));
            assert!(uri.parse::<http::Uri>().is_ok(), "{uri}");
        }
    }
}
