//! One client connection on the engine: wait for a request (the
//! keep-alive deadline between requests, closed at a graceful stop),
//! read its head ([`crate::engine::request_head`], under
//! `client_header_timeout_ms` from its first byte, from the accept for a
//! connection's first), serve it ([`crate::engine::exchange`] with an
//! [`H1Client`]), then keep the connection or close it. A request
//! a client pipelined is read from what is left in the buffer, as nginx
//! serves them: in order, one at a time.
//!
//! What a connection holds between requests: while its client is busy
//! (its last request came within [`KEEP_WARM`] of the one before), its
//! task with the request's future kept for the next one, for up to
//! [`KEEP_WARM`] (a busy client allocates nothing per request); otherwise
//! no task at all: it is parked ([`super::park`]) as its socket and a few
//! words, and a task is made for it again when its next request's first
//! byte comes. No buffer either way (the request's goes back to the
//! thread's spares). A connection's first request, or one after a pause,
//! parks it at once: the many connections a burst of new clients opens
//! cost their tasks and futures only while they are served.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use super::park::{self, Idle, Parked};
use super::{linger, ClientConn, H1Client};
use crate::drain::Count;
use crate::engine::attempt::Client;
use crate::engine::exchange::{self, Exchanged};
use crate::engine::io::{Buffered, ReadError};
use crate::engine::record::Record;
use crate::engine::request_head::{Head, Reader, Refusal, Rules};
use crate::engine::{buffers, send, Engine};
use crate::state::RoutingState;

impl ClientConn {
    /// The connection, with nothing of a request, and its engine.
    fn new(client: Idle, buf: Vec<u8>) -> (ClientConn, Arc<Engine>) {
        let Idle {
            io,
            peer,
            since: _,
            engine,
            drain,
            open,
        } = client;
        let tls = io.is_tls();
        let c = ClientConn {
            io: Buffered::new(io, buf),
            peer,
            tls,
            head: Head::default(),
            drain,
            open,
        };
        (c, engine)
    }

