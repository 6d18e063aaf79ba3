//! HTTP/1 clients: a connection's loop ([`conn`]), its idle keeping
//! ([`park`]), the tunnel after a `101` ([`tunnel`]), and the client's
//! side of each request's exchange ([`H1Client`]): the request's own
//! state (its head; how far its body was read, [`Reading`]; what it was
//! sent, [`Writing`], each changed by one method, as hyper's `State`),
//! its body read from the connection's buffer, its response and the
//! router's own answers written with the connection's fate decided in
//! one place ([`H1Client::writing_head`]), and the lingering close nginx
//! does. What lasts from request to request is the [`ClientConn`].

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use ketama_config::model::ServerSection;

use super::attempt::{small_body, Client, ClientFailure, Respond};
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

/// A client connection: what lasts from request to request. A request's
/// own state (its parsed head, how far its body was read, what it was
/// sent) is its [`H1Client`]'s.
pub struct ClientConn {
    /// The connection and what was read of it: the current request's head
    /// at the start, then what follows it.
    pub io: Buffered<ClientIo>,
    /// The connection's ends.
    pub peer: Option<crate::engine::request::Ends>,
    /// Whether it came over TLS.
    pub tls: bool,
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

/// How far a request's body was read (hyper's `Reading`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    /// Not yet.
    Unread,
    /// Not yet, and `100 Continue` was sent for it.
    Continued,
    /// Read whole into the buffer after the head, this many bytes (for
    /// failovers to send again).
    Buffered(usize),
    /// Read to its end as it went to a backend.
    Streamed,
}

/// What the client was sent (hyper's `Writing` and `keep_alive` in one:
/// the connection's fate is what its answer's head said).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Writing {
    /// Nothing yet.
    Nothing,
    /// An answer's head, which said whether the connection is kept.
    Head {
        /// It said `keep-alive` (or nothing, for HTTP/1.1).
        keep: bool,
    },
}

/// The client's side of one HTTP/1 request's exchange.
pub struct H1Client<'a> {
    pub c: &'a mut ClientConn,
    head: &'a Head,
    /// `[server] pipelining`.
    pipelining: bool,
    /// `[server] send_timeout_ms`.
    send_timeout: Duration,
    /// `client_body_timeout_ms`: the longest wait between two reads of
    /// the body.
    body_timeout: Duration,
    /// Changed by [`Self::reading_to`] only.
    reading: Reading,
    /// Changed by [`Self::writing_head`] only.
    writing: Writing,
}

impl<'a> H1Client<'a> {
    /// The request whose `head` `c` holds, its head consumed (and kept in
    /// the buffer for the record).
    pub fn new(c: &'a mut ClientConn, head: &'a Head, server: &ServerSection) -> Self {
        c.io.consume(head.len);
        c.io.keep(head.len);
        H1Client {
            c,
            head,
            pipelining: server.pipelining,
            send_timeout: Duration::from_millis(server.send_timeout_ms),
            body_timeout: Duration::from_millis(server.client_body_timeout_ms),
            reading: Reading::Unread,
            writing: Writing::Nothing,
        }
    }

    /// Ends the request: what it consumed goes, pipelined bytes move to
    /// the buffer's start.
    pub fn finish(self) {
        if let Reading::Buffered(n) = self.reading {
            self.c.io.consume(n);
        }
        self.c.io.keep(0);
        self.c.io.compact();
    }

    /// The body was read further: the one change of [`Reading`].
    fn reading_to(&mut self, to: Reading) {
        self.reading = to;
    }

    /// An answer's head is written now, with the connection's fate: the
    /// one change of [`Writing`]; whether it says the connection is kept.
    /// `framing` as in [`Self::may_keep`]; `either`: the answer leaves
    /// the connection fit for another request either way (not so for one
    /// that came before the body was read, or a switch of protocols).
    fn writing_head(&mut self, framing: Option<Framing>, either: bool) -> bool {
        let keep = either && self.may_keep(framing);
        self.writing = Writing::Head { keep };
        keep
    }

    /// Whether the connection serves another request: its answer's head
    /// said so.
    pub fn kept(&self) -> bool {
        self.writing == Writing::Head { keep: true }
    }

