//! How a request is routed, in the router's own terms (a
//! [`RequestView`] of it, whichever path carried it): its key (nginx's
//! `$request_uri` by default), the label rule it matches, one library call
//! for its route, and the next healthy backend of that route (below its
//! load bound, with `[balance]`).

use std::cell::{Cell, RefCell};

use http::HeaderName;
use ketama::haproxy::Balance;
use ketama::load::LoadGuard;
use ketama::request::Taken;
use ketama::route::PeerHash;
use ketama::{Route, Version};

use ketama_config::Normalize;

use crate::state::{Key, RoutingState, RuleMatch};

thread_local! {
    /// Where a key of several pieces is assembled: one buffer per thread,
    /// reused, so building the key allocates nothing once it has grown.
    static KEY_BUF: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    /// Where `[key.normalize]` writes the request as keys read it, reused
    /// the same way.
    static NORM_BUF: RefCell<NormBufs> = RefCell::new(NormBufs::default());
    /// The turn of the next request whose key is empty.
    static TURN: Cell<u64> = const { Cell::new(0) };
}

/// The buffers of a normalized request: its target, its absolute-form
/// target, its host field and authority, and the query's chunks
/// meanwhile.
#[derive(Default)]
struct NormBufs {
    uri: Vec<u8>,
    absolute: Vec<u8>,
    host: Vec<u8>,
    authority: Vec<u8>,
    chunks: Vec<(usize, usize)>,
}

/// What routing reads of a request, whichever path carried it (HTTP/1
/// or HTTP/2, the engine's or the admin API's): besides what key forms
/// read ([`ketama::request::Request`]), the fields by name for label rules
/// and HAProxy's forms. Nothing here knows where the bytes came from.
pub trait RequestView: ketama::request::Request {
    /// The first value of header `name` (`Host`: an absolute-form
    /// target's authority stands for it).
    fn header(&self, name: &HeaderName) -> Option<&[u8]>;
    /// An absolute-form target as sent, scheme and authority included.
    fn absolute_target(&self) -> Option<&[u8]> {
        None
    }
    /// HTTP/2's `:scheme` and `:authority`.
    fn scheme_authority(&self) -> Option<(&str, &str)> {
        None
    }
    /// The URI's host, when the request has no `Host` (HTTP/2).
    fn uri_host(&self) -> Option<&[u8]> {
        None
    }
}

/// Calls `f` with what `key` takes of the request as `normalize` rewrites
/// it (its query, its host's case), without copying the key when it is
/// one piece of the request; [`Taken::Nothing`] where the key's peer falls
/// back to round robin, which [`decide`] then does.
pub fn with_routing_key<R>(
    req: &impl RequestView,
    key: &Key,
    normalize: &Normalize,
    set_cookie: &mut Option<String>,
    f: impl FnOnce(Taken<'_>) -> R,
) -> R {
    if normalize.query.is_identity() && !normalize.lowercase_host {
        return source_key(req, key, set_cookie, f);
    }
    NORM_BUF.with(|bufs| {
        let mut bufs = bufs.borrow_mut();
        let NormBufs {
            uri,
            absolute,
            host,
            authority,
            chunks,
        } = &mut *bufs;
        let q = &normalize.query;
        q.apply(req.request_uri(), uri, chunks);
        let abs = req.absolute_target().map(|t| {
            q.apply(t, absolute, chunks);
            &absolute[..]
        });
        let lower = |from: Option<&[u8]>, to: &mut Vec<u8>| {
            to.clear();
            to.extend(from?.iter().map(u8::to_ascii_lowercase));
            Some(())
        };
        let lowercase = normalize.lowercase_host;
        let host_field = req
            .headers()
            .find(|(n, _)| n.eq_ignore_ascii_case(b"host"))
            .map(|(_, v)| v)
            .or_else(|| req.uri_host());
        let host = lowercase
            .then(|| lower(host_field, host).map(|()| &host[..]))
            .flatten();
        let authority = lowercase
            .then(|| lower(req.absolute_authority(), authority).map(|()| &authority[..]))
            .flatten();
        let view = Normalized {
            req,
            uri,
            absolute: abs,
            host,
            authority,
        };
        source_key(&view, key, set_cookie, f)
    })
}

/// A request as `[key.normalize]` has keys read it.
struct Normalized<'a, R> {
    req: &'a R,
    uri: &'a [u8],
    absolute: Option<&'a [u8]>,
    /// The host field and the absolute-form authority, lowercased (with
    /// `lowercase_host`).
    host: Option<&'a [u8]>,
    authority: Option<&'a [u8]>,
}

