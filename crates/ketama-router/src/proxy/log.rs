//! What a request leaves behind when it ends on Pingora's path: the
//! per-attempt upstream time here, the rest as every path records it
//! ([`crate::policy::end`]).

use std::time::Instant;

use pingora::proxy::Session;
use pingora::{Error, ErrorSource};

use super::{Ctx, Router};
use crate::policy::end::Ended;

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

    /// Pingora's `logging` hook: the request's end, as
    /// [`crate::policy::end::record`] records every path's.
    pub(super) fn request_ended(&self, session: &mut Session, e: Option<&Error>, ctx: &mut Ctx) {
        self.attempt_ended(ctx);
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        // A request refused before it had a state is logged with the
        // current one.
        let state = match &ctx.state {
            Some(s) => s.clone(),
            None => self.routing.state(),
        };
        let req = session.req_header();
        let header = |name: http::header::HeaderName| {
            req.headers.get(name).map_or(&b""[..], |v| v.as_bytes())
        };
        let ended = Ended {
            state: &state,
            route: ctx.route.as_ref(),
            rule: ctx.rule,
            backend: ctx.backend,
            started: ctx.started,
            upstream_status: ctx.upstream_status,
            cache: ctx.cache,
            moved: crate::policy::route::moved(ctx.route.as_ref(), ctx.previous, ctx.backend),
            upstream_failed: e.is_some_and(|e| *e.esource() == ErrorSource::Upstream),
            attempts: ctx.attempts(),
            spills: ctx.spills,
            upstream_time: ctx.upstream_time,
            began: ctx.began.unwrap_or_else(Instant::now),
            status,
            bytes_sent: session.as_downstream().body_bytes_sent() as u64,
            client: session
                .client_addr()
                .and_then(|a| a.as_inet())
                .map(|a| a.ip()),
            method: req.method.as_str(),
            uri: ctx.sent.as_ref().map_or(req.raw_path(), |s| &s.forward[..]),
            protocol: protocol(req.version),
            referer: header(http::header::REFERER),
            user_agent: header(http::header::USER_AGENT),
        };
        crate::policy::end::record(&ended, &self.access_log, &self.metrics);
    }
}
