//! The proxy: key, ring (or migration), first healthy backend in failover
//! order, the next on connect failure, 502 when none is left.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use async_trait::async_trait;
use bytes::Bytes;
use ketama::migration::Version;
use ketama::Ring;
use pingora::http::ResponseHeader;
use pingora::prelude::*;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::{Error, ErrorType};

use crate::config::KeySource;
use crate::state::{App, Matcher, RoutingState};

/// The Pingora proxy logic.
pub struct Router {
    /// Shared state.
    pub app: Arc<App>,
}

/// Per-request selection state.
#[derive(Default)]
pub struct Ctx {
    state: Option<Arc<RoutingState>>,
    hash: u32,
    version: Option<Version>,
    rule: Option<usize>,
    /// Backends tried, in order; a few at most (the retry count).
    tried: Tried,
    backend: Option<usize>,
    /// Set when every backend was tried or unhealthy.
    exhausted: bool,
}

impl Ctx {
    /// How many backends were tried.
    pub fn attempts(&self) -> usize {
        self.tried.len
    }
}

/// The backends a request tried: inline, no allocation per request.
#[derive(Default)]
struct Tried {
    len: usize,
    first: [usize; 4],
    more: Vec<usize>,
}

impl Tried {
    fn push(&mut self, n: usize) {
        if self.len < self.first.len() {
            self.first[self.len] = n;
        } else {
            self.more.push(n);
        }
        self.len += 1;
    }

    fn contains(&self, n: &usize) -> bool {
        self.first[..self.len.min(4)].contains(n) || self.more.contains(n)
    }
}

fn routing_key(session: &Session, source: &KeySource) -> Vec<u8> {
    let req = session.req_header();
    match source {
        KeySource::PathQuery => req.uri.path_and_query().map_or_else(
            || req.uri.path().as_bytes().to_vec(),
            |pq| pq.as_str().as_bytes().to_vec(),
        ),
        KeySource::Path => req.uri.path().as_bytes().to_vec(),
        KeySource::HostPath => {
            let host = req
                .headers
                .get("host")
                .map(|h| h.as_bytes())
                .or_else(|| req.uri.host().map(|h| h.as_bytes()))
                .unwrap_or(b"");
            let pq = req
                .uri
                .path_and_query()
                .map_or(req.uri.path(), |p| p.as_str());
            [host, pq.as_bytes()].concat()
        }
        KeySource::Header(h) => req
            .headers
            .get(h.as_str())
            .map_or_else(Vec::new, |v| v.as_bytes().to_vec()),
    }
}

fn matching_rule(session: &Session, state: &RoutingState) -> Option<usize> {
    let req = session.req_header();
    state.rules.iter().position(|r| match &r.matcher {
        Matcher::Host(h) => req
            .headers
            .get("host")
            .and_then(|v| v.to_str().ok())
            .map(|v| v.rsplit_once(':').map_or(v, |(host, _)| host))
            .is_some_and(|v| v.eq_ignore_ascii_case(h)),
        Matcher::Header(name, value) => req
            .headers
            .get(name.as_str())
            .is_some_and(|v| v.as_bytes() == value.as_bytes()),
    })
}

impl Router {
    /// The next backend for this request: the first in failover order (of
    /// the chosen ring, under the rule's labels) that is healthy and not
    /// yet tried.
    fn pick(&self, ctx: &mut Ctx) -> Option<usize> {
        let state = ctx.state.as_ref()?;
        let ring: &Ring = state.ring_of(ctx.version);
        let usable = |n: &usize| !ctx.tried.contains(n) && state.backends[*n].health.is_healthy();
        match ctx.rule {
            Some(r) => {
                let rule = &state.rules[r];
                let req = match (ctx.version, &rule.new) {
                    (Some(Version::New), Some(new)) => new,
                    _ => &rule.old,
                };
                ring.failover_required(ctx.hash, req).find(usable)
            }
            None => {
                let mut c = ring.failover_cursor(ctx.hash);
                std::iter::from_fn(|| ring.advance(&mut c)).find(usable)
            }
        }
    }
}

