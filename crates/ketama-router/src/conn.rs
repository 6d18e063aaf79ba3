//! Client connections: how many may be open, and how long each may take
//! over its request head or sit idle between requests.
//!
//! Pingora's own timeouts apply per read, and its accept loop takes every
//! connection the kernel hands it. [`Guarded`] sits between the listener
//! and Pingora's HTTP proxy: it closes connections past
//! `server.max_connections` at once, and wraps each one in a [`Timed`]
//! stream that enforces two deadlines the way nginx does:
//!
//! - `client_header_timeout`: the whole request head must arrive within it,
//!   counted from the accept (or, on a kept-alive connection, from the next
//!   request's first byte). A head trickled a byte at a time is answered
//!   with a best-effort 408 and closed.
//! - `keepalive_timeout`: a kept-alive connection waiting for its next
//!   request is closed once idle this long (a clean end of stream to
//!   Pingora).
//!
//! It also counts the head's bytes as they arrive: a head over
//! `server.max_header_bytes` is answered 431 and closed as soon as it
//! passes the limit, before Pingora buffers more of it (its own cap is
//! 1 MiB, answered 400).
//!
//! The time between two reads of a request body (`client_body_timeout`) is
//! Pingora's per-read timeout, set by the proxy on each request.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use pingora::apps::{HttpServerApp, ServerApp};
use pingora::protocols::http::ServerSession;
use pingora::protocols::{
    GetProxyDigest, GetSocketDigest, GetTimingDigest, Peek, Shutdown, Ssl, Stream, UniqueID,
    UniqueIDType,
};
use pingora::server::ShutdownWatch;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::metrics::Metrics;
use crate::state::StateReader;

/// The limits of one connection.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// Deadline for a request head.
    header_timeout: Duration,
    /// Idle time allowed between requests.
    keepalive_timeout: Duration,
    /// The largest request head, in bytes.
    max_head: usize,
}

/// Pingora's HTTP proxy behind a connection limit and head/idle deadlines.
/// The limits are the current config's, read at each accept, so a reload
/// changes them for new connections.
pub struct Guarded<A> {
    inner: Arc<A>,
    /// The limit when the config sets none (derived from the file limit).
    default_max_connections: usize,
    open: AtomicUsize,
    /// Connections reading a request head now (see `cleanup`).
    heads: Arc<AtomicUsize>,
    /// The current limits.
    routing: StateReader,
    /// Refusals are counted here.
    metrics: Arc<Metrics>,
}

impl<A> Guarded<A> {
    /// Wraps an HTTP app.
    pub fn new(
        inner: A,
        default_max_connections: usize,
        routing: StateReader,
        metrics: Arc<Metrics>,
    ) -> Self {
        Guarded {
            inner: Arc::new(inner),
            default_max_connections,
            open: AtomicUsize::new(0),
            heads: Arc::new(AtomicUsize::new(0)),
            routing,
            metrics,
        }
    }

    /// Client connections open now.
    pub fn open(&self) -> usize {
        self.open.load(Relaxed)
    }
}

/// Gives a connection's slot back when it ends, however it ends.
struct Slot<'a>(&'a AtomicUsize);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Relaxed);
    }
}

#[async_trait]
impl<A: HttpServerApp + Send + Sync + 'static> ServerApp for Guarded<A> {
    async fn process_new(
        self: &Arc<Self>,
        stream: Stream,
        shutdown: &ShutdownWatch,
    ) -> Option<Stream> {
        let open = self.open.fetch_add(1, Relaxed) + 1;
        let _slot = Slot(&self.open);
        let state = self.routing.state();
        let server = &state.validated.config.server;
        let limits = Limits {
            header_timeout: Duration::from_millis(server.client_header_timeout_ms),
            keepalive_timeout: Duration::from_millis(server.keepalive_timeout_ms),
            max_head: server.max_header_bytes,
        };
        let max = server
            .max_connections
            .unwrap_or(self.default_max_connections);
        drop(state);
        if open > max {
            // Closed at once: the client sees the end of the connection
            // instead of a connection that hangs.
            self.metrics.client_error("connection_limit");
            return None;
        }
        let clock = Arc::new(Clock::new(limits, self.heads.clone()));
        let mut session = ServerSession::new_http1(Box::new(Timed::new(stream, clock.clone())));
        // The deadlines are the Timed stream's; Pingora's own idle timer
        // stays out of the way ("0": no timeout of its own).
        session.set_keepalive(if *shutdown.borrow() { None } else { Some(0) });
        let mut result = self.inner.process_new_http(session, shutdown).await;
        while let Some((stream, settings)) = result.map(|r| r.consume()) {
            let mut session = ServerSession::new_http1(stream);
            if let Some(settings) = settings {
                settings.apply_to_session(&mut session);
            }
            clock.idle();
            result = self.inner.process_new_http(session, shutdown).await;
        }
        match clock.refused.load(Relaxed) {
            TIMED_OUT => self.metrics.client_error("header_timeout"),
            TOO_LARGE => self.metrics.client_error("head_too_large"),
            _ => {}
        }
        None
    }

    /// At shutdown (after the listeners stopped accepting), Pingora aborts
    /// every connection still waiting for a request head. A connection
    /// accepted just before, whose request is on its way, would lose it:
    /// first let the heads being read arrive (at most 2 s), then abort the
    /// rest. This is what makes a graceful upgrade drop nothing.
    async fn cleanup(&self) {
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.heads.load(Relaxed) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        self.inner.http_cleanup().await;
    }
}

