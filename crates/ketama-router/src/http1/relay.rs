//! Moving bodies: the request's from the client to the backend (read whole
//! first when small, so a failover can send it again; else streamed), and
//! the response from the backend to the client, each under its timeouts.
//! Chunked bodies are read by [`Chunked`] and written chunked again
//! (trailers dropped); a body of known length is read in pieces of at
//! most `body_buffer_bytes`, asking for one byte more than is left so that
//! a backend sending too much is seen (and its connection not reused).

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::buffers;
use super::chunked::{chunk_head, Chunked, LAST_CHUNK};
use super::conn::Conn;
use super::head::Head;
use super::io::UpstreamIo;
use super::upstream::{within, Upstream};
use crate::policy::Failure;

/// Bodies up to this size are read whole before a backend is tried.
pub const SMALL_BODY: u64 = 64 * 1024;

/// A request's body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Body {
    /// None.
    Empty,
    /// All of it in the connection's buffer after the head.
    Buffered {
        /// Its length.
        len: usize,
    },
    /// Streamed from the client as it comes.
    Streamed {
        /// Its length.
        len: u64,
    },
    /// Chunked, streamed.
    Chunked,
}

impl Body {
    /// The body a head announces.
    pub fn of(head: &Head) -> Body {
        if head.chunked {
            return Body::Chunked;
        }
        match head.content_length {
            None | Some(0) => Body::Empty,
            Some(n) => Body::Streamed { len: n },
        }
    }

    /// Whether all of it is at hand to send again.
    pub fn replayable(&self) -> bool {
        matches!(self, Body::Empty | Body::Buffered { .. })
    }

    /// Whether the client's request was read to its end.
    pub fn read_whole(&self) -> bool {
        self.replayable()
    }

    /// Bytes of the connection's buffer the request used, its head's
    /// `head_len` included, when the body was not streamed.
    pub fn consumed(&self, head_len: usize) -> usize {
        match self {
            Body::Buffered { len } => head_len + len,
            _ => head_len,
        }
    }
}

/// A failure on the client's side of a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientFailure {
    /// It closed or failed mid-body.
    Disconnected,
    /// `client_body_timeout_ms` passed between two reads.
    TimedOut,
    /// Its chunked framing is invalid.
    BadChunks,
}

impl ClientFailure {
    /// The reason `ketama_client_errors_total` counts it under.
    pub fn reason(self) -> &'static str {
        match self {
            ClientFailure::Disconnected => "client_disconnect",
            ClientFailure::TimedOut => "body_timeout",
            ClientFailure::BadChunks => "bad_framing",
        }
    }

    /// The answer, when there is still someone to answer.
    pub fn answer(self) -> Option<(u16, &'static str)> {
        match self {
            ClientFailure::Disconnected => None,
            ClientFailure::TimedOut => Some((408, "no request body in time")),
            ClientFailure::BadChunks => Some((400, "invalid chunked framing in the request body")),
        }
    }
}

