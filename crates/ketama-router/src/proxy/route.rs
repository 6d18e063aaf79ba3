//! How a request is routed: its key (nginx's `$request_uri` by default,
//! read from the target as the client sent it when Pingora's header holds
//! another), the label rule it matches, one library call for its route,
//! and the next healthy backend of that route (below its load bound, with
//! `[balance]`).

use std::cell::RefCell;

use ketama::load::LoadGuard;
use ketama::Route;
use pingora::http::RequestHeader;
use pingora::prelude::*;
use pingora::{Error, ErrorType};

use crate::state::{Key, RoutingState, RuleMatch};

thread_local! {
    /// Where a `host_path` key is assembled: one buffer per thread, reused,
    /// so building the key allocates nothing once it has grown.
    static KEY_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Calls `f` with the request's routing key, without copying it when it
/// is one piece of the request; read from `sent` (nginx's `$request_uri`
/// for it) when Pingora's header does not hold the target as sent.
pub fn with_sent_routing_key<R>(
    req: &RequestHeader,
    sent: Option<&crate::reqline::Sent>,
    key: &Key,
    f: impl FnOnce(&[u8]) -> R,
) -> R {
    let path_query = || match sent {
        Some(s) => &s.request_uri[..],
        None => req
            .uri
            .path_and_query()
            .map_or(req.uri.path(), |pq| pq.as_str())
            .as_bytes(),
    };
    let path = || match sent {
        Some(s) => {
            let f = &s.forward[..];
            &f[..f
                .iter()
                .position(|&b| b == b'?' || b == b'#')
                .unwrap_or(f.len())]
        }
        None => req.uri.path().as_bytes(),
    };
    match key {
        Key::PathQuery => f(path_query()),
        Key::Path => f(path()),
        Key::Header(h) => f(req.headers.get(h).map_or(&[][..], |v| v.as_bytes())),
        // HAProxy falls back to round robin without a value; a ring routes
        // the empty key, so such requests all go one way.
        Key::HaproxyHeader(h) => f(req
            .headers
            .get(h)
            .and_then(|v| ketama::haproxy::header_key(v.as_bytes()))
            .unwrap_or(b"")),
        Key::HaproxyUri(u) => {
            if let Some(t) = sent.and_then(|s| s.absolute.as_deref()) {
                return f(u.key(t));
            }
            match (req.uri.scheme_str(), req.uri.authority()) {
                // HTTP/2: HAProxy hashes scheme://authority/path?query.
                (Some(scheme), Some(authority)) => KEY_BUF.with(|buf| {
                    let mut buf = buf.borrow_mut();
                    buf.clear();
                    buf.extend_from_slice(scheme.as_bytes());
                    buf.extend_from_slice(b"://");
                    buf.extend_from_slice(authority.as_str().as_bytes());
                    buf.extend_from_slice(path_query());
                    f(u.key(&buf))
                }),
                _ => f(u.key(path_query())),
            }
        }
        Key::HostPath => {
            let host = req
                .headers
                .get(http::header::HOST)
                .map(|h| h.as_bytes())
                .or_else(|| req.uri.host().map(|h| h.as_bytes()))
                .unwrap_or(b"");
            KEY_BUF.with(|buf| {
                let mut buf = buf.borrow_mut();
                buf.clear();
                buf.extend_from_slice(host);
                buf.extend_from_slice(path_query());
                f(&buf)
            })
        }
    }
}

/// The first label rule the request matches.
pub fn matching_rule(req: &RequestHeader, state: &RoutingState) -> Option<usize> {
    state.rules.iter().position(|r| match r {
        RuleMatch::Host(h) => req
            .headers
            .get(http::header::HOST)
            .and_then(|v| v.to_str().ok())
            .map(|v| v.rsplit_once(':').map_or(v, |(host, _)| host))
            .is_some_and(|v| v.eq_ignore_ascii_case(h)),
        RuleMatch::Header(name, value) => req
            .headers
            .get(name)
            .is_some_and(|v| v.as_bytes() == value.as_bytes()),
    })
}

/// The routing decision for a request (its key, its rule's requirement,
/// this router's scope), and the label rule that applied (its index in the
/// plan's rules).
pub fn decide_with_rule(
    req: &RequestHeader,
    sent: Option<&crate::reqline::Sent>,
    state: &RoutingState,
) -> Result<(Route, Option<usize>)> {
    let plan = &state.plan;
    let rule = matching_rule(req, state);
    let need = rule.map(|i| plan.rules[i].need);
    with_sent_routing_key(req, sent, &state.key, |key| {
        plan.table.route(key, need, plan.scope.as_deref())
    })
    .map(|route| (route, rule))
    .map_err(|e| Error::explain(ErrorType::InternalError, e.to_string()))
}

/// A backend chosen for one attempt.
#[derive(Debug)]
pub struct Choice {
    /// The backend (its index in the routing state).
    pub node: usize,
    /// Full backends passed over to reach it (bounded loads).
    pub spills: u32,
    /// Its slot in the in-flight counts (bounded loads): hold it until the
    /// attempt ends.
    pub slot: Option<LoadGuard>,
}

/// The route's next healthy backend: the plain failover order, or with
/// `[balance]` the first one below its load bound (counting a spill on the
/// first full one). `None` when no backend is left.
pub fn choose(state: &RoutingState, route: &mut Route) -> Result<Option<Choice>> {
    let table = &state.plan.table;
    let healthy = |n: usize| state.backends[n].health.is_healthy();
    let internal = |e: ketama::Error| Error::explain(ErrorType::InternalError, e.to_string());
    let Some(b) = &state.balance else {
        let node = table.next_where(route, healthy).map_err(internal)?;
        return Ok(node.map(|node| Choice {
            node,
            spills: 0,
            slot: None,
        }));
    };
    let w = state.serving_weight(route.need(), route.version());
    let placed = table
        .next_bounded(route, &b.loads, b.factor, w, healthy)
        .map_err(internal)?;
    Ok(placed.map(|p| {
        if let Some(from) = p.from {
            state.backends[from].metrics.spilled();
        }
        Choice {
            node: p.node,
            spills: p.spills,
            slot: Some(p.guard),
        }
    }))
}