const OPEN: u8 = 0;
const HEAD: u8 = 1;
const IDLE: u8 = 2;

/// Why the stream refused a head.
const TIMED_OUT: u8 = 1;
const TOO_LARGE: u8 = 2;

/// Which deadline applies to a connection now, shared by the [`Timed`]
/// stream and the loop that serves its requests.
#[derive(Debug)]
pub struct Clock {
    limits: Limits,
    phase: AtomicU8,
    /// The connection's accept: deadlines are nanoseconds after it.
    base: Instant,
    /// The deadline of the current phase (0 while open).
    deadline_ns: AtomicU64,
    /// Why the connection's last head was refused, if it was.
    refused: AtomicU8,
    /// Connections in the head phase, of the whole service; this one
    /// counts in it while `in_head`.
    heads: Arc<AtomicUsize>,
    in_head: std::sync::atomic::AtomicBool,
}

impl Drop for Clock {
    fn drop(&mut self) {
        if *self.in_head.get_mut() {
            self.heads.fetch_sub(1, Relaxed);
        }
    }
}

impl Clock {
    fn new(limits: Limits, heads: Arc<AtomicUsize>) -> Self {
        heads.fetch_add(1, Relaxed);
        Clock {
            limits,
            phase: AtomicU8::new(HEAD),
            base: Instant::now(),
            deadline_ns: AtomicU64::new(limits.header_timeout.as_nanos() as u64),
            refused: AtomicU8::new(0),
            heads,
            in_head: std::sync::atomic::AtomicBool::new(true),
        }
    }

    fn set(&self, phase: u8, deadline: Option<Instant>) {
        let ns = deadline.map_or(0, |d| d.duration_since(self.base).as_nanos().max(1) as u64);
        self.deadline_ns.store(ns, Relaxed);
        self.phase.store(phase, Relaxed);
        let head = phase == HEAD;
        if self.in_head.swap(head, Relaxed) != head {
            if head {
                self.heads.fetch_add(1, Relaxed);
            } else {
                self.heads.fetch_sub(1, Relaxed);
            }
        }
    }

    /// Between requests: the keep-alive deadline runs.
    fn idle(&self) {
        self.set(IDLE, Some(Instant::now() + self.limits.keepalive_timeout));
    }

    fn deadline(&self) -> Option<Instant> {
        match self.deadline_ns.load(Relaxed) {
            0 => None,
            ns => Some(self.base + Duration::from_nanos(ns)),
        }
    }
}

/// A client stream under a [`Clock`]'s deadlines; see the module docs.
pub struct Timed {
    inner: Stream,
    clock: Arc<Clock>,
    sleep: Pin<Box<tokio::time::Sleep>>,
    armed_for: Option<Instant>,
    /// The last bytes of the head read so far, to find its end across
    /// reads.
    tail: [u8; 3],
    /// Bytes of the current head read so far (a timeout after the first
    /// is answered with a 408).
    head_bytes: usize,
}

impl std::fmt::Debug for Timed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timed").field("inner", &self.inner).finish()
    }
}

impl Timed {
    fn new(inner: Stream, clock: Arc<Clock>) -> Self {
        Timed {
            inner,
            clock,
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
            armed_for: None,
            tail: [0; 3],
            head_bytes: 0,
        }
    }

    /// Looks for the end of the head (`CRLF CRLF`, or `LF LF` which
    /// Pingora's parser also accepts) in newly read bytes; returns how many
    /// of them belong to the head, and whether it ended.
    fn scan_head(&mut self, new: &[u8]) -> (usize, bool) {
        let mut window = [0u8; 4];
        window[..3].copy_from_slice(&self.tail);
        for (i, &b) in new.iter().enumerate() {
            window.copy_within(1..4, 0);
            window[3] = b;
            if &window == b"\r\n\r\n" || &window[2..] == b"\n\n" {
                return (i + 1, true);
            }
        }
        self.tail.copy_from_slice(&window[1..4]);
        (new.len(), false)
    }

