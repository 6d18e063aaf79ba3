//! How a request is routed, in the router's own terms (a
//! [`RequestView`] of it, whichever path carried it): its key (nginx's
//! `$request_uri` by default), the label rule it matches, one library call
//! for its route, and the next healthy backend of that route (below its
//! load bound, with `[balance]`).

use std::cell::{Cell, RefCell};

use http::HeaderName;
use ketama::key::{KeyBufs, RequestKey};
use ketama::load::LoadGuard;
use ketama::request::Taken;
use ketama::{Route, Version};

use crate::state::{RoutingState, RuleMatch};

thread_local! {
    /// Where keys are assembled and requests normalized for them: one set
    /// of buffers per thread, reused, so that taking a key allocates
    /// nothing once they have grown.
    static KEY_BUFS: RefCell<KeyBufs> = RefCell::new(KeyBufs::default());
    /// The new side's key's, during a key migration (both keys are held
    /// at once).
    static NEW_KEY_BUFS: RefCell<KeyBufs> = RefCell::new(KeyBufs::default());
    /// The turn of the next request whose key is empty.
    static TURN: Cell<u64> = const { Cell::new(0) };
}

/// What routing reads of a request, whichever path carried it (HTTP/1
/// or HTTP/2, the engine's or the admin API's): besides what key forms
/// read ([`ketama::request::Request`]), the fields by name for label rules
/// and HAProxy's forms. Nothing here knows where the bytes came from.
pub trait RequestView: ketama::request::Request {
    /// The first value of header `name` (`Host`: an absolute-form
    /// target's authority stands for it).
    fn header(&self, name: &HeaderName) -> Option<&[u8]>;
}

