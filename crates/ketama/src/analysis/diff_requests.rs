//! What a change of ring and of key costs over real requests: each
//! request's key taken on each side ([`RequestKey::take`], as the router
//! takes it) and routed on that side's ring; the share of requests whose
//! server changes is the share of cache lookups that miss at first. A key
//! change (turning on `sort_query`, moving from `$request_uri` to
//! `$host$uri`) is priced the same way as a ring change, and both at once.

use std::sync::Arc;

use super::diff::{tally, SampledDiff};
use crate::error::Result;
use crate::key::{KeyBufs, RequestKey};
use crate::request::Request;
use crate::{Ring, RouteTable};

/// [`diff_requests`]'s answer.
#[derive(Clone, Debug, PartialEq)]
pub struct RequestDiff {
    /// Over the requests both keys took something of.
    pub diff: SampledDiff,
    /// Requests of which a key took nothing (on either side): the router
    /// sends those round robin, so no server of theirs is kept or moved.
    pub unkeyed: u64,
}

/// The share of `requests` whose first server changes from `from` (routed
/// by `from_key`) to `to` (routed by `to_key`), with its confidence
/// interval, per server, and the requests no key placed.
///
/// Cost: per request, both keys taken and one route on each ring.
///
/// # Errors
/// A key whose hash a ring cannot place ([`crate::Error::PeerHashOnRing`]:
/// HAProxy's `balance source` off a haproxy ring, Envoy's hash policies
/// off an Envoy ring).
pub fn diff_requests<R: Request>(
    from: (&Arc<Ring>, &RequestKey),
    to: (&Arc<Ring>, &RequestKey),
    requests: impl IntoIterator<Item = R>,
) -> Result<RequestDiff> {
    let tables = (
        RouteTable::new(from.0.clone()),
        RouteTable::new(to.0.clone()),
    );
    let mut bufs = KeyBufs::default();
    let mut unkeyed = 0;
    let mut owners = Vec::new();
    let mut first = |t: &RouteTable, key: &RequestKey, req: &R| -> Result<Option<Option<usize>>> {
        let mut cookie = None;
        match t.route_request(key, req, &mut bufs, &mut cookie, None, None)? {
            Some(mut r) => Ok(Some(t.next(&mut r)?)),
            None => Ok(None),
        }
    };
    for req in requests {
        let a = first(&tables.0, from.1, &req)?;
        let b = first(&tables.1, to.1, &req)?;
        match (a, b) {
            (Some(a), Some(b)) => owners.push((a, b)),
            _ => unkeyed += 1,
        }
    }
    Ok(RequestDiff {
        diff: tally(from.0, to.0, owners),
        unkeyed,
    })
}

/// [`request_counts`]'s answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestCounts {
    /// Requests each node serves first, by node index.
    pub nodes: Vec<u64>,
    /// Requests the key took nothing of (routed round robin).
    pub unkeyed: u64,
    /// Requests no node could serve (every one down).
    pub unserved: u64,
}

/// How many of `requests` each node of `ring` serves first when routed by
/// `key`: the measured load of real requests beside the ring's shares.
///
/// Cost: per request, the key taken and one route.
///
/// # Errors
/// A key whose hash the ring cannot place
/// ([`crate::Error::PeerHashOnRing`]).
pub fn request_counts<R: Request>(
    ring: &Arc<Ring>,
    key: &RequestKey,
    requests: impl IntoIterator<Item = R>,
) -> Result<RequestCounts> {
    let table = RouteTable::new(ring.clone());
    let mut bufs = KeyBufs::default();
    let mut out = RequestCounts {
        nodes: vec![0; ring.nodes().len()],
        unkeyed: 0,
        unserved: 0,
    };
    for req in requests {
        let mut cookie = None;
        match table.route_request(key, &req, &mut bufs, &mut cookie, None, None)? {
            None => out.unkeyed += 1,
            Some(mut r) => match table.next(&mut r)? {
                Some(n) => out.nodes[n] += 1,
                None => out.unserved += 1,
            },
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{KeyForm, Normalize};
    use crate::nginx::Template;
    use crate::query::QueryRules;
    use crate::{Node, RingBuilder};

    struct Target(Vec<u8>);

    impl Request for Target {
        fn request_uri(&self) -> &[u8] {
            &self.0
        }
        fn headers(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
            std::iter::empty()
        }
    }

    fn ring() -> Arc<Ring> {
        let nodes = (0..8)
            .map(|i| Node::new(format!("10.0.0.{i}:80"), 1))
            .collect();
        Arc::new(RingBuilder::new().build(nodes).unwrap())
    }

    #[test]
    fn sorting_the_query_moves_only_the_unsorted_requests() {
        let plain = RequestKey::new(
            KeyForm::Template(Template::parse("$request_uri").unwrap()),
            Normalize::default(),
        );
        let sorted = RequestKey::new(
            plain.form().clone(),
            Normalize {
                query: QueryRules {
                    sort: true,
                    ..QueryRules::default()
                },
                lowercase_host: false,
            },
        );
        // Half the requests already sorted: those keep their server.
        let reqs = (0..4000).map(|i| {
            Target(match i % 2 {
                0 => format!("/o/{i}?a=1&b=2").into_bytes(),
                _ => format!("/o/{i}?b=2&a=1").into_bytes(),
            })
        });
        let r = ring();
        let d = diff_requests((&r, &plain), (&r, &sorted), reqs).unwrap();
        assert_eq!((d.diff.samples, d.unkeyed), (4000, 0));
        // Each unsorted request lands on a random server: 7 in 8 move.
        let expect = 0.5 * 7.0 / 8.0;
        assert!((d.diff.moved - expect).abs() < 0.03, "{}", d.diff.moved);
        // The same key on the same ring moves nothing.
        let same = diff_requests((&r, &plain), (&r, &plain), [Target(b"/x?b&a".to_vec())]).unwrap();
        assert_eq!(same.diff.moved_samples, 0);
    }

    #[test]
    fn request_counts_are_where_each_request_goes_first() {
        let r = ring();
        let key = RequestKey::new(
            KeyForm::Template(Template::parse("$request_uri").unwrap()),
            Normalize::default(),
        );
        let reqs: Vec<Target> = (0..800)
            .map(|i| Target(format!("/k/{i}").into_bytes()))
            .collect();
        let c = request_counts(&r, &key, reqs.iter().map(|t| Target(t.0.clone()))).unwrap();
        let mut want = vec![0u64; 8];
        for t in &reqs {
            want[r.node_index(&t.0).unwrap()] += 1;
        }
        assert_eq!((c.nodes, c.unkeyed, c.unserved), (want, 0, 0));
    }

    #[test]
    fn requests_no_key_places_are_counted_apart() {
        let cookie = RequestKey::new(
            KeyForm::Template(Template::parse("$cookie_sid").unwrap()),
            Normalize::default(),
        );
        let r = ring();
        let d = diff_requests((&r, &cookie), (&r, &cookie), [Target(b"/".to_vec())]).unwrap();
        assert_eq!((d.diff.samples, d.unkeyed), (0, 1));
    }
}
