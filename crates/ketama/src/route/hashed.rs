//! Routes for keys their peer hashes itself: HAProxy's `balance source`
//! hashes the client's address, not bytes, and Envoy's hash policies
//! combine several values into one 64-bit hash. Such a hash means
//! something only on a ring of that peer's scheme: on another ring it is
//! an error, not a node.

use super::{Need, Route, RouteTable};
use crate::error::{Error, Result};
use crate::scheme::{Probe, Scheme};
use crate::version::Version;

/// A key's hash as its peer computed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PeerHash {
    /// HAProxy's `balance source`: [`crate::haproxy::source_hash`] of the
    /// client's address; a HAProxy ring applies its `avalanche`
    /// ([`crate::haproxy::full_hash`]) as HAProxy does.
    HaproxySource(u32),
    /// Envoy's hash policies' 64-bit hash, for `ring_hash` and `maglev`.
    Envoy(u64),
}

impl PeerHash {
    /// Its probe on a ring of `scheme`, when it has a meaning there.
    fn probe(self, scheme: Scheme) -> Option<Probe> {
        match (self, scheme) {
            (PeerHash::HaproxySource(h), Scheme::Haproxy(f)) => {
                let hash = if f.avalanche {
                    crate::haproxy::full_hash(h)
                } else {
                    h
                };
                Some(Probe { hash, wide: 0 })
            }
            (PeerHash::Envoy(w), Scheme::EnvoyRingHash(_) | Scheme::Maglev(_)) => {
                Some(scheme.probe64(w))
            }
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            PeerHash::HaproxySource(_) => "HAProxy's balance source",
            PeerHash::Envoy(_) => "Envoy's hash policies",
        }
    }
}

impl RouteTable {
    /// The routing decision for a key its peer hashed (`hash`), as
    /// [`route`](Self::route) makes one for bytes: the version chosen by
    /// `version_key` (the bytes the hash came from, so that one client or
    /// one combination keeps its side), then a failover walk from the
    /// hash on that ring.
    ///
    /// Cost: the version's FNV-1a (with a migration), one ring search.
    ///
    /// # Errors
    /// [`Error::ForeignNeed`] for a need another table made;
    /// [`Error::PeerHashOnRing`] when the chosen ring's scheme is not the
    /// hash's peer's.
    pub fn route_hashed(
        &self,
        hash: PeerHash,
        version_key: &[u8],
        need: Option<Need>,
        scope: Option<&str>,
    ) -> Result<Route> {
        if let Some(n) = need {
            if n.table != self.id || n.index as usize >= self.needs.len() {
                return Err(Error::ForeignNeed);
            }
        }
        let version = self.version(version_key, scope);
        let p = self.peer_probe(hash, version)?;
        Ok(self.route_probe(version, p, need.map(|n| n.index)))
    }

    /// [`counterpart`](Self::counterpart) for a route
    /// [`route_hashed`](Self::route_hashed) made from `hash`: the other
    /// ring's route for it; `Ok(None)` without a migration, or when the
    /// other ring's scheme cannot place the hash.
    ///
    /// # Errors
    /// [`Error::ForeignRoute`], [`Error::KeyNotRouted`] (a hash other than
    /// the route's).
    pub fn counterpart_hashed(&self, hash: PeerHash, route: &Route) -> Result<Option<Route>> {
        if route.table != self.id {
            return Err(Error::ForeignRoute);
        }
        let Some(other) = super::other_side(route.version) else {
            return Ok(None);
        };
        if self.peer_probe(hash, route.version)?.hash != route.hash {
            return Err(Error::KeyNotRouted);
        }
        let Ok(p) = self.peer_probe(hash, other) else {
            return Ok(None);
        };
        Ok(Some(self.route_probe(other, p, route.need)))
    }

    pub(super) fn peer_probe(&self, hash: PeerHash, v: Version) -> Result<Probe> {
        let compat = self.ring(v).compat();
        hash.probe(compat).ok_or(Error::PeerHashOnRing {
            peer: hash.name(),
            compat,
        })
    }
}

#[cfg(test)]
mod tests;
