//! One client connection on the engine: wait for a request (the
//! keep-alive deadline between requests, closed at a graceful stop),
//! read its head ([`super::head`], under `client_header_timeout_ms` from
//! its first byte, from the accept for a connection's first), serve it
//! ([`super::exchange`]), then keep the connection or close it. A request
//! a client pipelined is read from what is left in the buffer, as nginx
//! serves them: in order, one at a time.
//!
//! What an idle connection holds: its socket, this small state, and no
//! buffer (the request's goes back to the thread's spares).

use std::net::IpAddr;
use std::time::{Duration, Instant};

use tokio::io::AsyncReadExt;

use super::head::{Head, Reader, Refusal};
use super::io::ClientIo;
use super::{buffers, exchange, reply, Engine};
use crate::drain::{Drain, Heads};

/// A client connection's state between and during its requests.
pub struct Conn<'s> {
    /// The connection.
    pub io: ClientIo,
    /// The client's address.
    pub peer: Option<IpAddr>,
    /// Whether it came over TLS.
    pub tls: bool,
    /// What was read and not yet served: the current request's head at
    /// the start, then what follows it.
    pub buf: Vec<u8>,
    /// Bytes of `buf` the current request used.
    pub used: usize,
    /// The current request's head.
    pub head: Head,
    /// `100 Continue` was sent for the current request.
    pub continued: bool,
    drain: &'s Drain,
}

impl Conn<'_> {
    /// Whether the router is stopping: answers close their connections.
    pub fn closing(&self) -> bool {
        self.drain.is_closing()
    }
}

/// Why no head was read.
enum NoHead {
    /// The client closed or failed (before or within a head).
    Closed,
    /// The head did not arrive within its deadline.
    TimedOut,
    /// It was refused.
    Refused(Refusal),
}

/// Serves the connection until it closes. `early`: bytes already read
/// from it (its first, read to tell HTTP/2 from HTTP/1).
pub async fn serve(e: &Engine, io: ClientIo, peer: Option<IpAddr>, early: Vec<u8>, stop: &Drain) {
    let tls = io.is_tls();
    let mut c = Conn {
        io,
        peer,
        tls,
        buf: early,
        used: 0,
        head: Head::default(),
        continued: false,
        drain: stop,
    };
    let mut reader = Reader::new(1024);
    let accepted = Instant::now();
    let mut first = true;
    // The accept counts as the first head's start (the guard entered it).
    let mut in_head = InHead::new(&stop.heads);
    loop {
        let state = e.routing.state();
        let server = &state.validated.config.server;
        let header_timeout = Duration::from_millis(server.client_header_timeout_ms);
        let began;
        if first {
            began = accepted;
        } else {
            if c.buf.is_empty() {
                in_head.leave();
                // Idle: the buffer goes back to the spares.
                buffers::give(std::mem::take(&mut c.buf));
                let keepalive = Duration::from_millis(server.keepalive_timeout_ms);
                if !wait_for_request(&c, keepalive, stop).await {
                    return;
                }
                in_head.enter();
            }
            began = Instant::now();
        }
        if c.buf.capacity() == 0 {
            c.buf = buffers::take();
        }
        reader.reset(server.max_header_bytes);
        let deadline = began + header_timeout;
        match read_head(&mut c, &mut reader, deadline).await {
            Ok(()) => {}
            Err(NoHead::Closed) => return,
            Err(NoHead::TimedOut) => {
                e.metrics.client_error("header_timeout");
                if reader.started() {
                    let send = Duration::from_millis(server.send_timeout_ms);
                    let why = "client_header_timeout: the request head did not arrive in time";
                    reply::error(&mut c, 408, why, None, false, send).await;
                }
                return;
            }
            Err(NoHead::Refused(r)) => {
                e.metrics.client_error(r.reason);
                let send = Duration::from_millis(server.send_timeout_ms);
                reply::error(&mut c, r.status, r.why, None, false, send).await;
                // Refused after its request line: a request, logged.
                if c.head.method.end > 0 {
                    exchange::record_refused(e, &c, &state, began, r.status);
                }
                reply::linger(&mut c).await;
                return;
            }
        }
        in_head.leave();
        first = false;
        c.used = c.head.len;
        c.continued = false;
        let keep = exchange::exchange(e, &mut c, &state, began).await;
        drop(state);
        if !keep {
            return;
        }
        // What the request used goes; pipelined bytes move to the front.
        let used = c.used.min(c.buf.len());
        c.buf.drain(..used);
        c.used = 0;
        if !c.buf.is_empty() {
            in_head.enter();
        }
    }
}

/// Waits for the next request's first byte: `false` when the connection
/// should close instead (the client left, idled out, or the router is
/// stopping).
async fn wait_for_request(c: &Conn<'_>, keepalive: Duration, stop: &Drain) -> bool {
    let closing = stop.close_idle.notified();
    tokio::pin!(closing);
    closing.as_mut().enable();
    if stop.is_closing() {
        return false;
    }
    tokio::select! {
        biased;
        r = tokio::time::timeout(keepalive, c.io.readable()) => matches!(r, Ok(Ok(()))),
        () = closing => false,
    }
}

/// Reads until the head in `c.buf` is complete, by `deadline`.
async fn read_head(c: &mut Conn<'_>, reader: &mut Reader, deadline: Instant) -> Result<(), NoHead> {
    loop {
        match reader.advance(&c.buf, &mut c.head) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(r) => return Err(NoHead::Refused(r)),
        }
        if c.buf.capacity() - c.buf.len() < 1024 {
            c.buf.reserve(4096);
        }
        let read = tokio::time::timeout_at(deadline.into(), c.io.read_buf(&mut c.buf));
        match read.await {
            Ok(Ok(0)) | Ok(Err(_)) => return Err(NoHead::Closed),
            Ok(Ok(_)) => {}
            Err(_) => return Err(NoHead::TimedOut),
        }
    }
}

/// This connection's place among those reading a head (see
/// [`Heads`]): in it from the accept and from a request's first byte,
/// out of it while a request is served and while idle.
struct InHead<'a> {
    heads: &'a Heads,
    inside: bool,
}

impl<'a> InHead<'a> {
    /// In, from now.
    fn new(heads: &'a Heads) -> Self {
        heads.enter();
        InHead {
            heads,
            inside: true,
        }
    }

    fn enter(&mut self) {
        if !self.inside {
            self.heads.enter();
            self.inside = true;
        }
    }

    fn leave(&mut self) {
        if self.inside {
            self.heads.leave();
            self.inside = false;
        }
    }
}

impl Drop for InHead<'_> {
    fn drop(&mut self) {
        self.leave();
    }
}
