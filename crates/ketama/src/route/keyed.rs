//! Routes for requests by a configured key ([`crate::key::RequestKey`]):
//! what the key takes of the request, routed as its peer routes it
//! (bytes by the ring's scheme, a client's address by HAProxy's
//! `balance source` hash, Envoy's hash policies' 64-bit hash on an Envoy
//! ring). The router and the command-line tools route requests through
//! these, so that both answer alike.

use std::net::IpAddr;

use super::hashed::PeerHash;
use super::{Need, Route, RouteTable};
use crate::error::Result;
use crate::key::{KeyBufs, RequestKey};
use crate::request::{Request, Taken};

/// An address's bytes (and how many): what chooses a `balance source`
/// request's side of a migration.
fn octets(a: IpAddr) -> ([u8; 16], usize) {
    let mut b = [0; 16];
    match a {
        IpAddr::V4(a) => {
            b[..4].copy_from_slice(&a.octets());
            (b, 4)
        }
        IpAddr::V6(a) => (a.octets(), 16),
    }
}

impl RouteTable {
    /// The route of what a key took of a request ([`RequestKey::take`]);
    /// `Ok(None)` for [`Taken::Nothing`] (the key's peer routes such a
    /// request round robin, which is the caller's to do).
    ///
    /// Cost: as [`route`](Self::route) or
    /// [`route_hashed`](Self::route_hashed).
    ///
    /// # Errors
    /// As [`route`](Self::route) and [`route_hashed`](Self::route_hashed).
    pub fn route_taken(
        &self,
        taken: Taken<'_>,
        need: Option<Need>,
        scope: Option<&str>,
    ) -> Result<Option<Route>> {
        match taken {
            Taken::Bytes(k) => self.route(k, need, scope).map(Some),
            Taken::Address(a) => {
                let h = PeerHash::HaproxySource(crate::haproxy::source_hash(a));
                let (b, n) = octets(a);
                self.route_hashed(h, &b[..n], need, scope).map(Some)
            }
            Taken::Envoy(h) => self
                .route_hashed(PeerHash::Envoy(h), &h.to_le_bytes(), need, scope)
                .map(Some),
            Taken::Nothing => Ok(None),
        }
    }

    /// The other ring's route for what a key took of a request, as
    /// [`counterpart`](Self::counterpart) for a route
    /// [`route_taken`](Self::route_taken) made from it; `Ok(None)` as
    /// there, and for [`Taken::Nothing`].
    ///
    /// # Errors
    /// As [`counterpart`](Self::counterpart).
    pub fn counterpart_taken(&self, taken: Taken<'_>, route: &Route) -> Result<Option<Route>> {
        match taken {
            Taken::Bytes(k) => self.counterpart(k, route),
            Taken::Address(a) => {
                let h = PeerHash::HaproxySource(crate::haproxy::source_hash(a));
                self.counterpart_hashed(h, route)
            }
            Taken::Envoy(h) => self.counterpart_hashed(PeerHash::Envoy(h), route),
            Taken::Nothing => Ok(None),
        }
    }

    /// The route of `req` by `key` (see [`route_taken`](Self::route_taken));
    /// a cookie Envoy's policies generated goes to `set_cookie`.
    ///
    /// # Errors
    /// As [`route_taken`](Self::route_taken).
    pub fn route_request(
        &self,
        key: &RequestKey,
        req: &impl Request,
        bufs: &mut KeyBufs,
        set_cookie: &mut Option<String>,
        need: Option<Need>,
        scope: Option<&str>,
    ) -> Result<Option<Route>> {
        key.take(req, bufs, set_cookie, |t| self.route_taken(t, need, scope))
    }
}
