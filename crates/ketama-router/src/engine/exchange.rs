//! One request, whichever protocol carried it (an HTTP/1 connection's
//! request, an HTTP/2 stream): its route (one library call), then
//! attempts at backends in failover order under [`crate::policy`]'s rules
//! (connect, send the head and the body, read the response head: an
//! HTTP/1 backend through [`super::upstream_h1`], an HTTP/2 one through
//! [`super::h2::upstream`]), the response relayed to the client, and what
//! the request leaves behind ([`Record`]). What differs between the
//! protocols on the client's side is a [`Client`].

use std::future::Future;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ketama_config::model::ServerSection;

use super::body::Framing;
use super::copy::{Sink, Source};
use super::grpc;
use super::record::{Answer, Ketama, Record};
use super::request::Req;
use super::response_head::ResponseView;
use super::send::SendError;
use super::upstream::{self, Conn};
use super::Engine;
use crate::policy::route::{choose, decide, previous_owner, Decision};
use crate::policy::{self, Attempt, Failure, RetryFacts, Stage};
use crate::state::RoutingState;

/// Bodies up to this size are read whole before a backend is tried, so
/// that a failover can send them again.
pub const SMALL_BODY: u64 = 64 * 1024;

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
    /// The body's length when known otherwise (an HTTP/2 backend's
    /// `content-length`).
    pub length: Option<u64>,
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
    fn buffer_small_body(
        &mut self,
        server: &ServerSection,
    ) -> impl Future<Output = Result<(), ClientFailure>> + Send;
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
    /// The router's own answer (the connection kept when `keep`).
    fn answer(
        &mut self,
        status: u16,
        words: &str,
        backend: Option<&[u8]>,
        keep: bool,
    ) -> impl Future<Output = ()> + Send;
    /// The router's own answer to a gRPC call (its `content-type`
    /// `application/grpc*`): trailers-only, `:status 200`, `grpc-status`
    /// `code` and `grpc-message` the words ([`super::grpc`]).
    fn answer_grpc(
        &mut self,
        code: u8,
        words: &str,
        backend: Option<&[u8]>,
        keep: bool,
    ) -> impl Future<Output = ()> + Send;
    /// After the response's head went out and a gRPC call's deadline
    /// passed: ends the response with `grpc-status` `code` (HTTP/2's
    /// trailers); whether it could (an HTTP/1 client: no).
    fn end_late(&mut self, code: u8, words: &str) -> impl Future<Output = bool> + Send {
        let _ = (code, words);
        async { false }
    }
    /// Whether the connection may serve another request after an answer
    /// of the router's own to this one, read whole (HTTP/1: the client
    /// asked to keep it, and the router is not stopping; HTTP/2: always,
    /// the stream ends alone).
    fn keeps(&self) -> bool;
    /// After a `101` to the WebSocket upgrade it asked for (HTTP/1 only):
    /// the client's connection and `up` joined until both ends closed, or
    /// nothing moved for `idle`; the bytes sent to the client.
    fn tunnel(
        &mut self,
        up: &mut super::io::Buffered<super::io::UpstreamIo>,
        idle: Duration,
    ) -> impl Future<Output = u64> + Send;
}

/// How an exchange ended, for the client's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// A response went out: the client's side decided its connection's
    /// fate.
    Answered,
    /// The router answered itself; the connection is kept when `keep`.
    Refused {
        /// The connection serves another request.
        keep: bool,
        /// The request was not read to its end: close lingering.
        linger: bool,
    },
    /// The client left or failed; nothing more to do.
    Gone,
}