/// Calls `f` with what the state's key takes of `req`
/// ([`RequestKey::take`], on this thread's buffers); [`Taken::Nothing`]
/// where the key's peer falls back to round robin, which [`decide`] then
/// does.
pub fn with_routing_key<R>(
    req: &impl RequestView,
    key: &RequestKey,
    set_cookie: &mut Option<String>,
    f: impl FnOnce(Taken<'_>) -> R,
) -> R {
    KEY_BUFS.with(|bufs| key.take(req, &mut bufs.borrow_mut(), set_cookie, f))
}

/// Calls `f` with what each side's key takes of `req` during a key
/// migration (`old`: `[key]`, `new`: `[migration.key]`); cookies their
/// Envoy policies generated go to `cookies` (old, new).
fn with_both_keys<R>(
    req: &impl RequestView,
    old: &RequestKey,
    new: &RequestKey,
    cookies: &mut (Option<String>, Option<String>),
    f: impl FnOnce(Taken<'_>, Taken<'_>) -> R,
) -> R {
    KEY_BUFS.with(|a| {
        NEW_KEY_BUFS.with(|b| {
            let (mut a, mut b) = (a.borrow_mut(), b.borrow_mut());
            old.take(req, &mut a, &mut cookies.0, |o| {
                new.take(req, &mut b, &mut cookies.1, |n| f(o, n))
            })
        })
    })
}

/// Calls `f` with the key standing for a request whose key is empty: its
/// thread's next turn, so that such requests spread over the ring by its
/// shares, as nginx's `hash` falls back to (weighted) round robin and
/// HAProxy's to round robin.
fn round_robin<R>(f: impl FnOnce(&[u8]) -> R) -> R {
    let turn = TURN.with(|t| {
        let n = t.get().wrapping_add(1);
        t.set(n);
        n
    });
    // Spread consecutive turns apart before the scheme hashes them.
    f(&turn.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_le_bytes())
}

/// The first label rule the request matches.
pub fn matching_rule(req: &impl RequestView, state: &RoutingState) -> Option<usize> {
    state.rules.iter().position(|r| match r {
        RuleMatch::Host(h) => req
            .header(&http::header::HOST)
            .and_then(|v| std::str::from_utf8(v).ok())
            .map(|v| v.rsplit_once(':').map_or(v, |(host, _)| host))
            .is_some_and(|v| v.eq_ignore_ascii_case(h)),
        RuleMatch::Header(name, value) => req.header(name).is_some_and(|v| v == value.as_bytes()),
    })
}

/// The routing decision for a request: its route (by its key, its rule's
/// requirement, this router's scope), the label rule that applied (its
/// index in the plan's rules), and a `Set-Cookie` value for a cookie the
/// key generated (Envoy's `cookie` policy with a `ttl`).
#[derive(Debug)]
pub struct Decision {
    /// The route.
    pub route: Route,
    /// The label rule that applied.
    pub rule: Option<usize>,
    /// A cookie to set on the response.
    pub set_cookie: Option<String>,
}

/// The routing decision for a request ([`Decision`]).
pub fn decide(req: &impl RequestView, state: &RoutingState) -> Result<Decision, ketama::Error> {
    let plan = &state.plan;
    let rule = matching_rule(req, state);
    let need = rule.map(|i| plan.rules[i].need);
    let scope = plan.scope.as_deref();
    let table = &plan.table;
    let mut set_cookie = None;
    let taken = match &plan.new_key {
        None => with_routing_key(req, &plan.key, &mut set_cookie, |key| {
            table.route_taken(key, need, scope)
        })?,
        Some(new) => {
            let mut cookies = (None, None);
            let route = with_both_keys(req, &plan.key, new, &mut cookies, |o, n| {
                table.route_rekeyed(o, n, need, scope)
            })?;
            // The cookie of the key that routed it.
            set_cookie = match route.as_ref().map(Route::version) {
                Some(Version::Old) => cookies.0,
                _ => cookies.1,
            };
            route
        }
    };
    let route = match taken {
        Some(route) => route,
        None => round_robin(|k| table.route(k, need, scope))?,
    };
    Ok(Decision {
        route,
        rule,
        set_cookie,
    })
}

/// The key's previous owner, for a request the new ring of a migration
/// routes: the old ring's first eligible backend (in rotation, under the
/// same label requirement). `None` for a request another ring routes, or
/// when the old ring has no eligible backend. Both rings of the router's
/// plan are built on the same node list, so the index is a backend's.
///
/// During a key migration (`[migration.key]`), the old side's key routed
/// on the old ring.
///
/// Cost: the old scheme's key hash, one ring search and a walk to the
/// first healthy node; only during a migration, only for `new` routes.
pub fn previous_owner(
    req: &impl RequestView,
    state: &RoutingState,
    route: &Route,
) -> Result<Option<usize>, ketama::Error> {
    if route.version() != Version::New {
        return Ok(None);
    }
    let table = &state.plan.table;
    // A request routed round robin (an empty key) has no owner.
    // A generated cookie was generated for the decision already.
    let mut generated = None;
    let old = match &state.plan.new_key {
        None => with_routing_key(req, &state.plan.key, &mut generated, |key| {
            table.counterpart_taken(key, route)
        })?,
        // A key migration: the old key on the old ring.
        Some(_) => with_routing_key(req, &state.plan.key, &mut generated, |key| {
            table.previous_rekeyed(key, route)
        })?,
    };
    let Some(mut old) = old else {
        return Ok(None);
    };
    table.next_where(&mut old, |n| state.backends[n].health.is_healthy())
}

/// The previous owner's address to tell `node` (`[migration]
/// previous_owner_header`): on a request the new ring routes, when the old
/// ring's first eligible backend (`previous`) is another one.
pub fn previous_owner_hint<'s>(
    state: &'s RoutingState,
    route: Option<&Route>,
    previous: Option<usize>,
    node: usize,
) -> Option<&'s str> {
    state.previous_owner_header.as_ref()?;
    let p = previous.filter(|&p| p != node)?;
    route.filter(|r| r.version() == Version::New)?;
    Some(&state.backends[p].server)
}

/// Whether a request's key moved: the new ring routed it, to `backend`,
/// and the old ring would have sent it elsewhere (`previous`, from
/// [`previous_owner`]).
pub fn moved(route: Option<&Route>, previous: Option<usize>, backend: Option<usize>) -> bool {
    route.is_some_and(|r| r.version() == Version::New) && previous != backend
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
pub fn choose(state: &RoutingState, route: &mut Route) -> Result<Option<Choice>, ketama::Error> {
    let table = &state.plan.table;
    let (need, version) = (route.need(), route.version());
    // nginx's rule for a group of one (`peers->single`): its only server
    // is never out of rotation for failures, only when its checks fail.
    // The group's size is counted only when a failure took a backend out.
    let healthy = |n: usize| {
        let h = &state.backends[n].health;
        h.is_healthy() || h.passes_checks() && table.group_size(need, version) == 1
    };
    let Some(b) = &state.balance else {
        let node = table.next_where(route, healthy)?;
        return Ok(node.map(|node| Choice {
            node,
            spills: 0,
            slot: None,
        }));
    };
    let w = state.serving_weight(route.need(), route.version());
    let placed = table.next_bounded(route, &b.loads, b.factor, w, healthy)?;
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
