//! The proxy: the request's framing checked (see [`crate::framing`]), its
//! routing key and label rule, then the library's routing decision
//! (`RouteTable::route`, once per request), then the first healthy backend
//! in its failover order, the next one on connect failure, a 502 when none
//! is left.
//!
//! Whose fault a failure was decides what is counted ([`crate::policy`]):
//! a backend's counters get the statuses it answered and its own failures
//! (connect, timeout, broken response before its head); a client's bad
//! framing, disconnect or timeout goes to
//! `ketama_client_errors_total{reason}`, and an exchange broken after the
//! backend's head to `ketama_upstream_errors_total{reason}`, never to the
//! backend's health.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use ketama::load::LoadGuard;
use ketama::Route;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::{Error, ErrorSource, ErrorType};

use crate::access_log::AccessLog;
use crate::metrics::Metrics;
use crate::state::{RoutingState, StateReader};

mod failure;
mod log;
mod route;

pub use crate::policy::route::{
    choose, decide, matching_rule, with_routing_key, Choice, RequestView,
};
pub use route::PingoraRequest;

/// The Pingora proxy logic.
pub struct Router {
    /// The current routing state.
    pub routing: StateReader,
    /// The counters.
    pub metrics: Arc<Metrics>,
    /// Where each request's line goes, when `[access_log]` is on.
    pub access_log: AccessLog,
}

/// Per-request selection state.
#[derive(Default)]
pub struct Ctx {
    state: Option<Arc<RoutingState>>,
    route: Option<Route>,
    /// Backends tried so far.
    attempts: usize,
    backend: Option<usize>,
    started: Option<Instant>,
    /// Set when every backend was tried or unhealthy.
    exhausted: bool,
    /// The status the backend answered, once its response head arrived.
    upstream_status: Option<u16>,
    /// What its cache-status header said.
    cache: Option<ketama_config::cache_status::CacheResult>,
    /// The key's previous owner (the old ring's choice), on a `new` route.
    previous: Option<usize>,
    /// Full backends passed over (bounded loads).
    spills: u32,
    /// The request's slot on its backend (bounded loads), given back when
    /// the request ends or moves to another backend.
    slot: Option<LoadGuard>,
    /// When the request began: its head's first byte on HTTP/1, the
    /// proxy's first look at it on HTTP/2.
    began: Option<Instant>,
    /// The label rule that applied (its index in the plan).
    rule: Option<usize>,
    /// When the current attempt sent its request head.
    head_sent: Option<Instant>,
    /// The final attempt's time in its backend.
    upstream_time: Option<Duration>,
    /// The target as the client sent it, when Pingora's header holds
    /// another (absolute-form, `#`, bytes Pingora refuses): routed and
    /// forwarded by.
    sent: Option<crate::reqline::Sent>,
}

impl Ctx {
    /// How many backends were tried.
    pub fn attempts(&self) -> usize {
        self.attempts
    }
}

thread_local! {
    /// `X-Forwarded-For` values of recent client addresses (a request
    /// without one of its own gets its client's address), direct-mapped
    /// by address: a keep-alive connection's requests reuse one value, a
    /// reference count each.
    static XFF_CACHE: RefCell<Vec<Option<(std::net::IpAddr, http::HeaderValue)>>> =
        const { RefCell::new(Vec::new()) };
}

/// Slots of each thread's `X-Forwarded-For` cache (about 100 bytes each).
const XFF_CACHE_SIZE: usize = 256;

/// The `X-Forwarded-For` value for a request from `ip` that brought none:
/// from the thread's cache (no allocation), or built and cached.
fn forwarded_for(ip: std::net::IpAddr) -> http::HeaderValue {
    let slot = match ip {
        std::net::IpAddr::V4(a) => u32::from(a) as usize,
        std::net::IpAddr::V6(a) => (u128::from(a) ^ u128::from(a) >> 64) as usize,
    } % XFF_CACHE_SIZE;
    XFF_CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_empty() {
            c.resize(XFF_CACHE_SIZE, None);
        }
        match &c[slot] {
            Some((a, v)) if *a == ip => v.clone(),
            _ => {
                let v = http::HeaderValue::from_str(&ip.to_string())
                    .unwrap_or_else(|_| http::HeaderValue::from_static("unknown"));
                c[slot] = Some((ip, v.clone()));
                v
            }
        }
    })
}

