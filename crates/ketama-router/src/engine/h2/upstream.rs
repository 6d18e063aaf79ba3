//! HTTP/2 to backends (`[upstream_tls] h2 = true`, a TLS backend whose
//! ALPN picked `h2`): one connection per backend and worker thread,
//! shared by every request to it (each a stream, as many at once as the
//! backend's `SETTINGS_MAX_CONCURRENT_STREAMS` allows), driven by a task
//! of its own; a connection that failed or closed is replaced by the next
//! request. One attempt sends the request as HTTP/2 (the fields nginx
//! never forwards and those HTTP/2 forbids left out, `Host` as
//! `:authority`), its body as DATA frames, and relays the response
//! through the one copy loop.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use h2::client::SendRequest;
use http::HeaderName;

use super::body::{H2Sink, RecvSource};
use crate::engine::body::Framing;
use crate::engine::copy::{copy, Copied, CopyError};
use crate::engine::exchange::{failed, send_failed, Client, ClientFailure, Respond, Tried};
use crate::engine::fields::connection_specific;
use crate::engine::head_write::{forwarded_as_sent, write_forwarded_for, Upstream};
use crate::engine::io::UpstreamIo;
use crate::engine::pool;
use crate::engine::record::Record;
use crate::engine::request::Req;
use crate::engine::response_head::{no_body, ResponseView};
use crate::engine::Engine;
use crate::policy::{Failure, Stage};
use crate::state::RoutingState;

/// A stream's way to a backend: its connection's request sender.
pub struct Sender {
    /// The connection's sender (a clone per request).
    pub send: SendRequest<Bytes>,
    /// The connection served earlier requests.
    pub reused: bool,
}

thread_local! {
    /// This thread's HTTP/2 connections to backends.
    static SHARED: RefCell<HashMap<pool::Key, SendRequest<Bytes>>> = RefCell::new(HashMap::new());
}

/// This thread's HTTP/2 connection to `key`, while it is usable.
pub fn shared(key: &pool::Key) -> Option<Sender> {
    SHARED.with(|s| {
        let mut s = s.borrow_mut();
        let send = s.get_mut(key)?;
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        // At its stream limit it is still usable (the request waits);
        // failed or closed it is not.
        if let Poll::Ready(Err(_)) = send.poll_ready(&mut cx) {
            s.remove(key);
            return None;
        }
        Some(Sender {
            send: send.clone(),
            reused: true,
        })
    })
}

/// Speaks HTTP/2 over `io` (the TLS connection whose ALPN picked it) and
/// shares the connection for `key`.
pub async fn handshake(io: UpstreamIo, key: pool::Key) -> Result<Sender, Failure> {
    let (send, conn) = h2::client::Builder::new()
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|_| Failure::Connect)?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("an HTTP/2 connection to a backend ended: {e}");
        }
    });
    SHARED.with(|s| s.borrow_mut().insert(key, send.clone()));
    Ok(Sender {
        send,
        reused: false,
    })
}

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
}

