//! One request through the engine: its route (one library call), then
//! attempts at backends in failover order under [`crate::policy`]'s rules
//! (connect, send the head and the body, read the response head), then
//! the response relayed to the client, the connection kept for both sides
//! where it can be, and what the request leaves behind recorded.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ketama::load::LoadGuard;
use ketama::Route;

use super::conn::Conn;
use super::forward;
use super::relay::{self, Body, ClientFailure};
use super::reply;
use super::request::Request;
use super::respond::{self, Ketama, NoHead, Relayed};
use super::response::ResponseHead;
use super::upload::{self, SendFailure, Sent, Watch};
use super::upstream::{self, Upstream};
use super::{buffers, Engine};
use crate::policy::end::Ended;
use crate::policy::route::{choose, decide, moved, previous_owner};
use crate::policy::{self, Attempt, Failure, RetryFacts, Stage};
use crate::state::RoutingState;

/// What an exchange keeps track of, for its failovers and its record.
#[derive(Default)]
struct Track {
    route: Option<Route>,
    rule: Option<usize>,
    attempts: usize,
    backend: Option<usize>,
    spills: u32,
    slot: Option<LoadGuard>,
    started: Option<Instant>,
    upstream_status: Option<u16>,
    /// The response's cache result.
    cache: Option<ketama_config::cache_status::CacheResult>,
    /// The key's previous owner (the old ring's choice), on a `new` route.
    previous: Option<usize>,
    upstream_failed: bool,
    head_sent: Option<Instant>,
    upstream_time: Option<Duration>,
    status: u16,
    bytes_sent: u64,
    /// The last attempt's failure.
    failure: Option<Failure>,
}

impl Track {
    /// The current attempt ended: one upstream observation.
    fn attempt_ended(&mut self, state: &RoutingState) {
        if let (Some(sent), Some(n)) = (self.head_sent.take(), self.backend) {
            let d = sent.elapsed();
            state.backends[n].metrics.upstream(d.as_secs_f64());
            self.upstream_time = Some(d);
        }
    }
}

/// Serves the request whose head `c` holds; gives the connection back,
/// and whether it serves another request (`c.used` says how much of its
/// buffer this one used). It takes the connection and the state by value
/// so that its future borrows nothing of its caller's: the connection's
/// loop keeps one such future's memory for the next request while the
/// client is busy (see [`super::conn`]).
pub async fn exchange(
    e: Arc<Engine>,
    mut c: Conn,
    state: Arc<RoutingState>,
    began: Instant,
) -> (Conn, bool) {
    let mut t = Track::default();
    let keep = run(&e, &mut c, &state, &mut t).await;
    t.attempt_ended(&state);
    t.slot = None;
    record(&e, &c, &state, began, &t);
    (c, keep)
}

/// Records a request whose head was refused after its request line.
pub fn record_refused(e: &Engine, c: &Conn, state: &RoutingState, began: Instant, status: u16) {
    let t = Track {
        status,
        ..Track::default()
    };
    record(e, c, state, began, &t);
}

/// What the request leaves behind ([`crate::policy::end::record`]).
fn record(e: &Engine, c: &Conn, state: &RoutingState, began: Instant, t: &Track) {
    let req = Request {
        head: &c.head,
        buf: &c.buf,
    };
    let header = |name: &[u8]| req.head.header(req.buf, name).unwrap_or(b"");
    let ended = Ended {
        state,
        route: t.route.as_ref(),
        rule: t.rule,
        backend: t.backend,
        started: t.started,
        upstream_status: t.upstream_status,
        cache: t.cache,
        moved: moved(t.route.as_ref(), t.previous, t.backend),
        upstream_failed: t.upstream_failed,
        attempts: t.attempts,
        spills: t.spills,
        upstream_time: t.upstream_time,
        began,
        status: t.status,
        bytes_sent: t.bytes_sent,
        client: c.peer,
        method: std::str::from_utf8(req.method()).unwrap_or("-"),
        uri: req.head.request_uri.of(req.buf),
        protocol: req.protocol(),
        referer: header(b"referer"),
        user_agent: header(b"user-agent"),
    };
    crate::policy::end::record(&ended, &e.access_log, &e.metrics);
}