/// Reads more of the client's bytes into its buffer, within `timeout`.
async fn read_client(c: &mut Conn, timeout: Duration, want: usize) -> Result<usize, ClientFailure> {
    c.buf.reserve(want.max(1));
    match tokio::time::timeout(timeout, c.io.read_buf(&mut c.buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => Err(ClientFailure::Disconnected),
        Ok(Ok(n)) => Ok(n),
        Err(_) => Err(ClientFailure::TimedOut),
    }
}

/// `100 Continue`, sent before the body is read (as nginx sends it) when
/// an HTTP/1.1 client asked for it and has not sent the body yet.
async fn continue_if_asked(c: &mut Conn, timeout: Duration) -> Result<(), ClientFailure> {
    if c.head.expect_continue && c.head.http11 && c.buf.len() == c.head.len && !c.continued {
        c.continued = true;
        super::send::send(&mut c.io, &[b"HTTP/1.1 100 Continue\r\n\r\n"], timeout)
            .await
            .map_err(|_| ClientFailure::Disconnected)?;
    }
    Ok(())
}

/// Reads a small body of known length whole into the connection's buffer
/// (see [`SMALL_BODY`]), turning `body` into [`Body::Buffered`].
pub async fn buffer_small_body(
    c: &mut Conn,
    body: &mut Body,
    server: &ketama_config::model::ServerSection,
) -> Result<(), ClientFailure> {
    let Body::Streamed { len } = *body else {
        return Ok(());
    };
    if len > SMALL_BODY {
        return Ok(());
    }
    let timeout = Duration::from_millis(server.client_body_timeout_ms);
    let len = len as usize;
    let want = c.head.len + len;
    if c.buf.len() < want {
        continue_if_asked(c, Duration::from_millis(server.send_timeout_ms)).await?;
    }
    while c.buf.len() < want {
        read_client(c, timeout, want - c.buf.len()).await?;
    }
    *body = Body::Buffered { len };
    c.used = want;
    Ok(())
}

/// Why sending the request failed.
pub enum SendFailure {
    /// The backend's side failed (before any response byte).
    Upstream(Failure),
    /// The client's.
    Client(ClientFailure),
}

/// Sends the request head `out` and the body to the backend.
pub async fn send_request(
    c: &mut Conn,
    up: &mut Upstream,
    body: &Body,
    out: &[u8],
    server: &ketama_config::model::ServerSection,
    write_timeout: Duration,
) -> Result<(), SendFailure> {
    let io = &mut up.io;
    let head_len = c.head.len;
    let upstream = |e: Failure| SendFailure::Upstream(e);
    match *body {
        Body::Empty => {
            c.used = head_len;
            write_all(io, &[out], write_timeout).await.map_err(upstream)
        }
        Body::Buffered { len } => {
            let b = &c.buf[head_len..head_len + len];
            write_all(io, &[out, b], write_timeout)
                .await
                .map_err(upstream)
        }
        Body::Streamed { len } => {
            let in_buf = ((c.buf.len() - head_len) as u64).min(len) as usize;
            let first = &c.buf[head_len..head_len + in_buf];
            write_all(io, &[out, first], write_timeout)
                .await
                .map_err(upstream)?;
            c.used = head_len + in_buf;
            let left = len - in_buf as u64;
            if left > 0 {
                continue_if_asked(c, Duration::from_millis(server.send_timeout_ms))
                    .await
                    .map_err(SendFailure::Client)?;
            }
            stream_length(c, io, left, server, write_timeout).await
        }
        Body::Chunked => {
            write_all(io, &[out], write_timeout)
                .await
                .map_err(upstream)?;
            c.used = head_len;
            continue_if_asked(c, Duration::from_millis(server.send_timeout_ms))
                .await
                .map_err(SendFailure::Client)?;
            stream_chunked(c, io, server, write_timeout).await
        }
    }
}

/// Streams `left` more bytes of a body of known length from the client.
async fn stream_length(
    c: &mut Conn,
    io: &mut UpstreamIo,
    mut left: u64,
    server: &ketama_config::model::ServerSection,
    write_timeout: Duration,
) -> Result<(), SendFailure> {
    let timeout = Duration::from_millis(server.client_body_timeout_ms);
    let mut bb = buffers::take();
    let result = async {
        while left > 0 {
            let want = (left as usize).min(server.body_buffer_bytes);
            bb.clear();
            bb.reserve(want);
            // Never more than the body: what follows it is the next request.
            let n = match tokio::time::timeout(
                timeout,
                (&mut c.io).take(want as u64).read_buf(&mut bb),
            )
            .await
            {
                Ok(Ok(0)) | Ok(Err(_)) => {
                    return Err(SendFailure::Client(ClientFailure::Disconnected))
                }
                Ok(Ok(n)) => n,
                Err(_) => return Err(SendFailure::Client(ClientFailure::TimedOut)),
            };
            left -= n as u64;
            write_all(io, &[&bb[..n]], write_timeout)
                .await
                .map_err(SendFailure::Upstream)?;
        }
        Ok(())
    }
    .await;
    buffers::give(bb);
    result
}

/// Streams a chunked body from the client, written chunked again.
async fn stream_chunked(
    c: &mut Conn,
    io: &mut UpstreamIo,
    server: &ketama_config::model::ServerSection,
    write_timeout: Duration,
) -> Result<(), SendFailure> {
    let timeout = Duration::from_millis(server.client_body_timeout_ms);
    let mut decoder = Chunked::default();
    let mut out = buffers::take();
    let result = async {
        loop {
            // What the buffer holds past what was used: decoded and
            // written; the rest (after the body's end) stays for the next
            // request.
            out.clear();
            let used = {
                let pending = &c.buf[c.used..];
                decoder
                    .feed(pending, |data| {
                        chunk_head(data.len(), &mut out);
                        out.extend_from_slice(data);
                        out.extend_from_slice(b"\r\n");
                    })
                    .map_err(|_| SendFailure::Client(ClientFailure::BadChunks))?
            };
            c.used += used;
            if decoder.done() {
                out.extend_from_slice(LAST_CHUNK);
            }
            if !out.is_empty() {
                write_all(io, &[&out], write_timeout)
                    .await
                    .map_err(SendFailure::Upstream)?;
            }
            if decoder.done() {
                return Ok(());
            }
            // Every byte past the head is used: read on, after the head
            // (kept for the record).
            c.buf.truncate(c.head.len);
            c.used = c.head.len;
            let want = server.body_buffer_bytes.min(64 * 1024);
            read_client(c, timeout, want)
                .await
                .map_err(SendFailure::Client)?;
        }
    }
    .await;
    buffers::give(out);
    result
}

/// Writes every byte of `parts` to the backend (vectored: one system call
/// when the socket takes them all), each write within `timeout`.
pub async fn write_all(
    io: &mut UpstreamIo,
    parts: &[&[u8]],
    timeout: Duration,
) -> Result<(), Failure> {
    within(timeout, super::io::write_parts(io, parts)).await?;
    within(timeout, io.flush()).await
}
