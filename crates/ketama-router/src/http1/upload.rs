//! Sending a request to a backend: its head, then its body (written from
//! the connection's buffer when read whole, else streamed from the client
//! as it comes, chunked bodies chunked again), while watching the backend.
//!
//! **A backend may answer before the body is all sent** (RFC 9110 section
//! 15: a server can refuse an upload, say 413, as soon as it sees the
//! head). Whatever the backend sends while the router writes to it, or
//! while the router waits for the client's next body bytes, is read into
//! the response buffer; once a final response head is there, the rest of
//! the body is not sent and the response is relayed (the client's
//! connection then closes: its body was not read to its end). An interim
//! `1xx` is dropped and the upload goes on. A write the backend refuses
//! (it closed or reset the connection after answering) is followed by a
//! read of what it answered. This is the one place the router goes
//! beyond nginx on purpose: nginx reads the whole body before it connects,
//! and answers 502 when a backend closes while the body is sent.
//!
//! What counts against the backend ([`crate::policy`]): a failure while
//! the router writes to it; not its close while the router was waiting
//! for the client's body ([`Stage::Upload`]: a slow client's upload that
//! the backend gave up on is not the backend failing).

use std::future::poll_fn;
use std::io::IoSlice;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};

use super::buffers;
use super::chunked::{chunk_head, Chunked, LAST_CHUNK};
use super::conn::Conn;
use super::io::UpstreamIo;
use super::relay::{Body, ClientFailure};
use super::response::ResponseHead;
use super::upstream::Upstream;
use crate::policy::{Failure, Stage};

/// What sending the request came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// All of it: the response is awaited.
    Whole,
    /// The backend answered before the body was all sent: a final
    /// response head is in the response buffer, the rest of the body was
    /// not sent, and neither connection serves another request.
    Answered,
}

/// Why sending the request failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendFailure {
    /// The backend's side failed, at this stage, before it answered.
    Upstream(Stage, Failure),
    /// The client's.
    Client(ClientFailure),
}

/// What the backend sent while the request was being sent: the response
/// buffer and its head's reader.
pub struct Watch<'a> {
    /// The response buffer.
    pub rb: &'a mut Vec<u8>,
    /// The response head read from it.
    pub head: &'a mut ResponseHead,
}

impl Watch<'_> {
    /// Reads what the backend sent: `Ready(Ok)` once a final response
    /// head is whole in the buffer (interim `1xx` heads dropped),
    /// `Ready(Err)` when the backend closed or failed before that, else
    /// `Pending` (the task is woken when the backend sends). Free while
    /// the backend sends nothing: the reactor's readiness is looked at, no
    /// system call made. (Under TLS, plaintext rustls already holds is
    /// read with the response head instead, once the body is sent.)
    fn poll(&mut self, io: &mut UpstreamIo, cx: &mut Context<'_>) -> Poll<Result<(), Failure>> {
        loop {
            // The reactor's word first: nothing arrived, nothing to read.
            if io.tcp().poll_read_ready(cx).is_pending() {
                return Poll::Pending;
            }
            let at = self.rb.len();
            self.rb.resize(at + 4096, 0);
            let mut buf = ReadBuf::new(&mut self.rb[at..]);
            let read = Pin::new(&mut *io).poll_read(cx, &mut buf);
            let n = buf.filled().len();
            self.rb.truncate(at + n);
            match read {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(_)) => return Poll::Ready(Err(Failure::Broken)),
                Poll::Ready(Ok(())) if n == 0 => return Poll::Ready(Err(Failure::Broken)),
                Poll::Ready(Ok(())) => {}
            }
            loop {
                match self.head.parse(self.rb) {
                    Ok(true)
                        if (100..200).contains(&self.head.status) && self.head.status != 101 =>
                    {
                        self.rb.drain(..self.head.len);
                        self.head.restart();
                    }
                    Ok(true) => return Poll::Ready(Ok(())),
                    Ok(false) => break,
                    Err(_) => return Poll::Ready(Err(Failure::BadResponse)),
                }
            }
            if self.rb.len() > super::respond::MAX_RESPONSE_HEAD {
                return Poll::Ready(Err(Failure::BadResponse));
            }
        }
    }

    /// After a write the backend refused: what it answered before, read
    /// until it closed (within `timeout`).
    async fn after_refused_write(
        &mut self,
        io: &mut UpstreamIo,
        timeout: Duration,
        failure: Failure,
    ) -> Result<Sent, SendFailure> {
        let answered = tokio::time::timeout(timeout, poll_fn(|cx| self.poll(io, cx))).await;
        match answered {
            Ok(Ok(())) => Ok(Sent::Answered),
            _ => Err(SendFailure::Upstream(Stage::AwaitingHead, failure)),
        }
    }
}