/// The exchange proper; `t` keeps what it did for the record.
async fn run(e: &Engine, c: &mut Conn, state: &Arc<RoutingState>, t: &mut Track) -> bool {
    let server = &state.validated.config.server;
    let send_timeout = Duration::from_millis(server.send_timeout_ms);
    let decided = decide(
        &Request {
            head: &c.head,
            buf: &c.buf,
        },
        state,
    );
    let (route, rule) = match decided {
        Ok(d) => d,
        Err(err) => {
            tracing::error!("no route: {err}");
            t.status = 500;
            reply::error(
                c,
                500,
                "the request could not be routed",
                None,
                false,
                send_timeout,
            )
            .await;
            return false;
        }
    };
    e.metrics.lookup(route.version());
    let req = Request {
        head: &c.head,
        buf: &c.buf,
    };
    t.previous = previous_owner(&req, state, &route).unwrap_or_else(|err| {
        tracing::error!("no previous owner: {err}");
        None
    });
    t.route = Some(route);
    t.rule = rule;
    t.started = Some(Instant::now());

    // A small body is read whole before any backend is tried, so a
    // failover can send it again (as Pingora's retry buffer allowed).
    let mut body = Body::of(&c.head);
    if let Err(f) = relay::continue_if_asked(c, send_timeout).await {
        return client_failed(e, c, t, f, send_timeout).await;
    }
    if let Err(f) = relay::buffer_small_body(c, &mut body, server).await {
        return client_failed(e, c, t, f, send_timeout).await;
    }
    loop {
        let Some(route) = t.route.as_mut() else {
            unreachable!("set above")
        };
        t.slot = None;
        t.upstream_time = None;
        let chosen = choose(state, route).unwrap_or_else(|err| {
            tracing::error!("no backend: {err}");
            None
        });
        let Some(choice) = chosen else {
            return fail(c, t, state, &body, true, send_timeout).await;
        };
        t.spills += choice.spills;
        t.slot = choice.slot;
        t.attempts += 1;
        t.backend = Some(choice.node);
        let backend = &state.backends[choice.node];
        let (attempt, reused) = match upstream::connect(state, backend).await {
            Ok(up) => match attempt(e, c, state, t, up, &body).await {
                Tried::Done(keep) => return keep,
                Tried::ClientFailed(f) => return client_failed(e, c, t, f, send_timeout).await,
                Tried::Failed { attempt, reused } => (attempt, reused),
            },
            Err(f) => (
                Attempt {
                    stage: Stage::Connect,
                    failure: f,
                },
                false,
            ),
        };
        t.failure = Some(attempt.failure);
        t.attempt_ended(state);
        attempt_failed(e, t, state, attempt);
        if attempt.stage == Stage::Answered {
            // The client has part of the answer: its connection ends.
            return false;
        }
        let req = Request {
            head: &c.head,
            buf: &c.buf,
        };
        let facts = RetryFacts {
            idempotent: req.idempotent(),
            body_replayable: body.replayable(),
            reused,
            attempts: t.attempts,
            retries: server.retries,
        };
        if policy::retry(attempt, facts) {
            continue;
        }
        t.upstream_failed = true;
        return fail(c, t, state, &body, false, send_timeout).await;
    }
}

/// Counts a failed attempt where the policy says: against the backend,
/// or, after its head arrived, in `ketama_upstream_errors_total`.
fn attempt_failed(e: &Engine, t: &Track, state: &RoutingState, a: Attempt) {
    let Some(n) = t.backend else { return };
    if let Some(reason) = a.after_head_reason() {
        e.metrics.upstream_error(reason);
        return;
    }
    policy::record_failure(&state.backends[n], a, &describe(a.failure));
}

