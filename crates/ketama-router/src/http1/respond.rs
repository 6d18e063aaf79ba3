//! The backend's response to the client: its head read (informational
//! responses other than `101` skipped: the router answers `Expect` itself,
//! as nginx does), rewritten ([`super::forward::response_head`]) and sent
//! with the first body bytes in one write, then the body relayed as it
//! comes (chunked again to an HTTP/1.1 client, its bytes alone to an
//! HTTP/1.0 one, which then sees the connection close), or, after a
//! `101`, both directions tunnelled ([`super::tunnel`]).

use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::chunked::{chunk_head, Chunked, LAST_CHUNK};
use super::conn::Conn;
use super::forward::{self, Downstream};
use super::io::UpstreamIo;
use super::response::{BadResponse, BodyKind, ResponseHead};
use super::send::{send, SendError};
use super::upstream::within;
use crate::policy::Failure;
use crate::state::RoutingState;

/// A response head larger than this is refused (Pingora's bound).
pub const MAX_RESPONSE_HEAD: usize = 1 << 20;

/// Why no response head was read.
pub enum NoHead {
    /// The backend failed.
    Upstream(Failure),
    /// The client closed its connection meanwhile (nginx's 499): nobody
    /// is left to answer.
    ClientGone,
}

impl From<Failure> for NoHead {
    fn from(f: Failure) -> Self {
        NoHead::Upstream(f)
    }
}

/// Bytes a client may send while its answer is awaited (a pipelined
/// request, kept for later) before the router stops watching it.
const WATCH_LIMIT: usize = 64 * 1024;