/// Writes every byte of `parts` to the backend (vectored: one system call
/// when the socket takes them all, then a flush for TLS), within
/// `timeout`, while watching what it sends (see the module docs).
async fn write_watching(
    io: &mut UpstreamIo,
    w: &mut Watch<'_>,
    parts: &[&[u8]],
    timeout: Duration,
) -> Result<Sent, SendFailure> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut done = 0usize;
    let mut refused = None;
    // The backend is watched only while a write waits: bytes it sent
    // before a write that goes through are read with the response.
    let written = poll_fn(|cx| loop {
        if done == total {
            return match Pin::new(&mut *io).poll_flush(cx) {
                Poll::Ready(Ok(())) => Poll::Ready(Ok(Sent::Whole)),
                Poll::Ready(Err(_)) => {
                    refused = Some(Failure::Broken);
                    Poll::Ready(Err(Failure::Broken))
                }
                Poll::Pending => match w.poll(io, cx) {
                    Poll::Ready(r) => Poll::Ready(r.map(|()| Sent::Answered)),
                    Poll::Pending => Poll::Pending,
                },
            };
        }
        let mut slices = [IoSlice::new(&[]); 4];
        let (mut n, mut passed) = (0, 0);
        for p in parts {
            if passed + p.len() > done && n < slices.len() {
                slices[n] = IoSlice::new(&p[done.saturating_sub(passed)..]);
                n += 1;
            }
            passed += p.len();
        }
        match Pin::new(&mut *io).poll_write_vectored(cx, &slices[..n]) {
            Poll::Ready(Ok(k)) if k > 0 => done += k,
            Poll::Ready(_) => {
                refused = Some(Failure::Broken);
                return Poll::Ready(Err(Failure::Broken));
            }
            Poll::Pending => {
                return match w.poll(io, cx) {
                    Poll::Ready(r) => Poll::Ready(r.map(|()| Sent::Answered)),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    });
    match tokio::time::timeout(timeout, written).await {
        Ok(Ok(sent)) => Ok(sent),
        Ok(Err(f)) if refused.is_some() => w.after_refused_write(io, timeout, f).await,
        Ok(Err(f)) => Err(SendFailure::Upstream(Stage::AwaitingHead, f)),
        Err(_) => Err(SendFailure::Upstream(Stage::AwaitingHead, Failure::Timeout)),
    }
}

/// Reads more of the client's body into `into` (at most `want` bytes),
/// within `timeout`, while watching the backend: `Ok(None)` when the
/// backend answered meanwhile.
async fn read_client_watching(
    c: &mut Conn,
    into: &mut Vec<u8>,
    want: usize,
    timeout: Duration,
    io: &mut UpstreamIo,
    w: &mut Watch<'_>,
) -> Result<Option<usize>, SendFailure> {
    into.reserve(want.max(1));
    let mut limited = (&mut c.io).take(want as u64);
    let read = tokio::time::timeout(timeout, limited.read_buf(into));
    tokio::select! {
        biased;
        r = poll_fn(|cx| w.poll(io, cx)) => match r {
            Ok(()) => Ok(None),
            // It closed while the router waited for the client.
            Err(f) => Err(SendFailure::Upstream(Stage::Upload, f)),
        },
        r = read => match r {
            Ok(Ok(0)) | Ok(Err(_)) => Err(SendFailure::Client(ClientFailure::Disconnected)),
            Ok(Ok(n)) => Ok(Some(n)),
            Err(_) => Err(SendFailure::Client(ClientFailure::TimedOut)),
        },
    }
}

/// Sends the request head `out` and the body to the backend, watching
/// it (see the module docs); what it sends goes to `w`.
pub async fn send_request(
    c: &mut Conn,
    up: &mut Upstream,
    body: &Body,
    out: &[u8],
    w: &mut Watch<'_>,
    server: &ketama_config::model::ServerSection,
    write_timeout: Duration,
) -> Result<Sent, SendFailure> {
    let io = &mut up.io;
    let head_len = c.head.len;
    match *body {
        Body::Empty => {
            c.used = head_len;
            write_watching(io, w, &[out], write_timeout).await
        }
        Body::Buffered { len } => {
            let b = &c.buf[head_len..head_len + len];
            write_watching(io, w, &[out, b], write_timeout).await
        }
        Body::Streamed { len } => {
            let in_buf = ((c.buf.len() - head_len) as u64).min(len) as usize;
            let first = &c.buf[head_len..head_len + in_buf];
            let sent = write_watching(io, w, &[out, first], write_timeout).await?;
            c.used = head_len + in_buf;
            if sent == Sent::Answered {
                return Ok(sent);
            }
            let left = len - in_buf as u64;
            stream_length(c, io, w, left, server, write_timeout).await
        }
        Body::Chunked => {
            if write_watching(io, w, &[out], write_timeout).await? == Sent::Answered {
                return Ok(Sent::Answered);
            }
            c.used = head_len;
            stream_chunked(c, io, w, server, write_timeout).await
        }
    }
}

/// Streams `left` more bytes of a body of known length from the client.
async fn stream_length(
    c: &mut Conn,
    io: &mut UpstreamIo,
    w: &mut Watch<'_>,
    mut left: u64,
    server: &ketama_config::model::ServerSection,
    write_timeout: Duration,
) -> Result<Sent, SendFailure> {
    let timeout = Duration::from_millis(server.client_body_timeout_ms);
    let mut bb = buffers::take();
    let result = async {
        while left > 0 {
            let want = (left as usize).min(server.body_buffer_bytes);
            bb.clear();
            // Never more than the body: what follows it is the next request.
            let Some(n) = read_client_watching(c, &mut bb, want, timeout, io, w).await? else {
                return Ok(Sent::Answered);
            };
            left -= n as u64;
            if write_watching(io, w, &[&bb[..n]], write_timeout).await? == Sent::Answered {
                return Ok(Sent::Answered);
            }
        }
        Ok(Sent::Whole)
    }
    .await;
    buffers::give(bb);
    result
}

/// Streams a chunked body from the client, written chunked again.
async fn stream_chunked(
    c: &mut Conn,
    io: &mut UpstreamIo,
    w: &mut Watch<'_>,
    server: &ketama_config::model::ServerSection,
    write_timeout: Duration,
) -> Result<Sent, SendFailure> {
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
            if !out.is_empty()
                && write_watching(io, w, &[&out], write_timeout).await? == Sent::Answered
            {
                return Ok(Sent::Answered);
            }
            if decoder.done() {
                return Ok(Sent::Whole);
            }
            // Every byte past the head is used: read on, after the head
            // (kept for the record).
            c.buf.truncate(c.head.len);
            c.used = c.head.len;
            let want = server.body_buffer_bytes.min(64 * 1024);
            let mut more = std::mem::take(&mut c.buf);
            let read = read_client_watching(c, &mut more, want, timeout, io, w).await;
            c.buf = more;
            if read?.is_none() {
                return Ok(Sent::Answered);
            }
        }
    }
    .await;
    buffers::give(out);
    result
}