    /// Refuses the head: a best-effort response if the client sent any of
    /// it, then an error that closes the connection.
    fn refuse(&mut self, cx: &mut Context<'_>, why: u8) -> Poll<io::Result<()>> {
        self.clock.set(OPEN, None);
        self.clock.refused.store(why, Relaxed);
        let (response, message): (&[u8], &str) = if why == TOO_LARGE {
            (
                b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                "the request head is over server.max_header_bytes",
            )
        } else {
            (
                b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
                "client_header_timeout: the request head did not arrive in time",
            )
        };
        if self.head_bytes > 0 {
            // If the socket takes it now, the client learns why.
            let _ = Pin::new(&mut self.inner).poll_write(cx, response);
        }
        Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, message)))
    }

    fn expire(&mut self, cx: &mut Context<'_>, phase: u8) -> Poll<io::Result<()>> {
        if phase == IDLE {
            // Idle too long: a clean end of stream, as if the client left.
            self.clock.set(OPEN, None);
            return Poll::Ready(Ok(()));
        }
        self.refuse(cx, TIMED_OUT)
    }
}

impl AsyncRead for Timed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        let phase = this.clock.phase.load(Relaxed);
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let new = &buf.filled()[before..];
                if !new.is_empty() && phase != OPEN {
                    let mut phase = phase;
                    if phase == IDLE {
                        // The next request's first byte: its head's deadline starts.
                        this.clock.set(
                            HEAD,
                            Some(Instant::now() + this.clock.limits.header_timeout),
                        );
                        this.tail = [0; 3];
                        phase = HEAD;
                    }
                    if phase == HEAD {
                        let (used, ended) = this.scan_head(new);
                        this.head_bytes += used;
                        if this.head_bytes > this.clock.limits.max_head {
                            return this.refuse(cx, TOO_LARGE);
                        }
                        if ended {
                            this.clock.set(OPEN, None);
                            this.head_bytes = 0;
                            this.tail = [0; 3];
                        }
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Pending => {
                if phase == OPEN {
                    return Poll::Pending;
                }
                let Some(d) = this.clock.deadline() else {
                    return Poll::Pending;
                };
                // The timer is re-armed only when the deadline moved earlier
                // than it, or when it fires before the deadline: on a busy
                // kept-alive connection, whose deadlines keep moving later,
                // that is once per timeout period, not once per request.
                loop {
                    if this.armed_for.is_none_or(|a| a > d) {
                        this.sleep.as_mut().reset(tokio::time::Instant::from_std(d));
                        this.armed_for = Some(d);
                    }
                    match this.sleep.as_mut().poll(cx) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(()) if Instant::now() >= d => return this.expire(cx, phase),
                        Poll::Ready(()) => this.armed_for = None,
                    }
                }
            }
            other => other,
        }
    }
}

impl AsyncWrite for Timed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[async_trait]
impl Shutdown for Timed {
    async fn shutdown(&mut self) {
        self.inner.shutdown().await
    }
}

impl UniqueID for Timed {
    fn id(&self) -> UniqueIDType {
        self.inner.id()
    }
}

/// Plain TCP: no TLS to report.
impl Ssl for Timed {}

impl GetTimingDigest for Timed {
    fn get_timing_digest(&self) -> Vec<Option<pingora::protocols::TimingDigest>> {
        self.inner.get_timing_digest()
    }

    fn get_read_pending_time(&self) -> Duration {
        self.inner.get_read_pending_time()
    }

    fn get_write_pending_time(&self) -> Duration {
        self.inner.get_write_pending_time()
    }
}

impl GetProxyDigest for Timed {
    fn get_proxy_digest(&self) -> Option<Arc<pingora::protocols::raw_connect::ProxyDigest>> {
        self.inner.get_proxy_digest()
    }

    fn set_proxy_digest(&mut self, digest: pingora::protocols::raw_connect::ProxyDigest) {
        self.inner.set_proxy_digest(digest)
    }
}

impl GetSocketDigest for Timed {
    fn get_socket_digest(&self) -> Option<Arc<pingora::protocols::SocketDigest>> {
        self.inner.get_socket_digest()
    }

    fn set_socket_digest(&mut self, digest: pingora::protocols::SocketDigest) {
        self.inner.set_socket_digest(digest)
    }
}

#[async_trait]
impl Peek for Timed {
    async fn try_peek(&mut self, buf: &mut [u8]) -> io::Result<bool> {
        self.inner.try_peek(buf).await
    }
}
