//! Routes for requests by a configured key ([`crate::key::RequestKey`]):
//! what the key takes of the request, routed as its peer routes it
//! (bytes by the ring's scheme, a client's address by HAProxy's
//! `balance source` hash, Envoy's hash policies' 64-bit hash on an Envoy
//! ring). The router and the command-line tools route requests through
//! these, so that both answer alike.
//!
//! A key change rolls out as a migration (`[migration.key]`): each side
//! takes its own key of the request, the old ring the old key and the new
//! ring the new key, and the side is chosen by the new key's bytes
//! ([`RouteTable::route_rekeyed`]). The new key decides because it is
//! usually the normalized one: the variants it makes one object (both
//! orders of a query, with `sort_query`) then go to one side together, so
//! that the new side's one cached copy serves all of them.

use std::net::IpAddr;

use super::hashed::PeerHash;
use super::{Need, Route, RouteTable};
use crate::error::{Error, Result};
use crate::key::{KeyBufs, RequestKey};
use crate::request::{Request, Taken};
use crate::version::Version;

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
    /// The route of what a key took on `version`'s ring, under need index
    /// `need` (checked by the caller); `Ok(None)` for nothing.
    fn route_on(&self, version: Version, t: Taken<'_>, need: Option<u32>) -> Result<Option<Route>> {
        let p = match t {
            Taken::Bytes(k) => self.ring(version).compat().probe(k),
            Taken::Address(a) => self.peer_probe(
                PeerHash::HaproxySource(crate::haproxy::source_hash(a)),
                version,
            )?,
            Taken::Envoy(h) => self.peer_probe(PeerHash::Envoy(h), version)?,
            Taken::Nothing => return Ok(None),
        };
        Ok(Some(self.route_probe(version, p, need)))
    }

    /// The route of a request during a key migration: `old` is what the
    /// old side's key took of it, `new` what the new side's took. The side
    /// is chosen by `new` (its bytes, as [`route`](Self::route) chooses by
    /// a key's; the old key's when the new one took nothing; see the
    /// module docs), then that side's key is routed on that side's ring.
    /// `Ok(None)` when the chosen side's key took nothing (its peer routes
    /// the request round robin). Without a migration, `new` routed alone.
    ///
    /// Cost: one FNV-1a of the deciding key, then as
    /// [`route_taken`](Self::route_taken).
    ///
    /// # Errors
    /// As [`route_taken`](Self::route_taken).
    pub fn route_rekeyed(
        &self,
        old: Taken<'_>,
        new: Taken<'_>,
        need: Option<Need>,
        scope: Option<&str>,
    ) -> Result<Option<Route>> {
        if let Some(n) = need {
            if n.table != self.id || n.index as usize >= self.needs.len() {
                return Err(Error::ForeignNeed);
            }
        }
        let deciding = if matches!(new, Taken::Nothing) {
            old
        } else {
            new
        };
        let version = match deciding {
            Taken::Bytes(k) => self.version(k, scope),
            Taken::Address(a) => {
                let (b, n) = octets(a);
                self.version(&b[..n], scope)
            }
            Taken::Envoy(h) => self.version(&h.to_le_bytes(), scope),
            Taken::Nothing => return Ok(None),
        };
        let taken = match version {
            Version::Old => old,
            Version::New | Version::Only => new,
        };
        self.route_on(version, taken, need.map(|n| n.index))
    }

    /// The old ring's route for `old` (what the old side's key took of a
    /// request) under `route`'s need, when `route` is one
    /// [`route_rekeyed`](Self::route_rekeyed) made on the new ring: the
    /// request's previous owner. `Ok(None)` for a route on another ring,
    /// and when the old key took nothing.
    ///
    /// # Errors
    /// [`Error::ForeignRoute`] for a route another table made.
    pub fn previous_rekeyed(&self, old: Taken<'_>, route: &Route) -> Result<Option<Route>> {
        if route.table != self.id {
            return Err(Error::ForeignRoute);
        }
        if route.version != Version::New {
            return Ok(None);
        }
        self.route_on(Version::Old, old, route.need)
    }

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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::migration::{rollout_bucket, Migration, Rollout};
    use crate::{Node, RingBuilder};

    fn ring(points: u32) -> Arc<crate::Ring> {
        let nodes = (0..6)
            .map(|i| Node::new(format!("10.0.0.{i}:80"), 1))
            .collect();
        Arc::new(
            RingBuilder::new()
                .point_multiple(points)
                .build(nodes)
                .unwrap(),
        )
    }

    #[test]
    fn the_new_key_chooses_the_side_and_each_side_routes_its_own_key() {
        let (old, new) = (ring(160), ring(40));
        let t = RouteTable::migrating(Migration::new(
            old.clone(),
            new.clone(),
            Rollout::new(5000).unwrap(),
        ));
        let (mut on_old, mut on_new) = (0, 0);
        for i in 0..2000 {
            let (o, n) = (format!("/o/{i}?b&a"), format!("/o/{i}?a&b"));
            let mut r = t
                .route_rekeyed(
                    Taken::Bytes(o.as_bytes()),
                    Taken::Bytes(n.as_bytes()),
                    None,
                    None,
                )
                .unwrap()
                .unwrap();
            let side_new = (rollout_bucket(n.as_bytes()) as u32) < 5000;
            let node = t.next(&mut r).unwrap().unwrap();
            let server = t.node(&r, node).server().to_string();
            let prev = t.previous_rekeyed(Taken::Bytes(o.as_bytes()), &r).unwrap();
            if side_new {
                on_new += 1;
                assert_eq!(r.version(), Version::New);
                let want = new.nodes()[new.node_index(n.as_bytes()).unwrap()].server();
                assert_eq!(server, want);
                let mut p = prev.unwrap();
                let pn = t.next(&mut p).unwrap().unwrap();
                let want = old.nodes()[old.node_index(o.as_bytes()).unwrap()].server();
                assert_eq!(t.node(&p, pn).server(), want);
            } else {
                on_old += 1;
                assert_eq!(r.version(), Version::Old);
                let want = old.nodes()[old.node_index(o.as_bytes()).unwrap()].server();
                assert_eq!(server, want);
                assert!(prev.is_none());
            }
        }
        assert!(on_old > 800 && on_new > 800, "{on_old} {on_new}");
        // The new key took nothing: the old key decides and routes.
        let r = t
            .route_rekeyed(Taken::Bytes(b"/k"), Taken::Nothing, None, None)
            .unwrap();
        match (rollout_bucket(b"/k") as u32) < 5000 {
            true => assert!(r.is_none()),
            false => assert_eq!(r.unwrap().version(), Version::Old),
        }
        assert!(t
            .route_rekeyed(Taken::Nothing, Taken::Nothing, None, None)
            .unwrap()
            .is_none());
    }
}
