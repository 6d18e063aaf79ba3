//! Consistent hashing at CDN scale, byte-identical to nginx's
//! `hash $key consistent`, pingora-ketama, libmemcached, twemproxy,
//! HAProxy's `hash-type consistent` ([`haproxy`]), and Envoy's and gRPC's
//! `ring_hash` and Envoy's `maglev` ([`envoy`]).
//!
//! A [`Ring`] gives each [`Node`] `weight x point_multiple` points (a CRC-32
//! chain, 160 per weight unit by default) on a 32-bit ring; a key goes to
//! the first point at or after its hash. The [`Scheme`] picks which
//! peer's hashing and collision rule to reproduce; the [`Layout`] picks how
//! many bytes a point costs (8, 6, or 3.0 to 3.5 in `Compact`), and never
//! changes routing.
//!
//! This crate is pure and synchronous: no I/O, no threads.
//!
//! # Example
//!
//! ```
//! use ketama::{Node, Ring};
//!
//! let ring = Ring::new(vec![
//!     Node::new("10.0.0.1:443", 1),
//!     Node::new("10.0.0.2:443", 2),
//!     Node::new("unix:/run/cache.sock", 1),
//! ])?;
//! let node = ring.node(b"/images/cat.jpg").expect("the ring has nodes");
//! println!("served by {}", node.server());
//!
//! // Where the key goes if that node fails, then the one after that.
//! let order: Vec<&str> = ring.failover(b"/images/cat.jpg").map(|n| n.server()).collect();
//! assert_eq!(order.len(), 3);
//! assert_eq!(order[0], node.server());
//! # Ok::<(), ketama::Error>(())
//! ```
//!
//! A servers file in nginx's spirit is read by [`parse_servers`]:
//!
//! ```
//! use ketama::{parse_servers, Scheme, Layout, RingBuilder};
//!
//! let nodes = parse_servers("10.0.0.1:443 2\n10.0.0.2:443\n10.0.0.3:443 down\n", "servers.txt".as_ref())?;
//! let ring = RingBuilder::new()
//!     .compat(Scheme::PingoraV2)
//!     .layout(Layout::Packed)
//!     .build(nodes)?;
//! assert_eq!(ring.generated_points(), 4 * 160);
//! # Ok::<(), ketama::Error>(())
//! ```
//!
//! # Map of the crate
//!
//! | for | use | costs |
//! |---|---|---|
//! | a server, its weight, labels, `down` | [`Node`], [`parse_servers`] | its strings + 56 B |
//! | a request's key as nginx's `hash <template>` computes it | [`nginx::Template`] over a [`request::Request`] | one pass over each variable, no allocation once its buffer grew |
//! | a HAProxy backend's servers, key forms | [`haproxy::parse_backend`], [`haproxy::UriKey`], [`haproxy::header_key`] | `O(lines)`, one pass over a key |
//! | building a ring | [`RingBuilder`] with [`RingSettings`] ([`Scheme`], [`Layout`], point multiple) | `O(P)`, 16 B/point at the peak |
//! | one key's node, a batch, failover order | [`Ring::node`], [`Ring::node_indices_for_hashes`], [`Ring::failover`] / [`FailoverCursor`] | one hash + one search |
//! | only nodes carrying some labels | [`Requirement`], [`RequirementCache`] ([`subset`] explains how one ring serves every combination) | F bits/point for F labels (the label index), 1 bit/node a requirement (+ a dedicated ring for sets under 1/32 of the weight) |
//! | two rings side by side, rolled out by share and scope | [`Migration`], [`Rollout`] ([`migration`] spells out the per-key decision) | one FNV-1a per key |
//! | **the whole routing decision** (version, ring, labels, failover) | [`RouteTable::route`] then [`RouteTable::next`] | the above, no allocation |
//! | no node above `c x` the average load (bounded loads) | [`RouteTable::next_bounded`] with a [`load::LoadTracker`] | one compare-and-swap per node tried |
//! | shares, CV, diffs between rings, recommendations | [`analysis`] | `O(P)` |
//! | Envoy's and gRPC's `ring_hash`, Envoy's `maglev` | [`Scheme::EnvoyRingHash`], [`Scheme::Maglev`] ([`envoy`] explains the 64-bit entries) | the layout's bytes + 4 a ring entry; a table slot as a point |
//!
//! Routers and tools go through [`RouteTable`]: it is the one place where
//! a key becomes a node.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod analysis;
pub mod continuum;
mod crc;
pub mod envoy;
mod error;
pub mod haproxy;
pub mod key;
pub mod keyhash;
pub mod layout;
pub mod load;
mod md5;
pub mod migration;
pub mod mix;
pub mod nginx;
mod node;
pub mod query;
pub mod request;
mod ring;
pub mod route;
mod scheme;
mod servers;
mod settings;
mod sort;
pub mod subset;
pub mod synthetic;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
mod version;

pub use scheme::{KeyFn, Scheme, UnknownScheme};

/// The old name of [`Scheme`] (every doc calls it a scheme).
#[deprecated(
    since = "0.1.0",
    note = "renamed `Scheme`; this alias goes in the next release"
)]
pub type Compat = Scheme;

/// The old name of [`UnknownScheme`].
#[deprecated(
    since = "0.1.0",
    note = "renamed `UnknownScheme`; this alias goes in the next release"
)]
pub type UnknownCompat = UnknownScheme;
pub use error::{Error, Result};
pub use keyhash::{KeyHash, UnknownKeyHash};
pub use layout::{Layout, UnknownLayout};
pub use migration::{Migration, Rollout};
pub use node::Node;
pub use ring::{Failover, FailoverCursor, Ring, RingBuilder, MAX_POINTS};
pub use route::{Need, Route, RouteTable};
pub use servers::parse_servers;
pub use settings::{RingSettings, DEFAULT_POINT_MULTIPLE};
pub use subset::{Requirement, RequirementCache};
pub use version::Version;

/// This crate's README (what crates.io shows), compiled and run as a
/// doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctests;