/// A failure in words, for logs and error bodies (as Pingora's path
/// words them).
pub fn describe(f: Failure) -> &'static str {
    match f {
        Failure::Connect => "the backend refused the connection",
        Failure::ConnectTimeout => "the backend did not accept the connection in time",
        Failure::Timeout => "no response in time",
        Failure::Broken => "the connection closed early",
        Failure::BadResponse => "malformed request or response head",
        Failure::Other => "the request could not be proxied",
    }
}

/// How one attempt ended.
enum Tried {
    /// The response was relayed: whether the client's connection goes on.
    Done(bool),
    /// The backend failed it.
    Failed { attempt: Attempt, reused: bool },
    /// The client failed it.
    ClientFailed(ClientFailure),
}

/// Writes the request head for `backend` into `out`.
fn request_head(
    c: &Conn,
    forwarded: bool,
    hint: Option<(&[u8], Option<&[u8]>)>,
    out: &mut Vec<u8>,
) {
    let req = Request {
        head: &c.head,
        buf: &c.buf,
    };
    let (slash, target) = req.forward_target();
    let with_slash;
    let target = if slash {
        with_slash = [b"/".as_slice(), target].concat();
        &with_slash[..]
    } else {
        target
    };
    let fwd = forward::Upstream {
        target,
        host: req.authority(),
        chunked: c.head.chunked,
        websocket: forward::is_websocket(&c.head, &c.buf),
        forwarded: forwarded.then_some((c.peer, c.tls)),
        hint,
    };
    forward::request_head(&c.head, &c.buf, &fwd, out);
}