/// Adds the headers a proxy owes its upstream: `X-Forwarded-For` (what
/// came in, every line in order, then the client's address) and
/// `X-Forwarded-Proto` (`https` when the client came over TLS).
/// Allocates nothing for a request without an `X-Forwarded-For` of its
/// own from a recent client address.
pub fn add_forwarded_headers(
    upstream: &mut RequestHeader,
    ip: Option<std::net::IpAddr>,
    tls: bool,
) -> Result<()> {
    if let Some(ip) = ip {
        let value = if upstream.headers.contains_key("x-forwarded-for") {
            let mut xff = String::new();
            for v in upstream.headers.get_all("x-forwarded-for") {
                if let Ok(v) = v.to_str() {
                    xff.push_str(v);
                    xff.push_str(", ");
                }
            }
            use std::fmt::Write as _;
            let _ = write!(xff, "{ip}");
            http::HeaderValue::from_str(&xff)
                .unwrap_or_else(|_| http::HeaderValue::from_static("unknown"))
        } else {
            forwarded_for(ip)
        };
        upstream.insert_header("x-forwarded-for", value)?;
    }
    let proto = if tls { "https" } else { "http" };
    upstream.insert_header("x-forwarded-proto", http::HeaderValue::from_static(proto))?;
    Ok(())
}

/// Adds `x-ketama-backend`, `x-ketama-ring` and (when the request spilled)
/// `x-ketama-spill` to a response: prebuilt values, no allocation.
pub fn add_response_headers(
    resp: &mut ResponseHeader,
    state: &RoutingState,
    backend: Option<usize>,
    version: ketama::Version,
    spills: u32,
) -> Result<()> {
    if let Some(n) = backend {
        resp.insert_header("x-ketama-backend", state.backends[n].header.clone())?;
    }
    resp.insert_header(
        "x-ketama-ring",
        http::HeaderValue::from_static(version.name()),
    )?;
    if spills > 0 {
        resp.insert_header("x-ketama-spill", spill_header(spills))?;
    }
    Ok(())
}

/// The `x-ketama-spill` value: static for the common counts (no
/// allocation), formatted beyond.
fn spill_header(n: u32) -> http::HeaderValue {
    const SMALL: [&str; 9] = ["0", "1", "2", "3", "4", "5", "6", "7", "8"];
    match SMALL.get(n as usize) {
        Some(s) => http::HeaderValue::from_static(s),
        None => http::HeaderValue::from(n),
    }
}

#[async_trait]
impl ProxyHttp for Router {
    type CTX = Ctx;

    fn new_ctx(&self) -> Ctx {
        Ctx::default()
    }

    async fn early_request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> Result<()> {
        ctx.began = Some(crate::conn::head_started().unwrap_or_else(Instant::now));
        let state = self.routing.state();
        let server = &state.validated.config.server;
        let req = session.req_header();
        let http11 = req.version == http::Version::HTTP_11;
        let refusal = if req.version == http::Version::HTTP_2 {
            Ok(())
        } else {
            crate::framing::check(&session.as_downstream().to_h1_raw(), http11)
        };
        if let Err(r) = refusal {
            self.metrics.client_error("bad_framing");
            session.set_keepalive(None);
            return Err(Error::explain(ErrorType::HTTPStatus(r.status), r.reason));
        }
        // An absolute-form target's authority stands for Host (RFC 9112
        // section 3.2.2), as in nginx: for the key, the label rules and the
        // backend.
        ctx.sent = crate::conn::take_sent();
        if let Some(authority) = ctx.sent.as_ref().and_then(|s| s.authority.as_deref()) {
            let host = http::HeaderValue::from_bytes(authority)
                .map_err(|_| Error::explain(ErrorType::HTTPStatus(400), "a bad authority"))?;
            session
                .req_header_mut()
                .insert_header(http::header::HOST, host)?;
        }
        // Between two reads of the body (Pingora's per-read timeout; a
        // request without a body needs no timer). An HTTP/2 request has a
        // body when its HEADERS frame did not end the stream, with or
        // without a Content-Length.
        let req = session.req_header();
        let has_body = req.headers.contains_key(http::header::TRANSFER_ENCODING)
            || req
                .headers
                .get(http::header::CONTENT_LENGTH)
                .is_some_and(|v| v.as_bytes() != b"0")
            || (session.as_downstream().is_http2() && !session.as_downstream_mut().is_body_empty());
        if has_body {
            session.set_read_timeout(Some(Duration::from_millis(server.client_body_timeout_ms)));
        }
        // `send_timeout_ms` on an HTTP/2 stream: Pingora's write timeout
        // bounds each wait for the client's flow-control window, so it
        // restarts whenever the client takes bytes; past it the stream is
        // reset and the connection goes on. (HTTP/1's is the connection's
        // stream wrapper's: Pingora's would bound a whole write.)
        if session.as_downstream().is_http2() {
            session.set_write_timeout(Some(Duration::from_millis(server.send_timeout_ms)));
        }
        // The request keeps the state it started with, whatever reloads do.
        ctx.state = Some(state);
        Ok(())
    }

