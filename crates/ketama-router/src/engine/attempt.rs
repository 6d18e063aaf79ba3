//! What one backend attempt and the exchange around it share, whichever
//! protocol each side speaks: the client as an attempt sees it
//! ([`Client`]), what a response to it is ([`Respond`]), how the client
//! can fail ([`ClientFailure`]) and how an attempt ended ([`Attempted`]).
//! [`super::exchange`] drives the attempts; [`super::upstream_h1`] and
//! [`super::h2::upstream`] make them; all three import this, and this
//! none of them.

use std::future::Future;
use std::net::IpAddr;
use std::time::Duration;

use ketama_config::model::ServerSection;

use super::body::Framing;
use super::copy::{Sink, Source};
use super::head_write::Upstream;
use super::record::{Ketama, Record};
use super::request::Req;
use super::response_head::ResponseView;
use super::send::SendError;
use super::Engine;
use crate::policy::{Attempt, Failure, Stage};
use crate::state::RoutingState;

/// Bodies up to this size are read whole before a backend is tried, so
/// that a failover can send them again.
pub const SMALL_BODY: u64 = 64 * 1024;

/// How many bytes of a request body of `length` (`None`: not said, or
/// chunked) are read whole before a backend is tried: all of one of at
/// most [`SMALL_BODY`]; `None` for any other, which streams. The one rule
/// for either protocol's [`Client::buffer_small_body`].
pub fn small_body(length: Option<u64>) -> Option<usize> {
    length.filter(|&n| n <= SMALL_BODY).map(|n| n as usize)
}

/// A failure on the client's side of a body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientFailure {
    /// It closed or failed mid-body (an HTTP/2 stream: reset it).
    Disconnected,
    /// `client_body_timeout_ms` passed between two reads.
    TimedOut,
    /// Its body's framing is invalid (HTTP/1 chunks).
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

/// What a response to the client is, besides its head.
pub struct Respond<'a> {
    /// How the backend delimits its body (`Framing::Empty` for one with
    /// none).
    pub framing: Framing,
    /// It came before the request's body was all sent (neither
    /// connection is kept).
    pub early: bool,
    /// The `x-ketama-*` fields.
    pub ketama: Ketama<'a>,
}