/// One attempt at the connected backend: the request, the response head,
/// the response.
async fn attempt(
    e: &Engine,
    c: &mut Conn,
    state: &Arc<RoutingState>,
    t: &mut Track,
    mut up: Upstream,
    body: &Body,
) -> Tried {
    let server = &state.validated.config.server;
    let n = t.backend.unwrap_or_else(|| unreachable!("chosen"));
    let backend = &state.backends[n];
    let limits = backend.limits;
    let reused = up.reused;
    let failed = |stage, failure| Tried::Failed {
        attempt: Attempt { stage, failure },
        reused,
    };
    let mut out = buffers::take();
    let told = crate::policy::route::previous_owner_hint(state, t.route.as_ref(), t.previous, n);
    let hint = state
        .previous_owner_header
        .as_ref()
        .map(|h| (h.as_str().as_bytes(), told.map(str::as_bytes)));
    if told.is_some() {
        e.metrics.previous_owner_hint();
    }
    request_head(c, server.forwarded_headers, hint, &mut out);
    t.head_sent = Some(Instant::now());
    let mut rb = buffers::take();
    let mut head = ResponseHead::new();
    let mut watch = Watch {
        rb: &mut rb,
        head: &mut head,
    };
    let sent = upload::send_request(
        c,
        &mut up,
        body,
        &out,
        &mut watch,
        server,
        limits.write_timeout,
    )
    .await;
    buffers::give(out);
    let early = match sent {
        Ok(s) => s == Sent::Answered,
        Err(f) => {
            buffers::give(rb);
            return match f {
                SendFailure::Upstream(stage, f) => failed(stage, f),
                SendFailure::Client(f) => Tried::ClientFailed(f),
            };
        }
    };
    let got = respond::read_head(c, &mut up.io, &mut rb, &mut head, limits.read_timeout).await;
    match got {
        Ok(()) => {}
        Err(NoHead::Upstream(f)) => {
            buffers::give(rb);
            return failed(Stage::AwaitingHead, f);
        }
        Err(NoHead::ClientGone) => {
            buffers::give(rb);
            t.attempt_ended(state);
            return Tried::ClientFailed(ClientFailure::Disconnected);
        }
    }
    // A switch of protocols nobody asked for is no answer to this request:
    // what follows would pass unrouted (nginx reads it as the next
    // request; the router refuses the response).
    if head.status == 101 && !forward::is_websocket(&c.head, &c.buf) {
        buffers::give(rb);
        return failed(Stage::AwaitingHead, Failure::BadResponse);
    }
    t.upstream_status = Some(head.status);
    let name = state.cache.header().as_bytes();
    t.cache = Some(
        state.cache.classify(
            head.headers
                .iter()
                .filter(|h| h.name.of(&rb).eq_ignore_ascii_case(name))
                .map(|h| h.value.of(&rb)),
        ),
    );
    let is_head = Request {
        head: &c.head,
        buf: &c.buf,
    }
    .is_head();
    let ketama = server.response_headers.then(|| Ketama {
        backend: backend.header.as_bytes(),
        ring: t.route.as_ref().map_or("only", |r| r.version().name()),
        spills: t.spills,
    });
    let relayed = respond::respond(
        c,
        state,
        &mut up.io,
        &mut rb,
        &head,
        is_head,
        early,
        ketama,
        limits.read_timeout,
    )
    .await;
    buffers::give(rb);
    match relayed {
        Relayed::Done {
            status,
            bytes,
            keep_client,
            reuse_upstream,
        } => {
            t.status = status;
            t.bytes_sent = bytes;
            t.attempt_ended(state);
            if reuse_upstream {
                super::pool::put(&up.key, up.io, server.upstream_keepalive_pool_size);
            }
            if early {
                // The client may still be sending the body nobody reads:
                // it gets the answer before the close (`reply::linger`).
                reply::linger(c).await;
            }
            Tried::Done(keep_client)
        }
        Relayed::Upstream {
            failure,
            status,
            bytes,
        } => {
            t.status = status;
            t.bytes_sent = bytes;
            failed(Stage::Answered, failure)
        }
        Relayed::Client {
            error,
            status,
            bytes,
        } => {
            t.status = status;
            t.bytes_sent = bytes;
            e.metrics.client_error(error.reason());
            t.attempt_ended(state);
            Tried::Done(false)
        }
    }
}

/// The router's own answer when no backend served the request: 502 when
/// none was left (`exhausted`: every candidate out of rotation or tried),
/// else the last failure's 502 or 504, naming the last backend tried; the
/// connection kept when the request was read whole (nginx keeps it).
async fn fail(
    c: &mut Conn,
    t: &mut Track,
    state: &RoutingState,
    body: &Body,
    exhausted: bool,
    send_timeout: Duration,
) -> bool {
    let (status, why) = match t.failure {
        Some(f) if !exhausted => (f.status(), describe(f)),
        _ => (502, "no healthy backend left for this key"),
    };
    let words = format!(
        "no backend could serve this request (tried {}): {why}",
        t.attempts
    );
    let named = if state.validated.config.server.response_headers {
        t.backend.map(|n| state.backends[n].header.as_bytes())
    } else {
        None
    };
    let whole = body.read_whole();
    let keep = whole && c.head.wants_keep_alive() && !c.closing();
    t.status = status;
    reply::error(c, status, &words, named, keep, send_timeout).await;
    if !whole {
        reply::linger(c).await;
    }
    keep
}

/// The client failed the request (its body): counted, answered when it
/// can still be (408 for a stalled body, 400 for bad chunked framing).
async fn client_failed(
    e: &Engine,
    c: &mut Conn,
    t: &mut Track,
    f: ClientFailure,
    send_timeout: Duration,
) -> bool {
    e.metrics.client_error(f.reason());
    if let Some((status, why)) = f.answer() {
        t.status = status;
        reply::error(c, status, why, None, false, send_timeout).await;
        if f == ClientFailure::BadChunks {
            reply::linger(c).await;
        }
    }
    false
}