    async fn upstream_peer(&self, session: &mut Session, ctx: &mut Ctx) -> Result<Box<HttpPeer>> {
        if ctx.route.is_none() {
            let state = ctx.state.get_or_insert_with(|| self.routing.state());
            let view = PingoraRequest {
                req: session.req_header(),
                sent: ctx.sent.as_ref(),
            };
            let (route, rule) = decide(&view, state)
                .map_err(|e| Error::explain(ErrorType::InternalError, e.to_string()))?;
            self.metrics.lookup(route.version());
            ctx.previous = crate::policy::route::previous_owner(&view, state, &route)
                .map_err(|e| Error::explain(ErrorType::InternalError, e.to_string()))?;
            ctx.route = Some(route);
            ctx.rule = rule;
            ctx.started = Some(Instant::now());
        }
        let (Some(state), Some(route)) = (&ctx.state, &mut ctx.route) else {
            unreachable!("set above");
        };
        // A retry's old slot goes back before the next is taken.
        ctx.slot = None;
        ctx.upstream_time = None;
        let chosen = match choose(state, route)
            .map_err(|e| Error::explain(ErrorType::InternalError, e.to_string()))?
        {
            Some(c) => {
                ctx.spills += c.spills;
                ctx.slot = c.slot;
                Some(c.node)
            }
            None => None,
        };
        let Some(n) = chosen else {
            ctx.exhausted = true;
            return Err(Error::explain(
                ErrorType::HTTPStatus(502),
                "no healthy backend left for this key",
            ));
        };
        ctx.attempts += 1;
        ctx.backend = Some(n);
        let b = &state.backends[n];
        let mut peer = Box::new(match &b.tls {
            None => HttpPeer::new(b.addr, false, String::new()),
            Some(sni) => {
                let mut p = HttpPeer::new(b.addr, true, sni.to_string());
                state.upstream_tls.apply(&mut p);
                p
            }
        });
        peer.options.connection_timeout = Some(b.limits.connect_timeout);
        peer.options.read_timeout = Some(b.limits.read_timeout);
        peer.options.write_timeout = Some(b.limits.write_timeout);
        Ok(peer)
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream: &mut RequestHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        ctx.head_sent = Some(Instant::now());
        if let Some(sent) = &ctx.sent {
            // Byte for byte, `#` and all, as nginx forwards it.
            upstream
                .extensions_mut()
                .insert(pingora::protocols::http::v1::client::VerbatimTarget(
                    bytes::Bytes::copy_from_slice(&sent.forward),
                ));
        }
        if let (Some(state), Some(n)) = (&ctx.state, ctx.backend) {
            if let Some(name) = &state.previous_owner_header {
                upstream.remove_header(name);
                let told = crate::policy::route::previous_owner_hint(
                    state,
                    ctx.route.as_ref(),
                    ctx.previous,
                    n,
                );
                if let Some(addr) = told {
                    upstream.insert_header(name.clone(), addr)?;
                    self.metrics.previous_owner_hint();
                }
            }
        }
        let on = ctx
            .state
            .as_ref()
            .is_some_and(|s| s.validated.config.server.forwarded_headers);
        if !on {
            return Ok(());
        }
        let ip = session
            .client_addr()
            .and_then(|a| a.as_inet())
            .map(|a| a.ip());
        let tls = session.digest().is_some_and(|d| d.ssl_digest.is_some());
        add_forwarded_headers(upstream, ip, tls)
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut Ctx,
        e: Box<Error>,
    ) -> Box<Error> {
        self.connect_failed(ctx, e)
    }

    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ctx: &mut Ctx,
        client_reused: bool,
    ) -> Box<Error> {
        let e = e.more_context(format!("Peer: {peer}"));
        let idempotent = session.req_header().method.is_idempotent();
        let replayable = !session.as_ref().retry_buffer_truncated();
        self.exchange_failed(ctx, e, idempotent, replayable, client_reused)
    }

    fn suppress_error_log(&self, _session: &Session, _ctx: &Ctx, _error: &Error) -> bool {
        // Failures are logged per backend, rate-limited (see backend_failed).
        true
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        ctx.upstream_status = Some(resp.status.as_u16());
        let (Some(state), Some(route)) = (&ctx.state, &ctx.route) else {
            return Ok(());
        };
        ctx.cache = Some(
            state.cache.classify(
                resp.headers
                    .get_all(state.cache.header())
                    .iter()
                    .map(|v| v.as_bytes()),
            ),
        );
        if state.validated.config.server.response_headers {
            add_response_headers(resp, state, ctx.backend, route.version(), ctx.spills)?;
        }
        Ok(())
    }

    async fn fail_to_proxy(&self, session: &mut Session, e: &Error, ctx: &mut Ctx) -> FailToProxy {
        use ErrorType::*;
        let code = match (e.etype(), e.esource()) {
            (HTTPStatus(c), _) => *c,
            (ConnectTimedout | ReadTimedout | WriteTimedout, ErrorSource::Upstream) => 504,
            (_, ErrorSource::Upstream) => 502,
            (WriteTimedout, ErrorSource::Downstream) => {
                // `send_timeout_ms` on HTTP/2 (the stream is reset).
                self.metrics.client_error("send_timeout");
                0
            }
            (ReadError | WriteError | ConnectionClosed, ErrorSource::Downstream) => {
                let reason = if crate::conn::is_send_timeout(e) {
                    "send_timeout"
                } else {
                    "client_disconnect"
                };
                self.metrics.client_error(reason);
                0 // nobody is left to answer
            }
            (ReadTimedout, ErrorSource::Downstream) => {
                self.metrics.client_error("body_timeout");
                408
            }
            (_, ErrorSource::Downstream) => {
                // Invalid chunked framing and the like in the request body.
                self.metrics.client_error("bad_framing");
                400
            }
            _ => 500,
        };
        if code > 0 {
            let body = match code {
                502 | 504 if ctx.exhausted || ctx.backend.is_some() => format!(
                    "ketama-router: no backend could serve this request (tried {}): {}\n",
                    ctx.attempts(),
                    in_words(e)
                ),
                _ => format!("ketama-router: {}\n", in_words(e)),
            };
            let _ = self.respond_error(session, code, body, ctx).await;
        }
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    fn upstream_response_body_filter(
        &self,
        _session: &mut Session,
        _body: &mut Option<Bytes>,
        end_of_stream: bool,
        ctx: &mut Ctx,
    ) -> Result<Option<Duration>> {
        if end_of_stream {
            self.attempt_ended(ctx);
        }
        Ok(None)
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut Ctx) {
        self.request_ended(session, e, ctx);
    }
}

