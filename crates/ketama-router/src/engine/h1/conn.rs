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
            drain,
            open,
        };
        (c, engine)
    }

    /// A buffer from the thread's spares for the next request's head,
    /// unless it holds one (a new connection's first bytes, pipelined
    /// bytes). With [`Self::return_buffer`], the only places a
    /// connection's buffer comes and goes.
    fn lend_buffer(&mut self) {
        if !self.io.has_buf() {
            self.io.set_buf(buffers::take());
        }
    }

    /// Its buffer back to the thread's spares: an idle connection holds
    /// none.
    fn return_buffer(&mut self) {
        buffers::give(self.io.take_buf());
    }

    /// What it keeps while parked (no buffer), idle `since` then.
    fn into_idle(mut self, engine: Arc<Engine>, since: Instant) -> Idle {
        self.return_buffer();
        let (io, _) = self.io.into_parts();
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
/// `sniffed`: bytes already read from it (its first, read to tell HTTP/2
/// from HTTP/1).
pub async fn serve(client: Idle, sniffed: Vec<u8>) {
    run(client, Some(sniffed)).await
}

/// A parked connection whose next request began: served on a task of its
/// own again.
fn resume(client: Idle) {
    tokio::spawn(run(client, None));
}

/// The connection's loop: from its accept (`sniffed` is `Some`) or from a
/// resumed connection's next request.
async fn run(client: Idle, sniffed: Option<Vec<u8>>) {
    // Resumed soon after its last request: a busy client.
    let mut busy = sniffed.is_none() && client.since.elapsed() < KEEP_WARM;
    let (mut c, mut e) = ClientConn::new(client, sniffed.unwrap_or_default());
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
    // The request's head, its field list kept from request to request
    // while the client is busy.
    let mut head = Head::default();
    loop {
        if !first {
            if c.io.pending().is_empty() {
                in_head.leave();
                match idle(c, e, &mut slot, &mut busy, &mut head).await {
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
        c.lend_buffer();
        reader.reset();
        let deadline = began + Duration::from_millis(server.client_header_timeout_ms);
        let read = read_head(&mut c, &mut head, &mut reader, &Rules::of(server), deadline).await;
        if let Err(no) = read {
            // Boxed: rare, and its future must take no room in this one.
            let refuse = Box::pin(refuse(
                &e,
                &mut c,
                &head,
                &state,
                no,
                reader.started(),
                began,
            ));
            refuse.await;
            return;
        }
        in_head.leave();
        let running = {
            // In a block: the request's future is moved into the box before
            // the `await`, and must take no room in this loop's future.
            let request = request(e.clone(), c, head, state, began);
            match slot.take() {
                Some(mut f) => {
                    Pin::set(&mut f, request);
                    slot.insert(f)
                }
                None => slot.insert(Box::pin(request)),
            }
        };
        let keep;
        (c, head, keep) = running.as_mut().await;
        if !keep {
            return;
        }
        if !c.io.pending().is_empty() {
            in_head.enter();
        }
    }
}

/// Serves the request `head` (read into `c`'s buffer); gives the
/// connection and the head back, and whether the connection serves
/// another request (closed, lingering or with `close_notify`, when not).
/// It takes the connection, the head and the state by value so that its
/// future borrows nothing of its caller's: the connection's loop keeps
/// one such future's memory for the next request while the client is
/// busy.
async fn request(
    e: Arc<Engine>,
    mut c: ClientConn,
    head: Head,
    state: Arc<RoutingState>,
    began: Instant,
) -> (ClientConn, Head, bool) {
    let server = &state.validated.config.server;
    let mut r = Record::default();
    let mut client = H1Client::new(&mut c, &head, server);
    let ended = exchange::exchange(&e, &mut client, &state, &mut r).await;
    // The connection's fate, as its answer (relayed or the router's own)
    // said when its head was written.
    let keep = ended != Exchanged::Gone && client.kept();
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
    (c, head, keep)
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
    head: &mut Head,
) -> Option<(ClientConn, Arc<Engine>)> {
    c.return_buffer();
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
    *head = Head::default();
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
/// refused (answered as [`exchange::refuse`] answers, either protocol;
/// the request logged when its line was read, and a lingering close).
async fn refuse(
    e: &Engine,
    c: &mut ClientConn,
    head: &Head,
    state: &RoutingState,
    no: NoHead,
    started: bool,
    began: Instant,
) {
    let server = &state.validated.config.server;
    match no {
        NoHead::Closed => {}
        NoHead::TimedOut => {
            e.metrics.client_error("header_timeout");
            if started {
                let why = "client_header_timeout: the request head did not arrive in time";
                H1Client::new(c, head, server).answer(408, why, None).await;
            }
        }
        NoHead::Refused(refusal) => {
            let mut r = Record::default();
            let mut client = H1Client::new(c, head, server);
            exchange::refuse(e, &mut client, &mut r, &refusal).await;
            // Refused after its request line: a request, logged.
            if head.method.end > 0 {
                let peer = client.c.peer.map(|p| p.client.ip());
                r.end(e, state, &client.request(), peer, began);
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

/// Reads until `head`, in `c`'s buffer, is complete, by `deadline`; empty
/// lines before its request line are dropped as they come.
async fn read_head(
    c: &mut ClientConn,
    head: &mut Head,
    reader: &mut Reader,
    rules: &Rules<'_>,
    deadline: Instant,
) -> Result<(), NoHead> {
    loop {
        match reader.advance(c.io.buf(), head, rules) {
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