/// Serves the request `c` holds; `r` keeps what it did for its record
/// (written by the caller, which owns the request's bytes).
pub async fn exchange<C: Client>(
    e: &Engine,
    c: &mut C,
    state: &Arc<RoutingState>,
    r: &mut Record,
) -> Ended {
    let server = &state.validated.config.server;
    {
        let req = c.request();
        r.grpc = grpc::is_grpc(req.field(b"content-type"));
        if r.grpc {
            let timeout = grpc::deadline(req.field(b"grpc-timeout"), server.grpc_timeout_max_ms);
            r.deadline = timeout.map(|t| Instant::now() + t);
        }
    }
    let decided = decide(&c.request(), state);
    let Decision {
        route,
        rule,
        set_cookie,
    } = match decided {
        Ok(d) => d,
        Err(err) => {
            tracing::error!("no route: {err}");
            own_answer(c, r, 500, "the request could not be routed", None, false).await;
            return Ended::Refused {
                keep: false,
                linger: false,
            };
        }
    };
    e.metrics.lookup(route.version());
    r.previous = previous_owner(&c.request(), state, &route).unwrap_or_else(|err| {
        tracing::error!("no previous owner: {err}");
        None
    });
    r.route = Some(route);
    r.rule = rule;
    r.set_cookie = set_cookie;
    r.started = Some(Instant::now());
    let Some(deadline) = r.deadline else {
        return attempts(e, c, state, r).await;
    };
    match tokio::time::timeout_at(deadline.into(), attempts(e, c, state, r)).await {
        Ok(ended) => ended,
        // The call's deadline passed: whatever was in flight was dropped
        // (a backend's stream reset with it). An answer already begun ends
        // with DEADLINE_EXCEEDED in its trailers where the protocol has
        // them (else it is cut); one not begun is DEADLINE_EXCEEDED
        // trailers-only, as Envoy answers.
        Err(_) if r.status != 0 => {
            r.grpc_status = Some(grpc::DEADLINE_EXCEEDED);
            match c
                .end_late(grpc::DEADLINE_EXCEEDED, grpc::DEADLINE_WORDS)
                .await
            {
                true => Ended::Answered,
                false => Ended::Gone,
            }
        }
        Err(_) => {
            r.status = 504;
            r.grpc_status = Some(grpc::DEADLINE_EXCEEDED);
            let backend = r.backend_named(state);
            c.answer_grpc(
                grpc::DEADLINE_EXCEEDED,
                grpc::DEADLINE_WORDS,
                backend,
                false,
            )
            .await;
            Ended::Refused {
                keep: c.read_whole() && c.keeps(),
                linger: !c.read_whole(),
            }
        }
    }
}

/// The request's body, then attempts at backends in failover order until
/// one answered or none is left.
async fn attempts<C: Client>(
    e: &Engine,
    c: &mut C,
    state: &Arc<RoutingState>,
    r: &mut Record,
) -> Ended {
    let server = &state.validated.config.server;
    let send_timeout = Duration::from_millis(server.send_timeout_ms);
    if let Err(f) = c.continue_if_asked(send_timeout).await {
        return client_failed(e, c, r, f).await;
    }
    if let Err(f) = c.buffer_small_body(server).await {
        return client_failed(e, c, r, f).await;
    }
    loop {
        let Some(route) = r.route.as_mut() else {
            unreachable!("set above")
        };
        r.slot = None;
        let chosen = choose(state, route).unwrap_or_else(|err| {
            tracing::error!("no backend: {err}");
            None
        });
        let Some(choice) = chosen else {
            return fail(c, r, state, true).await;
        };
        if c.left().await {
            return Ended::Gone;
        }
        r.attempt_started(choice.node, choice.spills, choice.slot);
        let (attempt, reused) = match upstream::connect(state, &state.backends[choice.node]).await {
            Ok(up) if c.left().await => {
                // It left while the router connected: the connection is
                // clean, for the next request.
                if let Conn::H1(conn) = up {
                    conn.done(true, server.upstream_keepalive_pool_size);
                }
                r.attempt_ended(state);
                return Ended::Gone;
            }
            Ok(up) => {
                let reused = up.reused();
                match attempt(e, c, state, r, up).await {
                    Tried::Done => return Ended::Answered,
                    Tried::ClientGone => return Ended::Gone,
                    Tried::ClientFailed(f) => return client_failed(e, c, r, f).await,
                    Tried::Failed(a) => (a, reused),
                }
            }
            Err(f) => (
                Attempt {
                    stage: Stage::Connect,
                    failure: f,
                },
                false,
            ),
        };
        r.attempt_failed(e, state, attempt);
        if attempt.stage == Stage::Answered {
            // The client has part of the answer: its connection ends.
            return Ended::Gone;
        }
        let facts = RetryFacts {
            idempotent: c.request().idempotent(),
            body_replayable: c.buffered().is_some(),
            reused,
            attempts: r.attempts,
            retries: server.retries,
        };
        if policy::retry(attempt, facts) {
            continue;
        }
        r.upstream_failed = true;
        return fail(c, r, state, false).await;
    }
}

