//! The one record of a request, whichever protocol carried it: what its
//! exchange did (route, attempts and their backends, the upstream status
//! and cache result, the previous owner), the router's own answer when no
//! backend served it, the `x-ketama-*` fields both protocols write, and
//! what it leaves behind ([`crate::policy::end::record`]).

use std::time::{Duration, Instant};

use ketama::load::LoadGuard;
use ketama::Route;
use ketama_config::cache_status::CacheResult;

use super::request::Req;
use super::Engine;
use crate::policy::end::Ended;
use crate::policy::route::moved;
use crate::policy::{Attempt, Failure};
use crate::state::RoutingState;

/// What an exchange did, for its failovers and its record.
#[derive(Default)]
pub struct Record {
    /// Its route, once made.
    pub route: Option<Route>,
    /// The label rule that applied.
    pub rule: Option<usize>,
    /// Backends tried so far.
    pub attempts: usize,
    /// The current (or last) attempt's backend.
    pub backend: Option<usize>,
    /// Full backends passed over (bounded loads).
    pub spills: u32,
    /// The request's slot on its backend (bounded loads), given back when
    /// the request ends or moves to another backend.
    pub slot: Option<LoadGuard>,
    /// When a backend was first chosen.
    pub started: Option<Instant>,
    /// The status the backend answered, once its head arrived.
    pub upstream_status: Option<u16>,
    /// The response's cache result.
    pub cache: Option<CacheResult>,
    /// The key's previous owner (the old ring's choice), on a `new` route.
    pub previous: Option<usize>,
    /// The request ended on a failure of the backend's own.
    pub upstream_failed: bool,
    /// When the current attempt sent its request head.
    head_sent: Option<Instant>,
    /// The final attempt's time in its backend.
    upstream_time: Option<Duration>,
    /// The status sent to the client (0: none).
    pub status: u16,
    /// Response body bytes sent.
    pub bytes_sent: u64,
    /// The last attempt's failure.
    pub failure: Option<Failure>,
    /// The request is a gRPC call (`content-type: application/grpc*`).
    pub grpc: bool,
    /// A gRPC call's deadline (its `grpc-timeout`, capped).
    pub deadline: Option<Instant>,
    /// A `Set-Cookie` value for a cookie the key generated (Envoy's
    /// `cookie` hash policy with a `ttl`).
    pub set_cookie: Option<String>,
    /// The `grpc-status` the call ended with (a backend's, or the
    /// router's own answer's).
    pub grpc_status: Option<u8>,
}

/// A failure in words, for logs and error bodies.
pub fn describe(f: Failure) -> &'static str {
    match f {
        Failure::Connect => "the backend refused the connection",
        Failure::ConnectTimeout => "the backend did not accept the connection in time",
        Failure::Timeout => "no response in time",
        Failure::Broken => "the connection closed early",
        Failure::BadResponse => "malformed request or response head",
        Failure::Refused => "the backend refused the stream (REFUSED_STREAM or GOAWAY)",
        Failure::Other => "the request could not be proxied",
    }
}

/// The `x-ketama-*` fields of a response, ready for either protocol's
/// writer (no allocation).
pub struct Ketama<'s> {
    fields: [(&'static [u8], &'s [u8]); 2],
    len: usize,
    spill: [u8; 10],
    spill_len: usize,
    set_cookie: Option<&'s [u8]>,
}

impl Ketama<'_> {
    /// The fields as `(name, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let spill =
            (self.spill_len > 0).then(|| (&b"x-ketama-spill"[..], &self.spill[..self.spill_len]));
        let cookie = self.set_cookie.map(|v| (&b"set-cookie"[..], v));
        self.fields[..self.len]
            .iter()
            .map(|&(n, v)| (n, v))
            .chain(spill)
            .chain(cookie)
    }
}

/// The router's own answer: its status, its words, and the backend it
/// names (`x-ketama-backend`).
pub struct Answer<'a> {
    /// 502 or 504.
    pub status: u16,
    /// What happened.
    pub words: String,
    /// The last backend tried, when `response_headers` is on.
    pub backend: Option<&'a [u8]>,
}

impl Record {
    /// A new attempt at `node`: its slot, the spills it cost.
    pub fn attempt_started(&mut self, node: usize, spills: u32, slot: Option<LoadGuard>) {
        self.spills += spills;
        self.slot = slot;
        self.attempts += 1;
        self.backend = Some(node);
        self.upstream_time = None;
    }

    /// The current attempt's request head is on its way.
    pub fn head_sent(&mut self) {
        self.head_sent = Some(Instant::now());
    }

    /// The current attempt ended: one upstream observation.
    pub fn attempt_ended(&mut self, state: &RoutingState) {
        if let (Some(sent), Some(n)) = (self.head_sent.take(), self.backend) {
            let d = sent.elapsed();
            state.backends[n].metrics.upstream(d.as_secs_f64());
            self.upstream_time = Some(d);
        }
    }