    /// What it keeps while parked (its buffer given back), idle `since`
    /// then.
    fn into_idle(self, engine: Arc<Engine>, since: Instant) -> Idle {
        let (io, buf) = self.io.into_parts();
        buffers::give(buf);
        Idle {
            io,
            peer: self.peer,
            since,
            engine,
            drain: self.drain,
            open: self.open,
        }
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

/// How long a busy connection keeps its task and what its last request
/// used (the request's future and its head's field list) after it, for
/// its next request to reuse; and the gap between two requests under
/// which a connection counts as busy.
pub const KEEP_WARM: Duration = Duration::from_millis(100);

/// Serves a newly accepted connection until it closes or is parked.
/// `early`: bytes already read from it (its first, read to tell HTTP/2
/// from HTTP/1).
pub async fn serve(client: Idle, early: Vec<u8>) {
    run(client, Some(early)).await
}

/// A parked connection whose next request began: served on a task of its
/// own again.
fn resume(client: Idle) {
    tokio::spawn(run(client, None));
}

/// The connection's loop: from its accept (`early` is `Some`) or from a
/// resumed connection's next request.
async fn run(client: Idle, early: Option<Vec<u8>>) {
    // Resumed soon after its last request: a busy client.
    let mut busy = early.is_none() && client.since.elapsed() < KEEP_WARM;
    let (mut c, mut e) = ClientConn::new(client, early.unwrap_or_default());
    let mut reader = Reader::new();
    // A new connection's first head's deadline counts from its accept
    // (about now), a resumed one's from its first byte (about now too).
    let mut began = Instant::now();
    let mut first = true;
    // The request's future, boxed so that this loop stays small, and kept
    // for the next request while the client is busy, so that a busy
    // connection allocates none.
    let mut slot = None;
    // Reading a head from here: a new connection's first (whose deadline
    // counts from the accept), or a resumed one's next.
    let mut in_head = InHead::new(c.drain.heads.clone());
    loop {
        if !first {
            if c.io.pending().is_empty() {
                in_head.leave();
                match idle(c, e, &mut slot, &mut busy).await {
                    Some(back) => (c, e) = back,
                    None => return,
                }
                in_head.enter();
            }
            began = Instant::now();
        }
        first = false;
        let state = e.routing.state();
        let server = &state.validated.config.server;
        if !c.io.has_buf() {
            c.io.set_buf(buffers::take());
        }
        reader.reset();
        let deadline = began + Duration::from_millis(server.client_header_timeout_ms);
        if let Err(no) = read_head(&mut c, &mut reader, &Rules::of(server), deadline).await {
            // Boxed: rare, and its future must take no room in this one.
            let refuse = Box::pin(refuse(&e, &mut c, &state, no, reader.started(), began));
            refuse.await;
            return;
        }
        in_head.leave();
        let running = {
            // In a block: the request's future is moved into the box before
            // the `await`, and must take no room in this loop's future.
            let request = request(e.clone(), c, state, began);
            match slot.take() {
                Some(mut f) => {
                    Pin::set(&mut f, request);
                    slot.insert(f)
                }
                None => slot.insert(Box::pin(request)),
            }
        };
        let keep;
        (c, keep) = running.as_mut().await;
        if !keep {
            return;
        }
        if !c.io.pending().is_empty() {
            in_head.enter();
        }
    }
}

/// Serves the request whose head `c` holds; gives the connection back,
/// and whether it serves another request (closed, lingering or with
/// `close_notify`, when not). It takes the connection and the state by
/// value so that its future borrows nothing of its caller's: the
/// connection's loop keeps one such future's memory for the next request
/// while the client is busy.
async fn request(
    e: Arc<Engine>,
    mut c: ClientConn,
    state: Arc<RoutingState>,
    began: Instant,
) -> (ClientConn, bool) {
    let server = &state.validated.config.server;
    let mut r = Record::default();
    let mut client = H1Client::new(&mut c, server);
    let ended = exchange::exchange(&e, &mut client, &state, &mut r).await;
    // The connection's fate, as its answer (relayed or the router's own)
    // decided it when its head was written.
    let keep = ended != Exchanged::Gone && client.keep;
    // The client may still be sending a body nobody read: it gets the
    // answer before the close.
    let lingers = !keep && ended != Exchanged::Gone && !client.read_whole();
    r.end(
        &e,
        &state,
        &client.request(),
        client.c.peer.map(|p| p.client.ip()),
        began,
    );
    client.finish();
    if lingers {
        linger(&mut c).await;
    } else if !keep {
        send::close(c.io.io(), Duration::from_millis(server.send_timeout_ms)).await;
    }
    (c, keep)
}

/// Between two requests: gives the buffer back; when the client is
/// `busy`, waits [`KEEP_WARM`] for its next request with the last one's
/// memory kept (`slot`); then frees that and parks the connection. The
/// connection back when its next request began in this task (`busy`
/// then); `None` when it closed, idled out, the router is stopping, or it
/// was parked (a task of its own serves it again).
async fn idle<F>(
    mut c: ClientConn,
    e: Arc<Engine>,
    slot: &mut Option<Pin<Box<F>>>,
    busy: &mut bool,
) -> Option<(ClientConn, Arc<Engine>)> {
    buffers::give(c.io.take_buf());
    // Read now, not held while idle: an idle connection must not keep a
    // replaced routing state alive.
    let keepalive = e
        .routing
        .state()
        .validated
        .config
        .server
        .keepalive_timeout_ms;
    let keepalive = Duration::from_millis(keepalive);
    let since = Instant::now();
    if *busy {
        let warm = keepalive.min(KEEP_WARM);
        match wait_for_request(&mut c, warm).await {
            Wait::Request => return Some((c, e)),
            Wait::Close => return None,
            Wait::Quiet if warm == keepalive => return None,
            Wait::Quiet => {}
        }
    }
    *busy = false;
    *slot = None;
    c.head = Head::default();
    match park::park(c.into_idle(e, since), since + keepalive, resume) {
        Parked::Kept => None,
        Parked::Readable(client) => {
            *busy = true;
            Some(ClientConn::new(client, Vec::new()))
        }
        // Not parked here (another service's connections are parked on
        // this thread): it waits in its own task.
        Parked::Refused(client) => {
            let (mut c, e) = ClientConn::new(client, Vec::new());
            let left = keepalive.saturating_sub(since.elapsed());
            (wait_for_request(&mut c, left).await == Wait::Request).then_some((c, e))
        }
    }
}

/// A head that did not come whole: the client closed (nothing to do),
/// was too slow (408 when it had begun one) or sent one the reader
/// refused (its status, the request logged when its line was read, and a
/// lingering close).
async fn refuse(
    e: &Engine,
    c: &mut ClientConn,
    state: &RoutingState,
    no: NoHead,
    started: bool,
    began: Instant,
) {
    let send = Duration::from_millis(state.validated.config.server.send_timeout_ms);
    match no {
        NoHead::Closed => {}
        NoHead::TimedOut => {
            e.metrics.client_error("header_timeout");
            if started {
                let why = "client_header_timeout: the request head did not arrive in time";
                super::answer(c, 408, why, None, false, send).await;
            }
        }
        NoHead::Refused(refusal) => {
            e.metrics.client_error(refusal.reason);
            super::answer(c, refusal.status, refusal.why, None, false, send).await;
            // Refused after its request line: a request, logged.
            if c.head.method.end > 0 {
                let mut r = Record::default();
                r.status = refusal.status;
                let req = crate::engine::request::H1Request {
                    head: &c.head,
                    buf: c.io.buf(),
                    peer: c.peer,
                    tls: c.tls,
                };
                r.end(e, state, &req, c.peer.map(|p| p.client.ip()), began);
            }
            linger(c).await;
        }
    }
}

/// What came of waiting for the next request.
#[derive(PartialEq, Eq)]
enum Wait {
    /// Its first byte (or the client's close, which the read finds).
    Request,
    /// Nothing within the wait.
    Quiet,
    /// The router is stopping, or the client's socket failed.
    Close,
}

/// Waits up to `wait` for the next request's first byte, or for the
/// router's stop. Polled by hand: the connection's own read-readiness
/// slot, one timer and the stop's wake-up, in about 200 bytes.
async fn wait_for_request(c: &mut ClientConn, wait: Duration) -> Wait {
    let drain = c.drain.clone();
    let closing = drain.stopped();
    tokio::pin!(closing);
    let timer = tokio::time::sleep(wait);
    tokio::pin!(timer);
    std::future::poll_fn(|cx| {
        if closing.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Wait::Close);
        }
        if c.io.io().poll_idle(cx).is_ready() {
            return Poll::Ready(Wait::Request);
        }
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Wait::Quiet),
            Poll::Pending => Poll::Pending,
        }
    })
    .await
}

/// Reads until the head in `c`'s buffer is complete, by `deadline`; empty
/// lines before its request line are dropped as they come.
async fn read_head(
    c: &mut ClientConn,
    reader: &mut Reader,
    rules: &Rules<'_>,
    deadline: Instant,
) -> Result<(), NoHead> {
    loop {
        match reader.advance(c.io.buf(), &mut c.head, rules) {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(r) => return Err(NoHead::Refused(r)),
        }
        let blank = reader.blank();
        if blank > 0 {
            c.io.drop_front(blank);
            reader.dropped();
        }
        match c.io.read_more_until(1024, deadline).await {
            Ok(_) => {}
            Err(ReadError::Closed) => return Err(NoHead::Closed),
            Err(ReadError::TimedOut) => return Err(NoHead::TimedOut),
        }
    }
}

/// This connection's place among those reading a head (see
/// [`Drain::heads`](crate::drain::Drain::heads)): in it from the accept
/// and from a request's first byte, out of it while a request is served
/// and while idle.
struct InHead {
    heads: Arc<Count>,
    inside: bool,
}

impl InHead {
    /// In, from now.
    fn new(heads: Arc<Count>) -> Self {
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

impl Drop for InHead {
    fn drop(&mut self) {
        self.leave();
    }
}
