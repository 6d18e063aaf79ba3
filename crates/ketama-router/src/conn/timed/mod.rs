//! The deadlines of one client connection, enforced the way nginx does:
//!
//! - `client_header_timeout`: on HTTP/1.x the whole request head must
//!   arrive within it, counted from the accept (after the TLS handshake)
//!   or, on a kept-alive connection, from the next request's first byte;
//!   a head trickled a byte at a time is answered with a best-effort 408
//!   and closed. On HTTP/2 the connection preface and then each header
//!   block (a HEADERS frame and its CONTINUATIONs) must arrive within it,
//!   from its first byte; a late one closes the connection.
//! - `keepalive_timeout`: a kept-alive HTTP/1 connection waiting for its
//!   next request is closed once idle this long (a clean end of stream to
//!   Pingora). HTTP/2's idle time is Pingora's (no open stream).
//!
//! On HTTP/1 it also counts the head's bytes as they arrive: a head over
//! `server.max_header_bytes` is answered 431 and closed as soon as it
//! passes the limit, before Pingora buffers more of it (its own cap is
//! 1 MiB, answered 400). On HTTP/2 the decoded header list is capped by
//! the HTTP/2 layer instead (`SETTINGS_MAX_HEADER_LIST_SIZE`), since
//! HPACK makes the bytes on the wire say nothing of a head's size.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use pingora::protocols::{Stream, ALPN};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::h2scan::H2Scan;
use crate::reqline::Sent;

mod line;
mod passthrough;

pub use passthrough::SendTimedOut;

/// The limits of one connection.
#[derive(Clone, Copy, Debug)]
pub(super) struct Limits {
    /// Deadline for a request head.
    pub header_timeout: Duration,
    /// Idle time allowed between requests.
    pub keepalive_timeout: Duration,
    /// The largest request head, in bytes.
    pub max_head: usize,
    /// The longest wait for the client to take response bytes.
    pub send_timeout: Duration,
}

/// The HTTP/2 connection preface (RFC 9113 section 3.4).
pub(super) const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

const OPEN: u8 = 0;
const HEAD: u8 = 1;
const IDLE: u8 = 2;

/// Why the stream refused a head.
pub(super) const TIMED_OUT: u8 = 1;
pub(super) const TOO_LARGE: u8 = 2;
/// A request line nginx refuses (400), one with a major version over 1
/// (505), one longer than the head's limit (414).
pub(super) const BAD_LINE: u8 = 3;
pub(super) const BAD_VERSION: u8 = 4;
pub(super) const LINE_TOO_LONG: u8 = 5;

/// The response (best effort) and the error for each refusal.
fn refusal(why: u8) -> (&'static [u8], &'static str) {
    match why {
        TOO_LARGE => (
            b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            "the request head is over server.max_header_bytes",
        ),
        LINE_TOO_LONG => (
            b"HTTP/1.1 414 URI Too Long\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            "the request line is over server.max_header_bytes",
        ),
        BAD_LINE => (
            b"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            "a request line nginx refuses",
        ),
        BAD_VERSION => (
            b"HTTP/1.1 505 HTTP Version Not Supported\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            "an HTTP version other than 1.x",
        ),
        _ => (
            b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            "client_header_timeout: the request head did not arrive in time",
        ),
    }
}

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
    /// When the current or last request head began, nanoseconds after
    /// `base`: the accept for the first, its first byte for later ones.
    head_start_ns: AtomicU64,
    /// Why the connection's last head was refused, if it was.
    refused: AtomicU8,
    /// Connections in the head phase, of the whole service; this one
    /// counts in it while `in_head`.
    heads: Arc<crate::drain::Heads>,
    in_head: std::sync::atomic::AtomicBool,
    /// The target of the request being served, as sent, when Pingora's
    /// parser was handed another (see `line`): the proxy routes and
    /// forwards by it.
    sent: std::sync::Mutex<Option<Sent>>,
    /// Whether `sent` holds one: the usual request takes no lock.
    has_sent: std::sync::atomic::AtomicBool,
}

impl Drop for Clock {
    fn drop(&mut self) {
        if *self.in_head.get_mut() {
            self.heads.leave();
        }
    }
}

impl Clock {
    /// Why the connection's last head was refused (0: it was not).
    pub(super) fn refused(&self) -> u8 {
        self.refused.load(Relaxed)
    }