/// Resolves when the client closes or fails its connection; what it
/// sends meanwhile stays in its buffer, up to [`WATCH_LIMIT`] (then it
/// is no longer watched).
async fn client_gone(c: &mut Conn) {
    use tokio::io::AsyncReadExt;
    while c.buf.len() - c.used < WATCH_LIMIT {
        c.buf.reserve(4096);
        match c.io.read_buf(&mut c.buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
    std::future::pending::<()>().await
}

/// Reads the backend's response head into `rb` (informational heads but
/// `101` dropped), within `timeout` per read, while watching the client:
/// one that leaves meanwhile ends the wait (as nginx's
/// `proxy_ignore_client_abort off`).
pub async fn read_head(
    c: &mut Conn,
    io: &mut UpstreamIo,
    rb: &mut Vec<u8>,
    head: &mut ResponseHead,
    timeout: Duration,
) -> Result<(), NoHead> {
    loop {
        match head.parse(rb) {
            Ok(true) if (100..200).contains(&head.status) && head.status != 101 => {
                rb.drain(..head.len);
                head.restart();
                continue;
            }
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(BadResponse(why)) => {
                tracing::debug!(why, "a bad response head");
                return Err(NoHead::Upstream(Failure::BadResponse));
            }
        }
        if rb.len() > MAX_RESPONSE_HEAD {
            return Err(NoHead::Upstream(Failure::BadResponse));
        }
        rb.reserve(4096);
        let read = tokio::select! {
            r = within(timeout, io.read_buf(rb)) => r?,
            () = client_gone(c) => return Err(NoHead::ClientGone),
        };
        // Closed before a whole head: nothing to answer with.
        if read == 0 {
            return Err(NoHead::Upstream(Failure::Broken));
        }
    }
}

/// How relaying the response ended.
pub enum Relayed {
    /// The whole response reached the client.
    Done {
        /// The status sent.
        status: u16,
        /// Body bytes sent.
        bytes: u64,
        /// The client's connection serves another request.
        keep_client: bool,
        /// The backend's connection may serve another request.
        reuse_upstream: bool,
    },
    /// The backend failed after its head (the client's connection ends).
    Upstream {
        /// Its failure.
        failure: Failure,
        /// The status sent.
        status: u16,
        /// Body bytes sent.
        bytes: u64,
    },
    /// The client failed (it stopped taking bytes, or left).
    Client {
        /// Why.
        error: SendError,
        /// The status sent.
        status: u16,
        /// Body bytes sent.
        bytes: u64,
    },
}

/// What the response head for the client adds of the router's own.
pub struct Ketama<'a> {
    /// The backend's `x-ketama-backend` value.
    pub backend: &'a [u8],
    /// The ring's name.
    pub ring: &'static str,
    /// Full backends passed over.
    pub spills: u32,
}

/// Writes `x-ketama-*` lines into `out`.
fn ketama_lines(k: &Ketama<'_>, out: &mut Vec<u8>) {
    out.extend_from_slice(b"x-ketama-backend: ");
    out.extend_from_slice(k.backend);
    out.extend_from_slice(b"\r\nx-ketama-ring: ");
    out.extend_from_slice(k.ring.as_bytes());
    out.extend_from_slice(b"\r\n");
    if k.spills > 0 {
        out.extend_from_slice(b"x-ketama-spill: ");
        out.extend_from_slice(itoa::Buffer::new().format(k.spills).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// Relays the response whose head `head` is at the start of `rb`;
/// `early`: it came before the request's body was all sent (neither
/// connection is kept then).
#[allow(clippy::too_many_arguments)]
pub async fn respond(
    c: &mut Conn,
    state: &RoutingState,
    io: &mut UpstreamIo,
    rb: &mut Vec<u8>,
    head: &ResponseHead,
    is_head_request: bool,
    early: bool,
    ketama: Option<Ketama<'_>>,
    read_timeout: Duration,
) -> Relayed {
    let server = &state.validated.config.server;
    let send_timeout = Duration::from_millis(server.send_timeout_ms);
    let kind = head.body(is_head_request);
    let switching = head.status == 101;
    let client11 = c.head.http11;
    // Pipelined bytes past the request with `pipelining = false`: the
    // connection closes after this answer.
    let leftover = c.buf.len() > c.used;
    let keep_client = c.head.wants_keep_alive()
        && !early
        && !switching
        && kind != BodyKind::UntilClose
        && (kind != BodyKind::Chunked || client11)
        && (server.pipelining || !leftover)
        && !c.closing();
    let chunked_out = kind == BodyKind::Chunked && client11;
    let mut extra = super::buffers::take();
    if let Some(k) = &ketama {
        ketama_lines(k, &mut extra);
    }
    let date = super::date::now();
    let mut out = super::buffers::take();
    forward::response_head(
        head,
        rb,
        &Downstream {
            keep_alive: keep_client,
            chunked: chunked_out,
            extra: &extra,
            date: &date,
        },
        &mut out,
    );
    super::buffers::give(extra);
    let status = head.status;
    let r = relay_body(
        c,
        io,
        rb,
        head.len,
        &out,
        kind,
        chunked_out,
        read_timeout,
        send_timeout,
        server.body_buffer_bytes,
    )
    .await;
    super::buffers::give(out);
    match r {
        Ok((bytes, clean)) => {
            if switching {
                let bytes = super::tunnel::tunnel(c, io, &rb[head.len..], read_timeout).await;
                return Relayed::Done {
                    status,
                    bytes,
                    keep_client: false,
                    reuse_upstream: false,
                };
            }
            Relayed::Done {
                status,
                bytes,
                keep_client,
                reuse_upstream: clean && !early && !head.close && kind != BodyKind::UntilClose,
            }
        }
        Err((Side::Upstream(failure), bytes)) => Relayed::Upstream {
            failure,
            status,
            bytes,
        },
        Err((Side::Client(error), bytes)) => Relayed::Client {
            error,
            status,
            bytes,
        },
    }
}

/// Which side failed a relay.
enum Side {
    Upstream(Failure),
    Client(SendError),
}

/// Sends the head `out` and the body; `Ok((body bytes sent, clean))`,
/// `clean` when the backend sent nothing past the body.
#[allow(clippy::too_many_arguments)]
async fn relay_body(
    c: &mut Conn,
    io: &mut UpstreamIo,
    rb: &mut Vec<u8>,
    head_len: usize,
    out: &[u8],
    kind: BodyKind,
    chunked_out: bool,
    read_timeout: Duration,
    send_timeout: Duration,
    piece: usize,
) -> Result<(u64, bool), (Side, u64)> {
    let client = |e| (Side::Client(e), 0u64);
    match kind {
        BodyKind::Empty => {
            // Whatever followed the head is not this response's.
            let clean = rb.len() == head_len;
            send(&mut c.io, &[out], send_timeout)
                .await
                .map_err(client)?;
            Ok((0, clean))
        }
        BodyKind::Length(n) => {
            let first = ((rb.len() - head_len) as u64).min(n) as usize;
            let mut clean = rb.len() - head_len <= first;
            send(
                &mut c.io,
                &[out, &rb[head_len..head_len + first]],
                send_timeout,
            )
            .await
            .map_err(client)?;
            let (mut sent, mut left) = (first as u64, n - first as u64);
            while left > 0 {
                rb.clear();
                // One byte more than is left: an overread shows.
                let want = (left as usize).min(piece).saturating_add(1);
                rb.reserve(want);
                let got = within(read_timeout, io.take(want as u64).read_buf(rb))
                    .await
                    .map_err(|f| (Side::Upstream(f), sent))?;
                if got == 0 {
                    return Err((Side::Upstream(Failure::Broken), sent));
                }
                let body = (got as u64).min(left) as usize;
                clean &= got == body;
                send(&mut c.io, &[&rb[..body]], send_timeout)
                    .await
                    .map_err(|e| (Side::Client(e), sent))?;
                sent += body as u64;
                left -= body as u64;
            }
            Ok((sent, clean))
        }
        BodyKind::UntilClose => {
            let first = &rb[head_len..];
            send(&mut c.io, &[out, first], send_timeout)
                .await
                .map_err(client)?;
            let mut sent = first.len() as u64;
            loop {
                rb.clear();
                rb.reserve(piece);
                let got = within(read_timeout, io.read_buf(rb))
                    .await
                    .map_err(|f| (Side::Upstream(f), sent))?;
                if got == 0 {
                    return Ok((sent, false));
                }
                send(&mut c.io, &[&rb[..got]], send_timeout)
                    .await
                    .map_err(|e| (Side::Client(e), sent))?;
                sent += got as u64;
            }
        }
        BodyKind::Chunked => {
            let mut decoder = Chunked::default();
            let mut w = super::buffers::take();
            let r = relay_chunked(
                c,
                io,
                rb,
                head_len,
                out,
                &mut decoder,
                &mut w,
                chunked_out,
                read_timeout,
                send_timeout,
                piece,
            )
            .await;
            super::buffers::give(w);
            r
        }
    }
}

/// The chunked case of [`relay_body`]: decoded from the backend, written
/// chunked again (or, to an HTTP/1.0 client, bare).
#[allow(clippy::too_many_arguments)]
async fn relay_chunked(
    c: &mut Conn,
    io: &mut UpstreamIo,
    rb: &mut Vec<u8>,
    head_len: usize,
    out: &[u8],
    decoder: &mut Chunked,
    w: &mut Vec<u8>,
    chunked_out: bool,
    read_timeout: Duration,
    send_timeout: Duration,
    piece: usize,
) -> Result<(u64, bool), (Side, u64)> {
    let mut sent = 0u64;
    let mut from = head_len;
    let mut head_out = Some(out);
    loop {
        w.clear();
        let mut data_bytes = 0u64;
        let used = decoder
            .feed(&rb[from..], |d| {
                data_bytes += d.len() as u64;
                if chunked_out {
                    chunk_head(d.len(), w);
                    w.extend_from_slice(d);
                    w.extend_from_slice(b"\r\n");
                } else {
                    w.extend_from_slice(d);
                }
            })
            .map_err(|_| (Side::Upstream(Failure::BadResponse), sent))?;
        let done = decoder.done();
        if done && chunked_out {
            w.extend_from_slice(LAST_CHUNK);
        }
        let parts: [&[u8]; 2] = [head_out.take().unwrap_or(&[]), w];
        send(&mut c.io, &parts, send_timeout)
            .await
            .map_err(|e| (Side::Client(e), sent))?;
        sent += data_bytes;
        if done {
            return Ok((sent, from + used == rb.len()));
        }
        rb.clear();
        from = 0;
        rb.reserve(piece.min(64 * 1024));
        let got = within(read_timeout, io.read_buf(rb))
            .await
            .map_err(|f| (Side::Upstream(f), sent))?;
        if got == 0 {
            return Err((Side::Upstream(Failure::Broken), sent));
        }
    }
}
