//! One attempt at an HTTP/1 backend, for any client: the request head
//! ([`super::head_write::request_head`]) and body ([`super::upload`]),
//! the response head read incrementally (interim `1xx` heads dropped:
//! the router answers `Expect` itself, as nginx does) while watching the
//! client, which may leave meanwhile (nginx's `proxy_ignore_client_abort
//! off`), then the response relayed through the one copy loop, and the
//! backend's connection kept when the exchange left it clean. After a
//! `101` to a WebSocket upgrade the router forwarded, an HTTP/1 client's
//! connection and the backend's are joined ([`super::h1::tunnel`]).

use std::sync::Arc;
use std::time::Duration;

use super::attempt::{failed, upstream, Attempted, Client, ClientFailure};
use super::body::Framing;
use super::copy::{copy, BodyError, BodySource, Copied, CopyError, Flow};
use super::framed::Framed;
use super::head_write;
use super::io::{Buffered, ReadError, UpstreamIo};
use super::record::Record;
use super::relay;
use super::request::Req;
use super::response_head::{read_final, H1Response, ResponseHead};
use super::upload::{Sent, UpstreamSink};
use super::upstream::H1Conn;
use super::{buffers, Engine};
use crate::policy::{Failure, Stage};
use crate::state::RoutingState;

/// One attempt at the HTTP/1 backend `conn`: the request, the response
/// head, then [`relay`]'s; the connection kept for another request when
/// the exchange left it clean.
pub(crate) async fn attempt<C: Client>(
    e: &Engine,
    c: &mut C,
    state: &Arc<RoutingState>,
    r: &mut Record,
    mut conn: H1Conn,
) -> Attempted {
    let server = &state.validated.config.server;
    let n = r.backend.unwrap_or_else(|| unreachable!("chosen"));
    let limits = state.backends[n].limits;
    let mut out = buffers::take();
    let chunked = c.buffered().is_none() && c.body_length().is_none();
    let up = upstream(e, c, state, r, n, chunked);
    head_write::request_head(&c.request(), &up, &mut out);
    r.head_sent();
    let mut head = ResponseHead::new();
    let sent = send(
        c,
        &mut conn.io,
        &mut head,
        &out,
        chunked,
        server,
        limits.write_timeout,
    )
    .await;
    buffers::give(out);
    let early = match sent {
        Ok(s) => s == Sent::Answered,
        Err(f) => {
            conn.done(false, 0);
            return f;
        }
    };
    if !early {
        if let Err(t) = read_head(c, &mut conn.io, &mut head, limits.read_timeout).await {
            conn.done(false, 0);
            return match t {
                Attempted::ClientFailed(f) => relay::client_failed(state, r, f),
                t => t,
            };
        }
    }
    // A switch of protocols nobody asked for is no answer to this request:
    // what follows would pass unrouted (nginx reads it as the next
    // request; the router refuses the response).
    let switching = head.status == 101;
    if switching && !c.request().websocket() {
        conn.done(false, 0);
        return failed(Stage::AwaitingHead, Failure::BadResponse);
    }
    let framing = head.body(c.request().is_head());
    let reusable = !head.close && framing != Framing::UntilClose && !early && !switching;
    let view = H1Response {
        head: &head,
        buf: conn.io.buf(),
    };
    let respond = relay::answered(state, r, &view, framing, early);
    let sent = c.respond(&view, respond).await;
    let sink = match relay::sent(e, state, r, head.status, sent) {
        Ok(s) => s,
        Err(t) => {
            conn.done(false, 0);
            return t;
        }
    };
    conn.io.consume(head.len);
    conn.io.compact();
    let piece = server.body_buffer_bytes;
    let timeout = limits.read_timeout;
    let mut source = BodySource::new(&mut conn.io, framing, piece, true, timeout);
    let t = relay::body(e, state, r, &mut source, sink).await;
    drop(head);
    let relayed = matches!(t, Attempted::Relayed);
    if relayed && switching {
        relay::tunnel(c, r, &mut conn.io, timeout).await;
    }
    let clean = relayed && reusable && conn.io.pending().is_empty();
    conn.done(clean, server.upstream_keepalive_pool_size);
    t
}

/// A backend's body that failed, as the policy counts it.
impl From<BodyError> for Failure {
    fn from(e: BodyError) -> Failure {
        match e {
            BodyError::TimedOut => Failure::Timeout,
            BodyError::Framing(_) => Failure::BadResponse,
            BodyError::Closed => Failure::Broken,
        }
    }
}

/// Sends the request head `out` and the body (see [`super::upload`]);
/// what the backend sends meanwhile goes to `up`'s buffer and `head`.
#[allow(clippy::too_many_arguments)]
async fn send<C: Client>(
    c: &mut C,
    up: &mut Buffered<UpstreamIo>,
    head: &mut ResponseHead,
    out: &[u8],
    chunked: bool,
    server: &ketama_config::model::ServerSection,
    write_timeout: Duration,
) -> Result<Sent, Attempted> {
    let mut up = UpstreamSink {
        up,
        head,
        request_head: Some(out),
        timeout: write_timeout,
    };
    if let Some(body) = c.buffered() {
        let h = up.request_head.take().unwrap_or_default();
        return match up.write_parts(&[h, body]).await {
            Ok(Flow::Go) => Ok(Sent::Whole),
            Ok(Flow::Stop) => Ok(Sent::Answered),
            Err((stage, f)) => Err(failed(stage, f)),
        };
    }
    let mut sink = Framed::new(up, chunked);
    let mut body = c.body(server);
    let copied = copy(&mut body, &mut sink).await;
    drop(body);
    match copied {
        Ok(Copied::Whole(_)) => Ok(Sent::Whole),
        Ok(Copied::Stopped(_)) => Ok(Sent::Answered),
        Err(CopyError::Source(f, _)) => Err(Attempted::ClientFailed(f)),
        Err(CopyError::Sink((stage, f), _)) => Err(failed(stage, f)),
    }
}

/// Reads the backend's response head into `up`'s buffer (interim heads
/// dropped), within `timeout` per read, while watching the client: one
/// that leaves meanwhile ends the wait (as nginx's
/// `proxy_ignore_client_abort off`).
async fn read_head<C: Client>(
    c: &mut C,
    up: &mut Buffered<UpstreamIo>,
    head: &mut ResponseHead,
    timeout: Duration,
) -> Result<(), Attempted> {
    loop {
        match read_final(up, head) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(f) => return Err(failed(Stage::AwaitingHead, f)),
        }
        let read = tokio::select! {
            r = up.read_more(4096, usize::MAX, timeout) => r,
            () = c.gone() => return Err(Attempted::ClientFailed(ClientFailure::Disconnected)),
        };
        match read {
            Ok(_) => {}
            // Closed before a whole head: nothing to answer with.
            Err(ReadError::Closed) => return Err(failed(Stage::AwaitingHead, Failure::Broken)),
            Err(ReadError::TimedOut) => return Err(failed(Stage::AwaitingHead, Failure::Timeout)),
        }
    }
}