    pub(super) fn new(limits: Limits, heads: Arc<crate::drain::Heads>) -> Self {
        heads.enter();
        Clock {
            limits,
            phase: AtomicU8::new(HEAD),
            base: Instant::now(),
            deadline_ns: AtomicU64::new(limits.header_timeout.as_nanos() as u64),
            head_start_ns: AtomicU64::new(0),
            refused: AtomicU8::new(0),
            heads,
            in_head: std::sync::atomic::AtomicBool::new(true),
            sent: std::sync::Mutex::new(None),
            has_sent: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The target of the request being served as its client sent it, when
    /// it is not what Pingora's header holds (absolute-form, `#`, bytes
    /// Pingora would refuse); `None` for the usual request.
    pub fn take_sent(&self) -> Option<Sent> {
        if !self.has_sent.swap(false, Relaxed) {
            return None;
        }
        self.sent.lock().unwrap_or_else(|e| e.into_inner()).take()
    }

    fn set_sent(&self, sent: Option<Sent>) {
        if sent.is_none() && !self.has_sent.load(Relaxed) {
            return;
        }
        self.has_sent.store(sent.is_some(), Relaxed);
        *self.sent.lock().unwrap_or_else(|e| e.into_inner()) = sent;
    }

    fn set(&self, phase: u8, deadline: Option<Instant>) {
        let ns = deadline.map_or(0, |d| d.duration_since(self.base).as_nanos().max(1) as u64);
        self.deadline_ns.store(ns, Relaxed);
        self.phase.store(phase, Relaxed);
        let head = phase == HEAD;
        if head && ns > 0 {
            let timeout = self.limits.header_timeout.as_nanos() as u64;
            self.head_start_ns
                .store(ns.saturating_sub(timeout), Relaxed);
        }
        if self.in_head.swap(head, Relaxed) != head {
            if head {
                self.heads.enter();
            } else {
                self.heads.leave();
            }
        }
    }

    /// When the current (or last) request head began: the accept for a
    /// connection's first request, the first byte of later ones.
    pub fn head_started(&self) -> Instant {
        self.base + Duration::from_nanos(self.head_start_ns.load(Relaxed))
    }

    /// Between requests: the keep-alive deadline runs.
    pub(super) fn idle(&self) {
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
    /// Bytes read ahead (to choose the protocol, or to wait for the next
    /// request), served again first.
    replay: Vec<u8>,
    replayed: usize,
    /// The replayed bytes already went through the deadlines and the head
    /// scan (read by [`Timed::await_request`]): not scanned again.
    prescanned: bool,
    /// The replayed bytes are a pipelining client's next request, read by
    /// Pingora past the last one and not scanned yet.
    unscanned: bool,
    /// Where the head's scan is: before its request line, in it, past it.
    line: u8,
    /// HTTP/2's frame scanner, once the connection speaks HTTP/2.
    h2: Option<H2Scan>,
    /// The protocol chosen by the preface on a plain connection.
    alpn: Option<ALPN>,
    /// `send_timeout`: when the write the client is not taking started
    /// waiting, and its timer (made on the first such wait).
    send: Option<passthrough::SendWait>,
    send_waiting: bool,
}

impl std::fmt::Debug for Timed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timed").field("inner", &self.inner).finish()
    }
}

impl Timed {
    pub(super) fn new(inner: Stream, clock: Arc<Clock>) -> Self {
        Timed {
            inner,
            clock,
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
            armed_for: None,
            tail: [0; 3],
            head_bytes: 0,
            replay: Vec::new(),
            replayed: 0,
            prescanned: false,
            unscanned: false,
            line: 0,
            h2: None,
            alpn: None,
            send: None,
            send_waiting: false,
        }
    }