#[async_trait]
impl ProxyHttp for Router {
    type CTX = Ctx;

    fn new_ctx(&self) -> Ctx {
        Ctx::default()
    }

    async fn request_filter(&self, session: &mut Session, _ctx: &mut Ctx) -> Result<bool> {
        let limit = self.app.state.load().max_header_bytes;
        let req = session.req_header();
        let size = req.uri.path_and_query().map_or(0, |p| p.as_str().len())
            + req
                .headers
                .iter()
                .map(|(k, v)| k.as_str().len() + v.len() + 4)
                .sum::<usize>();
        if size > limit {
            let body = format!(
                "ketama-router: request head of {size} bytes is over the limit of {limit}\n"
            );
            session
                .respond_error_with_body(431, Bytes::from(body))
                .await?;
            return Ok(true);
        }
        Ok(false)
    }

    async fn upstream_peer(&self, session: &mut Session, ctx: &mut Ctx) -> Result<Box<HttpPeer>> {
        if ctx.state.is_none() {
            let state = self.app.state.load_full();
            let key = routing_key(session, &state.key);
            ctx.hash = Ring::hash_key(&key);
            ctx.rule = matching_rule(session, &state);
            ctx.version = match &state.migration {
                Some(m) => {
                    let v = m.version(&key, state.scope.as_deref());
                    m.count(v);
                    Some(v)
                }
                None => {
                    self.app.only_lookups.fetch_add(1, Relaxed);
                    None
                }
            };
            ctx.state = Some(state);
        }
        let Some(n) = self.pick(ctx) else {
            ctx.exhausted = true;
            return Err(Error::explain(
                ErrorType::HTTPStatus(502),
                "no healthy backend left for this key",
            ));
        };
        ctx.tried.push(n);
        ctx.backend = Some(n);
        let addr = ctx.state.as_ref().expect("set above").backends[n].addr;
        Ok(Box::new(HttpPeer::new(addr, false, String::new())))
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut Ctx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        let retries = ctx.state.as_ref().map_or(0, |s| s.retries);
        if ctx.attempts() <= retries {
            e.set_retry(true);
        }
        e
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        let Some(state) = &ctx.state else {
            return Ok(());
        };
        if state.response_headers {
            if let Some(n) = ctx.backend {
                resp.insert_header("x-ketama-backend", state.backends[n].header.clone())?;
            }
            let ring = ctx.version.map_or("only", |v| v.name());
            resp.insert_header("x-ketama-ring", http::HeaderValue::from_static(ring))?;
        }
        Ok(())
    }

    async fn fail_to_proxy(&self, session: &mut Session, e: &Error, ctx: &mut Ctx) -> FailToProxy {
        let code = match e.etype() {
            ErrorType::HTTPStatus(c) => *c,
            _ if ctx.backend.is_some() => 502,
            _ => 400,
        };
        let body = if ctx.exhausted || code == 502 {
            format!(
                "ketama-router: no backend could serve this request (tried {}): {}\n",
                ctx.attempts(),
                e
            )
        } else {
            format!("ketama-router: {e}\n")
        };
        let _ = session
            .respond_error_with_body(code, Bytes::from(body))
            .await;
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    async fn logging(&self, session: &mut Session, _e: Option<&Error>, ctx: &mut Ctx) {
        let Some(state) = &ctx.state else { return };
        let status = session.response_written().map_or(0, |r| r.status.as_u16());
        if let Some(n) = ctx.backend {
            state.backends[n].metrics.count(status);
        }
        if state.trace_sample > 0.0 {
            // Sample by the key hash's low bits: cheap and spread evenly.
            let draw = (ctx.hash.wrapping_mul(0x9E37_79B9) >> 8) as f64 / (1u32 << 24) as f64;
            if draw < state.trace_sample {
                tracing::info!(
                    key_hash = ctx.hash,
                    ring = ctx.version.map_or("only", |v| v.name()),
                    backend = ctx
                        .backend
                        .map_or("-", |n| state.backends[n].server.as_str()),
                    attempts = ctx.attempts(),
                    status,
                    "backend selection"
                );
            }
        }
    }
}
