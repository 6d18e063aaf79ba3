//! HTTP/1 clients: a connection's loop ([`conn`]), its idle keeping
//! ([`park`]), the tunnel after a `101` ([`tunnel`]), and the client's
//! side of each request's exchange ([`H1Client`]): its body read from
//! the connection's buffer, its response written with the connection's
//! fate decided in one place ([`H1Client::keep_alive`]), the router's own
//! answers, and the lingering close nginx does.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use ketama_config::model::ServerSection;

use super::attempt::{Client, ClientFailure, Respond, SMALL_BODY};
use super::body::Framing;
use super::buffers;
use super::copy::{BodyError, BodySource, Flow, Piece, Sink, Source};
use super::framed::{Framed, Out};
use super::head_write::{self, Downstream, Own};
use super::io::{Buffered, ClientIo, UpstreamIo};
use super::request::{H1Request, Req};
use super::request_head::Head;
use super::response_head::ResponseView;
use super::send::{send, SendError};
use crate::drain::Drain;
use crate::metrics::OpenConnection;

pub mod conn;
pub mod park;
pub mod tunnel;

/// A client connection's state between and during its requests.
pub struct ClientConn {
    /// The connection and what was read of it: the current request's head
    /// at the start, then what follows it.
    pub io: Buffered<ClientIo>,
    /// The connection's ends.
    pub peer: Option<crate::engine::request::Ends>,
    /// Whether it came over TLS.
    pub tls: bool,
    /// The current request's head.
    pub head: Head,
    drain: Arc<Drain>,
    open: OpenConnection,
}

impl ClientConn {
    /// Whether the router is stopping: answers close their connections.
    pub fn closing(&self) -> bool {
        self.drain.is_closing()
    }
}

/// Bytes a client may send while its answer is awaited (a pipelined
/// request, kept for later) before the router stops watching it.
const WATCH_LIMIT: usize = 64 * 1024;

/// The client's side of one HTTP/1 request's exchange.
pub struct H1Client<'a> {
    /// The connection.
    pub c: &'a mut ClientConn,
    /// `[server] pipelining`.
    pipelining: bool,
    /// `[server] send_timeout_ms`.
    send_timeout: Duration,
    /// `client_body_timeout_ms`: the longest wait between two reads of
    /// the body.
    body_timeout: Duration,
    /// The body's length when it was read whole (into the buffer, after
    /// the head: for failovers to send again).
    buffered: Option<usize>,
    /// The body was read to its end.
    read_whole: bool,
    /// `100 Continue` was sent.
    continued: bool,
    /// The connection serves another request (decided when the answer's
    /// head is written).
    pub keep: bool,
}

impl<'a> H1Client<'a> {
    /// The request whose head `c` holds, its head consumed (and kept in
    /// the buffer for the record).
    pub fn new(c: &'a mut ClientConn, server: &ServerSection) -> Self {
        let len = c.head.len;
        c.io.consume(len);
        c.io.keep(len);
        H1Client {
            c,
            pipelining: server.pipelining,
            send_timeout: Duration::from_millis(server.send_timeout_ms),
            body_timeout: Duration::from_millis(server.client_body_timeout_ms),
            buffered: None,
            read_whole: false,
            continued: false,
            keep: false,
        }
    }

    /// Ends the request: what it consumed goes, pipelined bytes move to
    /// the buffer's start.
    pub fn finish(self) {
        if let Some(n) = self.buffered {
            self.c.io.consume(n);
        }
        self.c.io.keep(0);
        self.c.io.compact();
    }

    /// Whether the connection serves another request after an answer to
    /// this one: the client asked to keep it (nginx's rule, see
    /// [`Head::wants_keep_alive`]), the request was read to its end, the
    /// answer's end is known without the close (a length, or chunks to an
    /// HTTP/1.1 client), nothing was pipelined while pipelining is off,
    /// and the router is not stopping.
    pub fn keep_alive(&self, framing: Option<Framing>) -> bool {
        let body_known = match framing {
            None | Some(Framing::Empty | Framing::Length(_)) => true,
            Some(Framing::Chunked) => self.c.head.http11,
            Some(Framing::UntilClose) => false,
        };
        self.c.head.wants_keep_alive()
            && self.read_whole
            && body_known
            && (self.pipelining || self.c.io.pending().len() <= self.buffered.unwrap_or(0))
            && !self.c.closing()
    }

    fn send_timeout(&self) -> Duration {
        self.send_timeout
    }
}

/// The request body as it comes, which notes its end.
pub struct H1Body<'a> {
    src: BodySource<'a, ClientIo>,
    read_whole: &'a mut bool,
}

