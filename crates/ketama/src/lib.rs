//! Consistent hashing at CDN scale, byte-identical to nginx's
//! `hash $key consistent` and to pingora-ketama.
//!
//! A [`Ring`] gives each [`Node`] `weight x point_multiple` points (a CRC-32
//! chain, 160 per weight unit by default) on a 32-bit ring; a key goes to
//! the first point at or after its CRC-32. The [`Compat`] scheme picks which
//! peer's hashing and collision rule to reproduce; the [`Layout`] picks how
//! many bytes a point costs, and never changes routing.
//!
//! This crate is pure and synchronous: no I/O, no threads, no global state.
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
//! use ketama::{parse_servers, Compat, Layout, RingBuilder};
//!
//! let nodes = parse_servers("10.0.0.1:443 2\n10.0.0.2:443\n10.0.0.3:443 down\n", "servers.txt")?;
//! let ring = RingBuilder::new()
//!     .compat(Compat::PingoraV2)
//!     .layout(Layout::Packed)
//!     .build(nodes)?;
//! assert_eq!(ring.generated_points(), 4 * 160);
//! # Ok::<(), ketama::Error>(())
//! ```

#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod analysis;
pub mod compact;
mod compat;
pub mod crc;
mod error;
pub mod layout;
pub mod migration;
mod node;
mod ring;
mod servers;
mod sort;
pub mod subset;

pub use compat::{Compat, UnknownCompat};
pub use error::{Error, Result};
pub use layout::{Layout, UnknownLayout};
pub use migration::{Migration, Rollout};
pub use node::{nginx_host_port, pingora_prefix, Node};
pub use ring::{Failover, FailoverCursor, Ring, RingBuilder, DEFAULT_POINT_MULTIPLE, MAX_POINTS};
pub use servers::parse_servers;
pub use subset::{Requirement, RequirementCache};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