/// The client's side of an exchange: what an HTTP/1 connection's request
/// and an HTTP/2 stream differ in.
pub trait Client: Send {
    /// The request, as routing and forwarding read it.
    fn request(&self) -> impl Req + Send + '_;
    /// The client's address.
    fn peer(&self) -> Option<IpAddr>;
    /// Whether it came over TLS.
    fn tls(&self) -> bool;
    /// `100 Continue` when an HTTP/1.1 client asked for it, before the
    /// body is read.
    fn continue_if_asked(
        &mut self,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), ClientFailure>> + Send;
    /// Reads the body whole when it is at most [`SMALL_BODY`] bytes (then
    /// [`Client::buffered`] holds it).
    fn buffer_small_body(&mut self) -> impl Future<Output = Result<(), ClientFailure>> + Send;
    /// The body read whole (empty for none), when it was.
    fn buffered(&self) -> Option<&[u8]>;
    /// The trailers that ended a body read whole (an HTTP/2 client's).
    fn trailers(&self) -> Option<&http::HeaderMap> {
        None
    }
    /// The body as an HTTP/2 stream, taken out of the client, when the
    /// client is one (else `None`): the caller sends it on to an HTTP/2
    /// backend while the response comes back, both directions at once
    /// (gRPC's client and bidirectional streams). [`Client::body`] is
    /// empty after.
    fn take_h2_body(&mut self) -> Option<h2::RecvStream> {
        None
    }
    /// The body as it comes, when it was not read whole.
    fn body(&mut self, server: &ServerSection) -> impl Source<Error = ClientFailure> + '_;
    /// How the body goes to an HTTP/1 backend: its length when known
    /// (`None`: chunked).
    fn body_length(&self) -> Option<u64>;
    /// Whether the request was read to its end.
    fn read_whole(&self) -> bool;
    /// Resolves when the client leaves while the router waits for the
    /// backend (its connection closes, its stream is reset).
    fn gone(&mut self) -> impl Future<Output = ()> + Send;
    /// Whether the client already left (an HTTP/2 stream it reset), known
    /// without waiting: a request nobody waits for is neither connected
    /// for nor written (rapid reset must cost the backends nothing).
    fn left(&mut self) -> impl Future<Output = bool> + Send {
        async { false }
    }
    /// Sends the response head, the connection's fate decided here; the
    /// body then goes to the sink.
    fn respond(
        &mut self,
        head: &impl ResponseView,
        r: Respond<'_>,
    ) -> impl Future<Output = Result<impl Sink<Error = SendError> + '_, SendError>> + Send;
    /// The router's own answer, the connection's fate decided by the
    /// client's side as for any answer (HTTP/1: kept when the request was
    /// read whole and the client asked to keep it).
    fn answer(
        &mut self,
        status: u16,
        words: &str,
        backend: Option<&[u8]>,
    ) -> impl Future<Output = ()> + Send;
    /// The router's own answer to a gRPC call (its `content-type`
    /// `application/grpc*`): trailers-only, `:status 200`, `grpc-status`
    /// `code` and `grpc-message` the words ([`super::grpc`]).
    fn answer_grpc(
        &mut self,
        code: u8,
        words: &str,
        backend: Option<&[u8]>,
    ) -> impl Future<Output = ()> + Send;
    /// After the response's head went out and a gRPC call's deadline
    /// passed: ends the response with `grpc-status` `code` (HTTP/2's
    /// trailers); whether it could (an HTTP/1 client: no).
    fn end_late(&mut self, code: u8, words: &str) -> impl Future<Output = bool> + Send {
        let _ = (code, words);
        async { false }
    }
    /// `client_body_timeout_ms`, read once per request: the longest wait
    /// between two reads of its body.
    fn body_timeout(&self) -> Duration;
    /// After a `101` to the WebSocket upgrade it asked for (HTTP/1 only):
    /// the client's connection and `up` joined until both ends closed, or
    /// nothing moved for `idle`; the bytes sent to the client.
    fn tunnel(
        &mut self,
        up: &mut super::io::Buffered<super::io::UpstreamIo>,
        idle: Duration,
    ) -> impl Future<Output = u64> + Send;
}

/// How one attempt ended.
pub(crate) enum Attempted {
    /// The response was relayed whole.
    Relayed,
    /// The client failed while its response was written (`send_timeout_ms`
    /// passed, or it closed): its connection ends, whatever was decided
    /// when the head went out, since the response it has is cut short.
    ClientGone,
    /// The backend failed it.
    Failed(Attempt),
    /// The client failed it.
    ClientFailed(ClientFailure),
}

/// Counts a failure of the client's while its answer was sent; the
/// attempt ends with it ([`Attempted::ClientGone`]).
pub fn send_failed(e: &Engine, err: SendError) -> Attempted {
    e.metrics.client_error(err.reason());
    Attempted::ClientGone
}

/// What a failed attempt at the upstream `stage` is.
pub fn failed(stage: Stage, failure: Failure) -> Attempted {
    Attempted::Failed(Attempt { stage, failure })
}

/// What the request head for backend `n` carries besides the client's,
/// either protocol: `X-Forwarded-*` when `[server] forwarded_headers` is
/// on, and `[migration] previous_owner_header` with the previous owner
/// when this backend gets one (counted); `chunked`: the body goes chunked.
pub fn upstream<'s, C: Client>(
    e: &Engine,
    c: &C,
    state: &'s RoutingState,
    r: &Record,
    n: usize,
    chunked: bool,
) -> Upstream<'s> {
    let told = crate::policy::route::previous_owner_hint(state, r.route.as_ref(), r.previous, n);
    if told.is_some() {
        e.metrics.previous_owner_hint();
    }
    Upstream {
        chunked,
        forwarded: state
            .validated
            .config
            .server
            .forwarded_headers
            .then_some((c.peer(), c.tls())),
        hint: state
            .previous_owner_header
            .as_ref()
            .map(|h| (h.as_str().as_bytes(), told.map(str::as_bytes))),
    }
}