impl Source for H1Body<'_> {
    type Error = ClientFailure;

    fn piece(&mut self) -> Result<Piece<'_>, ClientFailure> {
        let p = self.src.piece().map_err(client_failure)?;
        if matches!(p, Piece::End) {
            *self.read_whole = true;
        }
        Ok(p)
    }

    async fn read_more(&mut self) -> Result<(), ClientFailure> {
        self.src.read_more().await.map_err(client_failure)
    }
}

fn client_failure(e: BodyError) -> ClientFailure {
    match e {
        BodyError::Closed => ClientFailure::Disconnected,
        BodyError::TimedOut => ClientFailure::TimedOut,
        BodyError::Framing(_) => ClientFailure::BadChunks,
    }
}

impl Client for H1Client<'_> {
    fn request(&self) -> impl Req + '_ {
        H1Request {
            head: &self.c.head,
            buf: self.c.io.buf(),
            peer: self.c.peer,
            tls: self.c.tls,
        }
    }

    fn peer(&self) -> Option<IpAddr> {
        self.c.peer.map(|p| p.client.ip())
    }

    fn tls(&self) -> bool {
        self.c.tls
    }

    async fn continue_if_asked(&mut self, timeout: Duration) -> Result<(), ClientFailure> {
        let h = &self.c.head;
        if h.expect_continue && h.http11 && !self.continued {
            self.continued = true;
            send(self.c.io.io(), &[b"HTTP/1.1 100 Continue\r\n\r\n"], timeout)
                .await
                .map_err(|_| ClientFailure::Disconnected)?;
        }
        Ok(())
    }

    async fn buffer_small_body(&mut self) -> Result<(), ClientFailure> {
        let h = &self.c.head;
        let len = match (h.chunked, h.content_length) {
            (true, _) => return Ok(()),
            (false, None) => 0,
            (false, Some(n)) if n <= SMALL_BODY => n as usize,
            (false, Some(_)) => return Ok(()),
        };
        let timeout = self.body_timeout;
        while self.c.io.pending().len() < len {
            let want = len - self.c.io.pending().len();
            self.c
                .io
                .read_more(want, usize::MAX, timeout)
                .await
                .map_err(|e| client_failure(e.into()))?;
        }
        self.buffered = Some(len);
        self.read_whole = true;
        Ok(())
    }

    fn buffered(&self) -> Option<&[u8]> {
        let n = self.buffered?;
        Some(&self.c.io.pending()[..n])
    }

    fn body(&mut self, server: &ServerSection) -> impl Source<Error = ClientFailure> + '_ {
        let h = &self.c.head;
        let framing = if h.chunked {
            Framing::Chunked
        } else {
            Framing::Length(h.content_length.unwrap_or(0))
        };
        let piece = server.body_buffer_bytes.min(64 * 1024);
        let timeout = self.body_timeout;
        H1Body {
            src: BodySource::new(&mut self.c.io, framing, piece, false, timeout),
            read_whole: &mut self.read_whole,
        }
    }

    fn body_length(&self) -> Option<u64> {
        let h = &self.c.head;
        (!h.chunked).then_some(h.content_length.unwrap_or(0))
    }

    fn read_whole(&self) -> bool {
        self.read_whole
    }

    /// Resolves when the client closes or fails its connection; what it
    /// sends meanwhile stays in its buffer, up to [`WATCH_LIMIT`] (then it
    /// is no longer watched).
    async fn gone(&mut self) {
        while self.c.io.pending().len() < WATCH_LIMIT {
            if self
                .c
                .io
                .read_more_untimed(4096, WATCH_LIMIT)
                .await
                .is_err()
            {
                return;
            }
        }
        std::future::pending::<()>().await
    }

    async fn respond(
        &mut self,
        head: &impl ResponseView,
        r: Respond<'_>,
    ) -> Result<impl Sink<Error = SendError> + '_, SendError> {
        let switching = head.status() == 101;
        let framing = r.framing;
        self.keep = !r.early && !switching && self.keep_alive(Some(framing));
        let chunked = framing == Framing::Chunked && self.c.head.http11;
        let mut out = buffers::take();
        let date = super::date::now();
        let d = Downstream {
            keep_alive: self.keep,
            chunked,
            date: &date,
        };
        head_write::response_head(head, &d, r.ketama.iter(), &mut out);
        let timeout = self.send_timeout();
        let out = ClientOut {
            io: self.c.io.io(),
            head: Some(out),
            timeout,
        };
        let mut sink = Framed::new(out, chunked);
        // The head goes with the first body bytes, or alone for none.
        if matches!(framing, Framing::Empty) {
            sink.flush().await?;
        }
        Ok(sink)
    }

    async fn answer(&mut self, status: u16, words: &str, backend: Option<&[u8]>, keep: bool) {
        let timeout = self.send_timeout();
        answer(self.c, status, words, backend, keep, timeout).await;
        self.keep = keep;
    }

    async fn answer_grpc(&mut self, code: u8, words: &str, backend: Option<&[u8]>, keep: bool) {
        let timeout = self.send_timeout();
        let own = Own::Grpc { code, words };
        answer_own(self.c, own, backend, keep, timeout).await;
        self.keep = keep;
    }

    fn keeps(&self) -> bool {
        self.keep_alive(None)
    }

    fn body_timeout(&self) -> Duration {
        self.body_timeout
    }

    async fn tunnel(&mut self, up: &mut Buffered<UpstreamIo>, idle: Duration) -> u64 {
        tunnel::tunnel(self.c, up, idle).await
    }
}