    /// Whether an answer delimited by `framing` (`None`: the router's
    /// own, of known length) may keep the connection: the client asked to
    /// keep it (nginx's rule, see [`Head::wants_keep_alive`]), the request
    /// was read to its end, the answer's end is known without the close
    /// (a length, or chunks to an HTTP/1.1 client), nothing was pipelined
    /// while pipelining is off, and the router is not stopping.
    fn may_keep(&self, framing: Option<Framing>) -> bool {
        let body_known = match framing {
            None | Some(Framing::Empty | Framing::Length(_)) => true,
            Some(Framing::Chunked) => self.head.http11,
            Some(Framing::UntilClose) => false,
        };
        let buffered = match self.reading {
            Reading::Buffered(n) => n,
            _ => 0,
        };
        self.head.wants_keep_alive()
            && self.read_whole()
            && body_known
            && (self.pipelining || self.c.io.pending().len() <= buffered)
            && !self.c.closing()
    }
}

/// The request body as it comes, which notes its end.
pub struct H1Body<'a> {
    src: BodySource<'a, ClientIo>,
    reading: &'a mut Reading,
}

impl Source for H1Body<'_> {
    type Error = ClientFailure;

    fn piece(&mut self) -> Result<Piece<'_>, ClientFailure> {
        let p = self.src.piece().map_err(client_failure)?;
        if matches!(p, Piece::End) {
            *self.reading = Reading::Streamed;
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
            head: self.head,
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
        let h = self.head;
        if h.expect_continue && h.http11 && self.reading == Reading::Unread {
            self.reading_to(Reading::Continued);
            send(self.c.io.io(), &[b"HTTP/1.1 100 Continue\r\n\r\n"], timeout)
                .await
                .map_err(|_| ClientFailure::Disconnected)?;
        }
        Ok(())
    }

    async fn buffer_small_body(&mut self) -> Result<(), ClientFailure> {
        let Some(len) = small_body(self.body_length()) else {
            return Ok(());
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
        self.reading_to(Reading::Buffered(len));
        Ok(())
    }

    fn buffered(&self) -> Option<&[u8]> {
        let Reading::Buffered(n) = self.reading else {
            return None;
        };
        Some(&self.c.io.pending()[..n])
    }

    fn body(&mut self, server: &ServerSection) -> impl Source<Error = ClientFailure> + '_ {
        let h = self.head;
        let framing = if h.chunked {
            Framing::Chunked
        } else {
            Framing::Length(h.content_length.unwrap_or(0))
        };
        // Read in pieces no larger than a spare buffer may grow, so that
        // an upload leaves the connection's buffer one the thread keeps.
        let piece = server.body_buffer_bytes.min(buffers::KEEP_UP_TO);
        let timeout = self.body_timeout;
        H1Body {
            src: BodySource::new(&mut self.c.io, framing, piece, false, timeout),
            reading: &mut self.reading,
        }
    }

    fn body_length(&self) -> Option<u64> {
        let h = self.head;
        (!h.chunked).then_some(h.content_length.unwrap_or(0))
    }

    fn read_whole(&self) -> bool {
        matches!(self.reading, Reading::Buffered(_) | Reading::Streamed)
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
        let keep = self.writing_head(Some(framing), !r.early && !switching);
        let chunked = framing == Framing::Chunked && self.head.http11;
        let mut out = buffers::take();
        let date = super::date::now();
        let d = Downstream {
            keep_alive: keep,
            chunked,
            date: &date,
        };
        head_write::response_head(head, &d, r.ketama.iter(), &mut out);
        let timeout = self.send_timeout;
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

    async fn answer(&mut self, status: u16, words: &str, backend: Option<&[u8]>) {
        let own = Own::Plain {
            status,
            words,
            head_request: self.head.method.of(self.c.io.buf()) == b"HEAD",
        };
        self.answer_own(own, backend).await;
    }

    async fn answer_grpc(&mut self, code: u8, words: &str, backend: Option<&[u8]>) {
        self.answer_own(Own::Grpc { code, words }, backend).await;
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

impl H1Client<'_> {
    /// Writes the router's own answer `own` ([`head_write::answer`]),
    /// the connection kept as [`Self::writing_head`] decides. A client
    /// that does not take it is left alone: it is closing anyway.
    async fn answer_own(&mut self, own: Own<'_>, backend: Option<&[u8]>) {
        let keep = self.writing_head(None, true);
        let mut out = buffers::take();
        head_write::answer(own, backend, keep, &mut out);
        let _ = send(self.c.io.io(), &[&out], self.send_timeout).await;
        buffers::give(out);
    }
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
    let _ = tokio::time::timeout(LINGER, async {
        let mut dropped = 0;
        while dropped < LINGER_BYTES {
            c.io.clear();
            match c.io.read_more(1, LINGER_BYTES, LINGER).await {
                Ok(n) => dropped += n,
                Err(_) => break,
            }
        }
    })
    .await;
}