/// The router's own answer: as HTTP, or to a gRPC call trailers-only
/// with the `grpc-status` Envoy maps `status` to.
async fn own_answer<C: Client>(
    c: &mut C,
    r: &mut Record,
    status: u16,
    words: &str,
    backend: Option<&[u8]>,
    keep: bool,
) {
    r.status = status;
    if r.grpc {
        let code = grpc::status_of_http(status);
        r.grpc_status = Some(code);
        c.answer_grpc(code, words, backend, keep).await;
    } else {
        c.answer(status, words, backend, keep).await;
    }
}

/// How one attempt ended.
pub enum Tried {
    /// The response was relayed whole.
    Done,
    /// The client failed while its response was written (`send_timeout_ms`
    /// passed, or it closed): its connection ends, whatever was decided
    /// when the head went out, since the response it has is cut short.
    ClientGone,
    /// The backend failed it.
    Failed(Attempt),
    /// The client failed it.
    ClientFailed(ClientFailure),
}

/// One attempt at the connected backend `up`.
async fn attempt<C: Client>(
    e: &Engine,
    c: &mut C,
    state: &Arc<RoutingState>,
    r: &mut Record,
    up: Conn,
) -> Tried {
    match up {
        Conn::H1(conn) => super::upstream_h1::attempt(e, c, state, r, conn).await,
        Conn::H2(send) => super::h2::upstream::attempt(e, c, state, r, send).await,
    }
}

/// The router's own answer when no backend served the request; the
/// connection kept when the request was read whole (nginx keeps it).
async fn fail<C: Client>(
    c: &mut C,
    r: &mut Record,
    state: &RoutingState,
    exhausted: bool,
) -> Ended {
    let Answer {
        status,
        words,
        backend,
    } = r.answer(state, exhausted);
    let whole = c.read_whole();
    let keep = whole && c.keeps();
    own_answer(c, r, status, &words, backend, keep).await;
    Ended::Refused {
        keep,
        linger: !whole,
    }
}

/// The client failed the request (its body): counted, answered when it
/// can still be (408 for a stalled body, 400 for bad chunked framing).
async fn client_failed<C: Client>(
    e: &Engine,
    c: &mut C,
    r: &mut Record,
    f: ClientFailure,
) -> Ended {
    e.metrics.client_error(f.reason());
    match f.answer() {
        Some((status, why)) => {
            own_answer(c, r, status, why, None, false).await;
            Ended::Refused {
                keep: false,
                linger: f == ClientFailure::BadChunks,
            }
        }
        None => Ended::Gone,
    }
}

/// Counts a failure of the client's while its answer was sent; the
/// attempt ends with it ([`Tried::ClientGone`]).
pub fn send_failed(e: &Engine, err: SendError) -> Tried {
    e.metrics.client_error(err.reason());
    Tried::ClientGone
}

/// What a failed attempt at the upstream `stage` is.
pub fn failed(stage: Stage, failure: Failure) -> Tried {
    Tried::Failed(Attempt { stage, failure })
}