/// What went wrong, in words for a response body: the router's own
/// explanation where it gave one, else the kind of failure (never
/// Pingora's internal type names or context chain).
fn in_words(e: &Error) -> String {
    use ErrorType::*;
    if let Some(c) = &e.context {
        if matches!(e.etype(), HTTPStatus(_)) {
            return c.as_str().to_string();
        }
    }
    match e.etype() {
        ConnectRefused => "the backend refused the connection",
        ConnectTimedout => "the backend did not accept the connection in time",
        ReadTimedout => "no response in time",
        WriteTimedout => "the request could not be sent in time",
        ConnectionClosed => "the connection closed early",
        ReadError => "the connection failed before the response was read",
        InvalidHTTPHeader => "malformed request or response head",
        _ => "the request could not be proxied",
    }
    .to_string()
}

impl Router {
    /// The router's own error response: with `response_headers` on, a
    /// 502 or 504 names the last backend tried in `x-ketama-backend`, so a
    /// client (or a soak's judge) can tell whose failure it was.
    async fn respond_error(
        &self,
        session: &mut Session,
        code: u16,
        body: String,
        ctx: &Ctx,
    ) -> Result<()> {
        let mut resp = pingora::protocols::http::ServerSession::generate_error(code);
        resp.set_content_length(body.len())?;
        if let (Some(state), Some(n), 502 | 504) = (&ctx.state, ctx.backend, code) {
            if state.validated.config.server.response_headers {
                resp.insert_header("x-ketama-backend", state.backends[n].header.clone())?;
            }
        }
        session.write_error_response(resp, Bytes::from(body)).await
    }
}

#[cfg(test)]
mod tests;