/// The request as an HTTP/2 backend gets it (see the module docs).
fn request(
    req: &impl Req,
    up: &Upstream<'_>,
    fallback_authority: &str,
) -> Result<http::Request<()>, http::Error> {
    let authority = req
        .authority()
        .or_else(|| req.field(b"host"))
        .and_then(|a| std::str::from_utf8(a).ok())
        .unwrap_or(fallback_authority);
    let (slash, target) = req.forward_target();
    let mut uri = format!("https://{authority}");
    if slash {
        uri.push('/');
    }
    encode_target(target, &mut uri);
    let mut b = http::Request::builder()
        .method(http::Method::from_bytes(req.method()).unwrap_or(http::Method::GET))
        .uri(uri);
    for (name, value) in req.fields() {
        if !forwarded_as_sent(name, true, up) || connection_specific(name) {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name),
            http::HeaderValue::from_bytes(value),
        ) {
            b = b.header(n, v);
        }
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

/// One attempt at an HTTP/2 backend.
pub async fn attempt<C: Client>(
    e: &Engine,
    c: &mut C,
    state: &Arc<RoutingState>,
    r: &mut Record,
    sender: Sender,
) -> Tried {
    let server = &state.validated.config.server;
    let n = r.backend.unwrap_or_else(|| unreachable!("chosen"));
    let backend = &state.backends[n];
    let limits = backend.limits;
    let told = crate::policy::route::previous_owner_hint(state, r.route.as_ref(), r.previous, n);
    if told.is_some() {
        e.metrics.previous_owner_hint();
    }
    let up = Upstream {
        chunked: false,
        forwarded: server.forwarded_headers.then_some((c.peer(), c.tls())),
        hint: state
            .previous_owner_header
            .as_ref()
            .map(|h| (h.as_str().as_bytes(), told.map(str::as_bytes))),
    };
    let Ok(req) = request(&c.request(), &up, &backend.server) else {
        return failed(Stage::Connect, Failure::Other);
    };
    let ready = tokio::time::timeout(limits.write_timeout, sender.send.ready()).await;
    let mut send = match ready {
        Ok(Ok(s)) => s,
        Ok(Err(_)) => return failed(Stage::AwaitingHead, Failure::Broken),
        Err(_) => return failed(Stage::AwaitingHead, Failure::Timeout),
    };
    let empty = c.buffered().is_some_and(|b| b.is_empty()) && c.trailers().is_none();
    let (response, mut stream) = match send.send_request(req, empty) {
        Ok(s) => s,
        Err(_) => return failed(Stage::AwaitingHead, Failure::Broken),
    };
    r.head_sent();
    let mut sink = H2Sink {
        send: &mut stream,
        timeout: limits.write_timeout,
    };
    let sent = match c.buffered() {
        Some(_) if empty => Ok(()),
        Some(body) => match sink.send_data(body, false).await {
            Ok(()) => sink.end(c.trailers()),
            Err(e) => Err(e),
        }
        .map_err(|_| failed(Stage::AwaitingHead, Failure::Broken)),
        None => {
            let mut body = c.body(server);
            match copy(&mut body, &mut sink).await {
                Ok(_) => Ok(()),
                Err(CopyError::Source(f, _)) => Err(Tried::ClientFailed(f)),
                Err(CopyError::Sink(_, _)) => Err(failed(Stage::AwaitingHead, Failure::Broken)),
            }
        }
    };
    if let Err(t) = sent {
        return t;
    }
    let head = tokio::select! {
        h = tokio::time::timeout(limits.read_timeout, response) => h,
        () = c.gone() => {
            r.attempt_ended(state);
            return Tried::ClientFailed(ClientFailure::Disconnected);
        }
    };
    let resp = match head {
        Ok(Ok(resp)) => resp,
        Ok(Err(_)) => return failed(Stage::AwaitingHead, Failure::Broken),
        Err(_) => return failed(Stage::AwaitingHead, Failure::Timeout),
    };
    let (parts, mut recv) = resp.into_parts();
    let status = parts.status.as_u16();
    let name = state.cache.header();
    r.answered(
        state,
        status,
        parts.headers.get_all(name).iter().map(|v| v.as_bytes()),
    );
    let length = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| crate::engine::fields::parse_length(v.as_bytes()));
    let framing =
        if c.request().is_head() || no_body(status) || recv.is_end_stream() && length.is_none() {
            Framing::Empty
        } else {
            match length {
                Some(0) => Framing::Empty,
                Some(n) => Framing::Length(n),
                None => Framing::Chunked,
            }
        };
    let respond = Respond {
        framing,
        length: None,
        early: false,
        ketama: r.ketama_fields(state, n),
    };
    let out = c.respond(&H2Response(&parts), respond).await;
    r.status = status;
    let mut out = match out {
        Ok(o) => o,
        Err(err) => {
            r.attempt_ended(state);
            return send_failed(e, err);
        }
    };
    let mut body = RecvSource::new(
        &mut recv,
        limits.read_timeout,
        Failure::Timeout,
        Failure::Broken,
    );
    let copied = copy(&mut body, &mut out).await;
    match copied {
        Ok(Copied::Whole(b) | Copied::Stopped(b)) => {
            r.bytes_sent = b;
            r.attempt_ended(state);
            Tried::Done
        }
        Err(CopyError::Source(f, b)) => {
            r.bytes_sent = b;
            failed(Stage::Answered, f)
        }
        Err(CopyError::Sink(err, b)) => {
            r.bytes_sent = b;
            r.attempt_ended(state);
            send_failed(e, err)
        }
    }
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