    /// Reads the connection's first bytes, under the head deadline, just
    /// far enough to tell the HTTP/2 preface from an HTTP/1 request line;
    /// they are read again afterwards. `Ok(true)`: the preface.
    pub(super) async fn sniff_preface(&mut self) -> io::Result<bool> {
        use tokio::io::AsyncReadExt;
        let deadline = tokio::time::Instant::now() + self.clock.limits.header_timeout;
        let mut buf = [0u8; 24];
        while self.replay.len() < H2_PREFACE.len() {
            let want = H2_PREFACE.len() - self.replay.len();
            let n = match tokio::time::timeout_at(deadline, self.inner.read(&mut buf[..want])).await
            {
                Ok(r) => r?,
                Err(_) => {
                    self.clock.refused.store(TIMED_OUT, Relaxed);
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "client_header_timeout",
                    ));
                }
            };
            if n == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            self.replay.extend_from_slice(&buf[..n]);
            if !H2_PREFACE.starts_with(&self.replay) {
                // HTTP/1: the bytes go through the head's scan in
                // await_request.
                self.unscanned = true;
                return Ok(false);
            }
        }
        self.alpn = Some(ALPN::H2);
        Ok(true)
    }

    /// From now on the connection speaks HTTP/2: its deadlines follow the
    /// frames (see the module docs).
    pub(super) fn speak_h2(&mut self) {
        self.h2 = Some(H2Scan::default());
    }

    /// Serves replayed bytes first; then the socket.
    fn poll_source(&mut self, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        if self.replayed < self.replay.len() {
            let rest = &self.replay[self.replayed..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            self.replayed += n;
            if self.replayed == self.replay.len() {
                self.replay = Vec::new();
                self.replayed = 0;
                self.prescanned = false;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }

    /// HTTP/2: moves the head deadline as header blocks open and close.
    fn on_h2_bytes(&mut self, new: &[u8]) {
        let Some(scan) = self.h2.as_mut() else { return };
        let was_open = scan.in_header();
        scan.feed(new);
        let open = scan.in_header();
        if open && !was_open {
            self.clock.set(
                HEAD,
                Some(Instant::now() + self.clock.limits.header_timeout),
            );
        } else if !open && self.clock.phase.load(Relaxed) != OPEN {
            self.clock.set(OPEN, None);
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
            // The request line starts at its first byte past any empty
            // lines, and ends at its LF.
            match (self.line, b) {
                (0, b'\r' | b'\n') => continue,
                (0, _) => self.line = 1,
                (1, b'\n') => self.line = 2,
                _ => {}
            }
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
        let (response, message) = refusal(why);
        if self.head_bytes > 0 && self.h2.is_none() {
            // If the socket takes it now, the client learns why.
            let _ = Pin::new(&mut self.inner).poll_write(cx, response);
        }
        Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, message)))
    }

    /// New bytes of a head (or the first of the next one, when idle):
    /// its deadline starts at its first byte, the end is found, and a head
    /// over the limit is refused (414 while still in its request line).
    fn on_head_bytes(&mut self, new: &[u8], phase: u8) -> Result<(), u8> {
        let mut phase = phase;
        if phase == IDLE {
            // The next request's first byte: its head's deadline starts.
            self.clock.set(
                HEAD,
                Some(Instant::now() + self.clock.limits.header_timeout),
            );
            self.tail = [0; 3];
            phase = HEAD;
        }
        if phase == HEAD {
            let (used, ended) = self.scan_head(new);
            self.head_bytes += used;
            if self.head_bytes > self.clock.limits.max_head {
                return Err(if self.line < 2 {
                    LINE_TOO_LONG
                } else {
                    TOO_LARGE
                });
            }
            if ended {
                self.clock.set(OPEN, None);
                self.head_bytes = 0;
                self.tail = [0; 3];
                self.line = 0;
            }
        }
        Ok(())
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
        if this.prescanned {
            // Read (and timed and scanned) by await_request already.
            return this.poll_source(cx, buf);
        }
        this.poll_scanned(cx, buf, true)
    }
}

impl Timed {
    /// A read under the deadlines and the head's scan: from the bytes read
    /// ahead first when `replay_first`, else from the socket.
    fn poll_scanned(
        &mut self,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
        replay_first: bool,
    ) -> Poll<io::Result<()>> {
        let this = self;
        let phase = this.clock.phase.load(Relaxed);
        let before = buf.filled().len();
        let polled = if replay_first {
            this.poll_source(cx, buf)
        } else {
            Pin::new(&mut this.inner).poll_read(cx, buf)
        };
        match polled {
            Poll::Ready(Ok(())) => {
                let new = &buf.filled()[before..];
                if this.h2.is_some() {
                    if !new.is_empty() {
                        this.on_h2_bytes(new);
                    }
                    return Poll::Ready(Ok(()));
                }
                if !new.is_empty() && phase != OPEN {
                    if let Err(why) = this.on_head_bytes(new, phase) {
                        return this.refuse(cx, why);
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
