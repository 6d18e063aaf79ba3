//! What a request leaves behind when it ends: its backend's counters and
//! passive health, the per-attempt upstream time, the sampled selection
//! trace and the access log line.

use std::cell::RefCell;
use std::time::{Instant, SystemTime};

use pingora::proxy::Session;
use pingora::{Error, ErrorSource};

use super::{Ctx, Router};
use crate::access_log::line::{self, Entry};

thread_local! {
    /// Where an access log line is formatted: one buffer per thread, reused.
    static LINE: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The protocol as nginx's `$server_protocol` writes it.
fn protocol(v: http::Version) -> &'static str {
    match v {
        http::Version::HTTP_09 => "HTTP/0.9",
        http::Version::HTTP_10 => "HTTP/1.0",
        http::Version::HTTP_11 => "HTTP/1.1",
        http::Version::HTTP_2 => "HTTP/2.0",
        _ => "HTTP/3.0",
    }
}

impl Router {
    /// The current attempt ended (its response's last byte, or its
    /// failure): one upstream observation for its backend, kept as the
    /// request's upstream time. Nothing for an attempt that never sent
    /// its head (a connect failure).
    pub(super) fn attempt_ended(&self, ctx: &mut Ctx) {
        let (Some(sent), Some(n), Some(state)) = (ctx.head_sent.take(), ctx.backend, &ctx.state)
        else {
            return;
        };
        let d = sent.elapsed();
        state.backends[n].metrics.upstream(d.as_secs_f64());
        ctx.upstream_time = Some(d);
    }

    /// Pingora's `logging` hook; see the module docs.
    pub(super) fn request_ended(&self, session: &mut Session, e: Option<&Error>, ctx: &mut Ctx) {
        self.attempt_ended(ctx);
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        // A request refused before it had a state is logged with the
        // current one.
        let state = match &ctx.state {
            Some(s) => s.clone(),
            None => self.routing.state(),
        };
        if let (Some(n), Some(started)) = (ctx.backend, ctx.started) {
            let b = &state.backends[n];
            let seconds = started.elapsed().as_secs_f64();
            match (ctx.upstream_status, e.map(|e| e.esource())) {
                // The backend answered: its status, whatever came after.
                (Some(s), _) => {
                    b.metrics.count(s, seconds);
                    b.health.record_success();
                }
                // It failed itself: no response.
                (None, Some(ErrorSource::Upstream)) => b.metrics.count(0, seconds),
                // The client failed (counted as a client error) or nothing
                // reached the backend: not the backend's request.
                _ => {}
            }
        }
        let backend = ctx
            .backend
            .map_or("", |n| state.backends[n].server.as_str());
        let ring = ctx.route.as_ref().map_or("", |r| r.version().name());
        let sample = state.validated.config.server.trace_sample;
        if sample > 0.0 {
            let hash = ctx.route.as_ref().map_or(0, |r| r.hash());
            // Sample by the key hash's low bits: cheap and spread evenly.
            let draw = (hash.wrapping_mul(0x9E37_79B9) >> 8) as f64 / (1u32 << 24) as f64;
            if draw < sample {
                tracing::info!(
                    key_hash = hash,
                    ring = if ring.is_empty() { "-" } else { ring },
                    backend = if backend.is_empty() { "-" } else { backend },
                    attempts = ctx.attempts(),
                    status,
                    "backend selection"
                );
            }
        }
        let Some(log) = &state.validated.config.access_log else {
            return;
        };
        let began = ctx.began.unwrap_or_else(Instant::now);
        let duration = began.elapsed();
        let req = session.req_header();
        let header = |name: http::header::HeaderName| {
            req.headers.get(name).map_or(&b""[..], |v| v.as_bytes())
        };
        let entry = Entry {
            start: SystemTime::now() - duration,
            client: session
                .client_addr()
                .and_then(|a| a.as_inet())
                .map(|a| a.ip()),
            method: req.method.as_str(),
            uri: ctx.sent.as_ref().map_or(req.raw_path(), |s| &s.forward[..]),
            protocol: protocol(req.version),
            status,
            bytes_sent: session.as_downstream().body_bytes_sent() as u64,
            duration,
            backend,
            ring,
            attempts: ctx.attempts(),
            upstream: ctx.upstream_time,
            spilled: ctx.spills,
            labels: ctx
                .rule
                .map_or(&[][..], |i| &state.plan.rules[i].labels[..]),
            referer: header(http::header::REFERER),
            user_agent: header(http::header::USER_AGENT),
        };
        LINE.with(|buf| {
            let mut buf = buf.borrow_mut();
            line::format(&mut buf, log.format, &entry);
            self.access_log.push(buf.as_bytes());
        });
    }
}