/// Where a response body goes to an HTTP/1 client (its [`Out`];
/// [`Framed`] chunks it when asked): the head first, with the first body
/// bytes in one write, then the body as it comes, under
/// `send_timeout_ms`.
pub struct ClientOut<'a> {
    io: &'a mut ClientIo,
    /// The response head, until written.
    head: Option<Vec<u8>>,
    timeout: Duration,
}

impl Drop for ClientOut<'_> {
    fn drop(&mut self) {
        if let Some(h) = self.head.take() {
            buffers::give(h);
        }
    }
}

impl Out for ClientOut<'_> {
    type Error = SendError;

    fn head_pending(&self) -> bool {
        self.head.is_some()
    }

    async fn write(&mut self, data: &[u8]) -> Result<Flow, SendError> {
        let r = match self.head.take() {
            Some(h) => {
                let r = send(self.io, &[&h, data], self.timeout).await;
                buffers::give(h);
                r
            }
            None => send(self.io, &[data], self.timeout).await,
        };
        r.map(|()| Flow::Go)
    }
}

/// Writes the router's own answer `status` (see
/// [`head_write::answer`]). A client that does not take it is left alone:
/// it is closing anyway.
pub async fn answer(
    c: &mut ClientConn,
    status: u16,
    words: &str,
    backend: Option<&[u8]>,
    keep: bool,
    timeout: Duration,
) {
    let head_request = c.head.method.of(c.io.buf()) == b"HEAD";
    let own = Own::Plain {
        status,
        words,
        head_request,
    };
    answer_own(c, own, backend, keep, timeout).await;
}

/// Writes the router's own answer `own` ([`head_write::answer`]).
async fn answer_own(
    c: &mut ClientConn,
    own: Own<'_>,
    backend: Option<&[u8]>,
    keep: bool,
    timeout: Duration,
) {
    let mut out = buffers::take();
    head_write::answer(own, backend, keep, &mut out);
    let _ = send(c.io.io(), &[&out], timeout).await;
    buffers::give(out);
}

/// How long a connection closed after a refusal or an unread body keeps
/// reading (and dropping) what its client still sends, so that the client
/// reads the answer before the close resets it: nginx's `lingering_time`
/// and `lingering_timeout`, in one bound.
const LINGER: Duration = Duration::from_secs(5);
/// At most this much is read and dropped while lingering.
const LINGER_BYTES: usize = 1 << 20;

/// Closes the connection the way nginx's lingering close does: the answer
/// is flushed and the write side shut (the client sees the end; under
/// TLS, `close_notify`), then what the client still sends is read and
/// dropped until it stops (its end), [`LINGER`] passes or
/// [`LINGER_BYTES`] were dropped. Closing with unread bytes would make the
/// kernel reset the connection, and a client still sending would lose the
/// answer.
pub async fn linger(c: &mut ClientConn) {
    use tokio::io::AsyncWriteExt;
    if c.io.io().shutdown().await.is_err() {
        return;
    }
    let buf = c.io.take_buf();
    buffers::give(buf);
    c.io.set_buf(buffers::take());
    let _ = tokio::time::timeout(LINGER, async {
        let mut dropped = 0;
        while dropped < LINGER_BYTES {
            c.io.compact();
            let all = c.io.pending().len();
            c.io.consume(all);
            match c.io.read_more(1, LINGER_BYTES, LINGER).await {
                Ok(n) => dropped += n,
                Err(_) => break,
            }
        }
    })
    .await;
}