impl<R: RequestView> ketama::request::Request for Normalized<'_, R> {
    fn request_uri(&self) -> &[u8] {
        self.uri
    }

    fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        self.req.headers().map(|(n, v)| match self.host {
            Some(h) if n.eq_ignore_ascii_case(b"host") => (n, h),
            _ => (n, v),
        })
    }

    fn absolute_authority(&self) -> Option<&[u8]> {
        self.authority.or_else(|| self.req.absolute_authority())
    }

    fn remote_addr(&self) -> Option<std::net::IpAddr> {
        self.req.remote_addr()
    }

    fn tls(&self) -> bool {
        self.req.tls()
    }
}

impl<R: RequestView> RequestView for Normalized<'_, R> {
    fn header(&self, name: &HeaderName) -> Option<&[u8]> {
        if name == http::header::HOST {
            if let Some(h) = self.authority.or(self.host) {
                return Some(h);
            }
        }
        self.req.header(name)
    }

    fn absolute_target(&self) -> Option<&[u8]> {
        self.absolute
    }

    fn scheme_authority(&self) -> Option<(&str, &str)> {
        self.req.scheme_authority()
    }

    fn uri_host(&self) -> Option<&[u8]> {
        self.host.or_else(|| self.req.uri_host())
    }
}

/// Calls `f` with what `key` takes of `req`; a cookie Envoy's policies
/// generated goes to `set_cookie`.
fn source_key<R>(
    req: &impl RequestView,
    key: &Key,
    set_cookie: &mut Option<String>,
    f: impl FnOnce(Taken<'_>) -> R,
) -> R {
    match key {
        Key::HashPolicy(p) => {
            let h = p.hash(req);
            *set_cookie = h.set_cookie;
            f(h.hash.map_or(Taken::Nothing, Taken::Envoy))
        }
        // A `$uri` nginx refuses never reaches here (the engine refuses
        // such a request, as nginx does); were it to, its key is empty.
        Key::Template(t) => match t.piece(req) {
            Some(k) => f(nginx_key(k)),
            None => KEY_BUF.with(|buf| {
                let mut buf = buf.borrow_mut();
                t.with_key(req, &mut buf, |k| f(nginx_key(k.unwrap_or(b""))))
            }),
        },
        Key::Haproxy(Balance::Uri(u)) => {
            if let Some(t) = req.absolute_target() {
                return f(Taken::Bytes(u.key(t)));
            }
            match req.scheme_authority() {
                // HTTP/2: HAProxy hashes scheme://authority/path?query.
                Some((scheme, authority)) => KEY_BUF.with(|buf| {
                    let mut buf = buf.borrow_mut();
                    buf.clear();
                    buf.extend_from_slice(scheme.as_bytes());
                    buf.extend_from_slice(b"://");
                    buf.extend_from_slice(authority.as_bytes());
                    buf.extend_from_slice(req.request_uri());
                    f(Taken::Bytes(u.key(&buf)))
                }),
                None => f(Taken::Bytes(u.key(req.request_uri()))),
            }
        }
        Key::Haproxy(b) => f(b.key(req)),
    }
}

/// An nginx key: empty, it is routed round robin.
fn nginx_key(k: &[u8]) -> Taken<'_> {
    match k {
        b"" => Taken::Nothing,
        k => Taken::Bytes(k),
    }
}

/// An address's bytes (and how many): what chooses a `balance source`
/// request's side of a migration.
fn octets(a: std::net::IpAddr) -> ([u8; 16], usize) {
    let mut b = [0; 16];
    match a {
        std::net::IpAddr::V4(a) => {
            b[..4].copy_from_slice(&a.octets());
            (b, 4)
        }
        std::net::IpAddr::V6(a) => (a.octets(), 16),
    }
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
    let route = |key: &[u8]| plan.table.route(key, need, scope);
    let mut set_cookie = None;
    let route = with_routing_key(
        req,
        &state.key,
        &plan.normalize,
        &mut set_cookie,
        |key| match key {
            Taken::Bytes(k) => route(k),
            Taken::Address(a) => {
                let h = PeerHash::HaproxySource(ketama::haproxy::source_hash(a));
                let (b, n) = octets(a);
                plan.table.route_hashed(h, &b[..n], need, scope)
            }
            Taken::Envoy(h) => {
                plan.table
                    .route_hashed(PeerHash::Envoy(h), &h.to_le_bytes(), need, scope)
            }
            Taken::Nothing => round_robin(route),
        },
    )?;
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
    let normalize = &state.plan.normalize;
    // A request routed round robin (an empty key) has no owner.
    // A generated cookie was generated for the decision already.
    let mut generated = None;
    let Some(mut old) = with_routing_key(
        req,
        &state.key,
        normalize,
        &mut generated,
        |key| match key {
            Taken::Bytes(k) => table.counterpart(k, route),
            Taken::Address(a) => {
                let h = PeerHash::HaproxySource(ketama::haproxy::source_hash(a));
                table.counterpart_hashed(h, route)
            }
            Taken::Envoy(h) => table.counterpart_hashed(PeerHash::Envoy(h), route),
            Taken::Nothing => Ok(None),
        },
    )?
    else {
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