    /// The backend's response head arrived: its status and cache result
    /// (the `[cache_status]` field's values).
    pub fn answered<'v>(
        &mut self,
        state: &RoutingState,
        status: u16,
        cache_values: impl Iterator<Item = &'v [u8]>,
    ) {
        self.upstream_status = Some(status);
        self.cache = Some(state.cache.classify(cache_values));
    }

    /// A failed attempt counted where the policy says: against the
    /// backend, or, after its head arrived (or while the client's upload
    /// lagged), in `ketama_upstream_errors_total`.
    pub fn attempt_failed(&mut self, e: &Engine, state: &RoutingState, a: Attempt) {
        self.failure = Some(a.failure);
        self.attempt_ended(state);
        let Some(n) = self.backend else { return };
        if let Some(reason) = a.after_head_reason() {
            e.metrics.upstream_error(reason);
            return;
        }
        crate::policy::record_failure(&state.backends[n], a, &describe(a.failure));
    }

    /// The fields the router adds to a response from backend `n`: the
    /// `x-ketama-*` ones (none without `response_headers`), and the
    /// `Set-Cookie` of a cookie the key generated.
    pub fn ketama_fields<'s>(&'s self, state: &'s RoutingState, n: usize) -> Ketama<'s> {
        let mut k = Ketama {
            fields: [(&[][..], &[][..]); 2],
            len: 0,
            spill: [0; 10],
            spill_len: 0,
            set_cookie: self.set_cookie.as_deref().map(str::as_bytes),
        };
        if !state.validated.config.server.response_headers {
            return k;
        }
        let ring = self.route.as_ref().map_or("only", |r| r.version().name());
        k.fields = [
            (b"x-ketama-backend", state.backends[n].header.as_bytes()),
            (b"x-ketama-ring", ring.as_bytes()),
        ];
        k.len = 2;
        if self.spills > 0 {
            let mut digits = itoa::Buffer::new();
            let d = digits.format(self.spills).as_bytes();
            k.spill[..d.len()].copy_from_slice(d);
            k.spill_len = d.len();
        }
        k
    }

    /// The router's own answer when no backend served the request: 502
    /// when none was left (`exhausted`: every candidate out of rotation
    /// or tried), else the last failure's 502 or 504, naming the last
    /// backend tried.
    pub fn answer<'s>(&mut self, state: &'s RoutingState, exhausted: bool) -> Answer<'s> {
        let (status, why) = match self.failure {
            Some(f) if !exhausted => (f.status(), describe(f)),
            _ => (502, "no healthy backend left for this key"),
        };
        let backend = self.backend_named(state);
        Answer {
            status,
            words: format!(
                "no backend could serve this request (tried {}): {why}",
                self.attempts
            ),
            backend,
        }
    }

    /// The last backend tried, as `x-ketama-backend` names it (none
    /// without `response_headers`).
    pub fn backend_named<'s>(&self, state: &'s RoutingState) -> Option<&'s [u8]> {
        if !state.validated.config.server.response_headers {
            return None;
        }
        self.backend.map(|n| state.backends[n].header.as_bytes())
    }

    /// What the request leaves behind ([`crate::policy::end::record`]).
    pub fn end(
        &mut self,
        e: &Engine,
        state: &RoutingState,
        req: &impl Req,
        client: Option<std::net::IpAddr>,
        began: Instant,
    ) {
        self.attempt_ended(state);
        self.slot = None;
        // Both sides' keys during a key migration.
        let keys = std::iter::once(&state.plan.key).chain(state.plan.new_key.as_ref());
        let (any_field, scheme) = keys.fold((false, false), |(f, s), k| {
            (f || k.reads_any_field(), s || k.reads_scheme())
        });
        let fields = |f: &mut crate::access_log::line::FieldVisitor<'_>| {
            for (n, v) in ketama::request::Request::headers(req) {
                let mut keys = std::iter::once(&state.plan.key).chain(state.plan.new_key.as_ref());
                if keys.any(|k| k.reads_field(n)) {
                    f(n, v);
                }
            }
        };
        let ended = Ended {
            state,
            route: self.route.as_ref(),
            rule: self.rule,
            backend: self.backend,
            started: self.started,
            upstream_status: self.upstream_status,
            cache: self.cache,
            moved: moved(self.route.as_ref(), self.previous, self.backend),
            upstream_failed: self.upstream_failed,
            attempts: self.attempts,
            spills: self.spills,
            upstream_time: self.upstream_time,
            began,
            status: self.status,
            bytes_sent: self.bytes_sent,
            grpc_status: self.grpc_status,
            client,
            method: std::str::from_utf8(req.method()).unwrap_or("-"),
            uri: ketama::request::Request::request_uri(req),
            protocol: req.protocol(),
            fields: any_field.then_some(crate::access_log::line::KeyFields(&fields)),
            scheme: scheme.then_some(match req.tls() {
                true => "https",
                false => "http",
            }),
            target: (any_field || scheme)
                .then(|| ketama::request::Request::absolute_target(req))
                .flatten(),
            referer: req.field(b"referer").unwrap_or(b""),
            user_agent: req.field(b"user-agent").unwrap_or(b""),
        };
        crate::policy::end::record(&ended, &e.access_log, &e.metrics);
    }
}
