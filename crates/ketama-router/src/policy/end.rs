//! What a request leaves behind when it ends, whichever path served it:
//! its backend's counters and passive health, the sampled selection trace
//! and the access log line.

use std::cell::RefCell;
use std::net::IpAddr;
use std::time::{Duration, Instant, SystemTime};

use ketama::Route;
use ketama_config::cache_status::CacheResult;

use crate::access_log::line::{self, Entry};
use crate::access_log::AccessLog;
use crate::metrics::Metrics;
use crate::state::RoutingState;

thread_local! {
    /// Where an access log line is formatted: one buffer per thread, reused.
    static LINE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// How a request ended, in the router's terms.
pub struct Ended<'a> {
    /// The routing state it was served with.
    pub state: &'a RoutingState,
    /// Its route, when one was made.
    pub route: Option<&'a Route>,
    /// The label rule that applied.
    pub rule: Option<usize>,
    /// The last attempt's backend.
    pub backend: Option<usize>,
    /// When a backend was first chosen.
    pub started: Option<Instant>,
    /// The status the last backend answered (its response head arrived).
    pub upstream_status: Option<u16>,
    /// What that response's cache-status header said (`[cache_status]`).
    pub cache: Option<CacheResult>,
    /// The key moved: the new ring routed it, and not to the old ring's
    /// first eligible backend ([`crate::policy::route::previous_owner`]).
    pub moved: bool,
    /// The request ended on a failure of the backend's own.
    pub upstream_failed: bool,
    /// Backends tried.
    pub attempts: usize,
    /// Full backends passed over (bounded loads).
    pub spills: u32,
    /// The final attempt's time in its backend.
    pub upstream_time: Option<Duration>,
    /// When the request began (its head's first byte).
    pub began: Instant,
    /// The status sent to the client (0: none).
    pub status: u16,
    /// Response body bytes sent.
    pub bytes_sent: u64,
    /// A gRPC call's `grpc-status` (`None`: not a gRPC call, or it ended
    /// without one).
    pub grpc_status: Option<u8>,
    /// The client's address.
    pub client: Option<IpAddr>,
    /// The method.
    pub method: &'a str,
    /// The target as sent.
    pub uri: &'a [u8],
    /// `HTTP/1.1`, `HTTP/2.0`, ...
    pub protocol: &'static str,
    /// The header fields the key reads, to the access log.
    pub fields: Option<crate::access_log::line::KeyFields<'a>>,
    /// The scheme, when the key reads it.
    pub scheme: Option<&'static str>,
    /// An absolute-form target, when the key reads fields or the scheme.
    pub target: Option<&'a [u8]>,
    /// `Referer`.
    pub referer: &'a [u8],
    /// `User-Agent`.
    pub user_agent: &'a [u8],
}

/// Records a request's end: the backend's counters (the status it
/// answered, or `error` for its own failure; nothing when the client
/// failed or nothing reached a backend) and a success for its passive
/// health, the cache result and answer by ring, the sampled trace line,
/// and the access log line.
pub fn record(e: &Ended<'_>, access_log: &AccessLog, metrics: &Metrics) {
    let state = e.state;
    if let Some(route) = e.route {
        let ring = route.version();
        match e.upstream_status {
            Some(s) => metrics.cache.class(ring, Some(s)),
            // The router's own failure (no backend left, or every attempt
            // failed); a client that failed is not counted.
            None if e.status >= 500 => metrics.cache.class(ring, None),
            None => {}
        }
        if let (Some(result), Some(n)) = (e.cache, e.backend) {
            metrics.cache.response(ring, e.moved, result, e.bytes_sent);
            state.backends[n].metrics.cache(result);
        }
    }
    if let (Some(n), Some(started)) = (e.backend, e.started) {
        let b = &state.backends[n];
        let seconds = started.elapsed().as_secs_f64();
        match (e.upstream_status, e.upstream_failed) {
            // The backend answered: its status, whatever came after.
            (Some(s), _) => {
                b.metrics.count(s, seconds);
                b.health.record_success();
            }
            // It failed itself: no response.
            (None, true) => b.metrics.count(0, seconds),
            // The client failed (counted as a client error) or nothing
            // reached the backend: not the backend's request.
            (None, false) => {}
        }
    }
    if let Some(code) = e.grpc_status {
        metrics.grpc_call(code);
    }
    let backend = e.backend.map_or("", |n| state.backends[n].server.as_str());
    let ring = e.route.map_or("", |r| r.version().name());
    let sample = state.validated.config.server.trace_sample;
    if sample > 0.0 {
        let hash = e.route.map_or(0, |r| r.hash());
        // Sample by the key hash's low bits: cheap and spread evenly.
        let draw = (hash.wrapping_mul(0x9E37_79B9) >> 8) as f64 / (1u32 << 24) as f64;
        if draw < sample {
            tracing::info!(
                key_hash = hash,
                ring = if ring.is_empty() { "-" } else { ring },
                backend = if backend.is_empty() { "-" } else { backend },
                attempts = e.attempts,
                status = e.status,
                "backend selection"
            );
        }
    }
    let Some(log) = &state.validated.config.access_log else {
        return;
    };
    let duration = e.began.elapsed();
    let entry = Entry {
        start: SystemTime::now() - duration,
        client: e.client,
        method: e.method,
        uri: e.uri,
        protocol: e.protocol,
        status: e.status,
        bytes_sent: e.bytes_sent,
        grpc_status: e.grpc_status,
        duration,
        backend,
        ring,
        cache: e.cache.map_or("", CacheResult::name),
        attempts: e.attempts,
        upstream: e.upstream_time,
        spilled: e.spills,
        labels: e.rule.map_or(&[][..], |i| &state.plan.rules[i].labels[..]),
        fields: e.fields,
        scheme: e.scheme,
        target: e.target,
        referer: e.referer,
        user_agent: e.user_agent,
    };
    LINE.with(|buf| {
        let mut buf = buf.borrow_mut();
        line::format(&mut buf, log.format, &entry);
        access_log.push(buf.as_bytes());
    });
}
