//! One request, whichever protocol carried it (an HTTP/1 connection's
//! request, an HTTP/2 stream): its route (one library call), then
//! attempts at backends in failover order under [`crate::policy`]'s rules
//! (connect, send the head and the body, read the response head: an
//! HTTP/1 backend through [`super::upstream_h1`], an HTTP/2 one through
//! [`super::h2::upstream`]), the response relayed to the client, and what
//! the request leaves behind ([`Record`]). What differs between the
//! protocols on the client's side is a [`Client`](super::attempt::Client).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::attempt::{Attempted, Client, ClientFailure};
use super::grpc;
use super::record::{Answer, Record};
use super::request::Req;
use super::request_head::Refusal;
use super::upstream::{self, UpstreamConn};
use super::Engine;
use crate::policy::route::{choose, decide, previous_owner, Decision};
use crate::policy::{self, Attempt, RetryFacts, Stage};
use crate::state::RoutingState;

/// How an exchange ended, for the client's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchanged {
    /// A response went out: the client's side decided its connection's
    /// fate.
    Answered,
    /// The router answered itself (the answer said whether the connection
    /// is kept: the client's side holds that).
    Refused,
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
) -> Exchanged {
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
            own_answer(c, r, 500, "the request could not be routed", None).await;
            return Exchanged::Refused;
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
                true => Exchanged::Answered,
                false => Exchanged::Gone,
            }
        }
        Err(_) => {
            r.status = 504;
            r.grpc_status = Some(grpc::DEADLINE_EXCEEDED);
            let backend = r.backend_named(state);
            c.answer_grpc(grpc::DEADLINE_EXCEEDED, grpc::DEADLINE_WORDS, backend)
                .await;
            Exchanged::Refused
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
) -> Exchanged {
    let server = &state.validated.config.server;
    let send_timeout = Duration::from_millis(server.send_timeout_ms);
    if let Err(f) = c.continue_if_asked(send_timeout).await {
        return client_failed(e, c, r, f).await;
    }
    if let Err(f) = c.buffer_small_body().await {
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
            return Exchanged::Gone;
        }
        r.attempt_started(choice.node, choice.spills, choice.slot);
        let (attempt, reused) = match upstream::connect(state, &state.backends[choice.node]).await {
            Ok(up) if c.left().await => {
                // It left while the router connected: the connection is
                // clean, for the next request.
                if let UpstreamConn::H1(conn) = up {
                    conn.done(true, server.upstream_keepalive_pool_size);
                }
                r.attempt_ended(state);
                return Exchanged::Gone;
            }
            Ok(up) => {
                let reused = up.reused();
                match attempt(e, c, state, r, up).await {
                    Attempted::Relayed => return Exchanged::Answered,
                    Attempted::ClientGone => return Exchanged::Gone,
                    Attempted::ClientFailed(f) => return client_failed(e, c, r, f).await,
                    Attempted::Failed(a) => (a, reused),
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
            return Exchanged::Gone;
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

/// A request whose head was refused (an HTTP/1 head by its reader, an
/// HTTP/2 stream's by nginx's rules: one fault, one answer either way):
/// counted and answered; nothing was read of its body, so its connection
/// is not kept.
pub(crate) async fn refuse<C: Client>(
    e: &Engine,
    c: &mut C,
    r: &mut Record,
    no: &Refusal,
) -> Exchanged {
    e.metrics.client_error(no.reason);
    own_answer(c, r, no.status, no.why, None).await;
    Exchanged::Refused
}

/// The router's own answer: as HTTP, or to a gRPC call trailers-only
/// with the `grpc-status` Envoy maps `status` to.
async fn own_answer<C: Client>(
    c: &mut C,
    r: &mut Record,
    status: u16,
    words: &str,
    backend: Option<&[u8]>,
) {
    r.status = status;
    if r.grpc {
        let code = grpc::status_of_http(status);
        r.grpc_status = Some(code);
        c.answer_grpc(code, words, backend).await;
    } else {
        c.answer(status, words, backend).await;
    }
}

/// One attempt at the connected backend `up`.
async fn attempt<C: Client>(
    e: &Engine,
    c: &mut C,
    state: &Arc<RoutingState>,
    r: &mut Record,
    up: UpstreamConn,
) -> Attempted {
    match up {
        UpstreamConn::H1(conn) => super::upstream_h1::attempt(e, c, state, r, conn).await,
        UpstreamConn::H2(send) => super::h2::upstream::attempt(e, c, state, r, send).await,
    }
}

/// The router's own answer when no backend served the request (the
/// connection kept when the request was read whole, as nginx keeps it).
async fn fail<C: Client>(
    c: &mut C,
    r: &mut Record,
    state: &RoutingState,
    exhausted: bool,
) -> Exchanged {
    let Answer {
        status,
        words,
        backend,
    } = r.answer(state, exhausted);
    own_answer(c, r, status, &words, backend).await;
    Exchanged::Refused
}

/// The client failed the request (its body): counted, answered when it
/// can still be (408 for a stalled body, 400 for bad chunked framing).
async fn client_failed<C: Client>(
    e: &Engine,
    c: &mut C,
    r: &mut Record,
    f: ClientFailure,
) -> Exchanged {
    e.metrics.client_error(f.reason());
    match f.answer() {
        Some((status, why)) => {
            own_answer(c, r, status, why, None).await;
            Exchanged::Refused
        }
        None => Exchanged::Gone,
    }
}
