//! ketama as a Pingora `BackendSelection`: write
//! `LoadBalancer<KetamaSelection>` where you had
//! `LoadBalancer<KetamaHashing>`, and route exactly as before in about 3.4
//! bytes a point instead of 6 or 8.
//!
//! ```
//! use ketama_pingora::KetamaSelection;
//! use pingora_load_balancing::LoadBalancer;
//!
//! // Builds the ring over the three backends, as LoadBalancer<KetamaHashing> would.
//! let lb: LoadBalancer<KetamaSelection> =
//!     LoadBalancer::try_from_iter(["10.0.0.1:443", "10.0.0.2:443", "10.0.0.3:443"])?;
//! let backend = lb.select(b"/images/cat.jpg", 256).expect("three backends");
//! println!("served by {}", backend.addr);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Pingora hands a selection its backends as a `BTreeSet<Backend>` ordered
//! by address, with no server strings as a user wrote them. This selection
//! builds a ketama ring from those backends in that order, naming each by
//! its socket address, so it routes exactly as Pingora's own
//! `KetamaHashing` (pingora-ketama `Version::V1`, or `V2 { point_multiple }`
//! with [`KetamaSelectionConfig::point_multiple`]) in every ketama layout:
//! the compact layout (the default here) gives the same answers in about
//! 3.4 bytes a point. Backends that are not IP sockets (Unix sockets) and
//! backends of weight 0 are left out, as `KetamaHashing` leaves them out
//! (its `Bucket::new` would panic on weight 0).
//!
//! Unlike `KetamaHashing`'s iterator, which cycles the ring and repeats
//! backends, [`KetamaIter`] yields each backend once, in ring order.
//!
//! Cost: the ring's points in the chosen layout plus one `Backend` clone
//! per backend; a lookup is one CRC-32 of the key and one ring search.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::sync::Arc;

use ketama::{Layout, Node, Ring, RingBuilder, Scheme};
use pingora_core::protocols::l4::socket::SocketAddr as PingoraAddr;
use pingora_load_balancing::selection::{BackendIter, BackendSelection};
use pingora_load_balancing::Backend;

/// Settings of a [`KetamaSelection`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KetamaSelectionConfig {
    /// `None`: pingora-ketama V1 (160 points, its tie order); `Some(m)`: V2
    /// with `m` points per weight unit.
    pub point_multiple: Option<u32>,
    /// The storage layout (routing is the same in all).
    pub layout: Layout,
    /// Another scheme than pingora-ketama's: Envoy's and gRPC's
    /// `ring_hash` ([`Scheme::EnvoyRingHash`]) or Envoy's Maglev, which
    /// name hosts by their socket address as this selection does, so that a
    /// Pingora proxy routes as an Envoy cluster or a gRPC client over the
    /// same addresses. `None`: [`point_multiple`](Self::point_multiple)
    /// picks pingora-ketama V1 or V2.
    pub scheme: Option<Scheme>,
}

impl Default for KetamaSelectionConfig {
    /// pingora-ketama V1 (what `KetamaHashing` builds by default), in the
    /// compact layout.
    fn default() -> Self {
        KetamaSelectionConfig {
            point_multiple: None,
            layout: Layout::Compact,
            scheme: None,
        }
    }
}

/// A ketama ring over Pingora backends (see the crate docs).
pub struct KetamaSelection {
    ring: Ring,
    backends: Vec<Backend>,
}

impl KetamaSelection {
    /// The ring.
    pub fn ring(&self) -> &Ring {
        &self.ring
    }
}

impl BackendSelection for KetamaSelection {
    type Iter = KetamaIter;
    type Config = KetamaSelectionConfig;

    fn build_with_config(backends: &BTreeSet<Backend>, config: &Self::Config) -> Self {
        let kept: Vec<Backend> = backends
            .iter()
            .filter(|b| matches!(b.addr, PingoraAddr::Inet(_)) && b.weight > 0)
            .cloned()
            .collect();
        let nodes: Vec<Node> = kept
            .iter()
            .map(|b| {
                let PingoraAddr::Inet(a) = &b.addr else {
                    unreachable!("filtered above")
                };
                Node::new(a.to_string(), b.weight.min(u32::MAX as usize) as u32)
            })
            .collect();
        let (compat, multiple) = match (config.scheme, config.point_multiple) {
            (Some(s), _) => (s, ketama::DEFAULT_POINT_MULTIPLE),
            (None, None) => (Scheme::PingoraV1, ketama::DEFAULT_POINT_MULTIPLE),
            (None, Some(m)) => (Scheme::PingoraV2, m),
        };
        let builder = RingBuilder::new()
            .compat(compat)
            .layout(config.layout)
            .point_multiple(multiple);
        // Pingora's trait cannot report errors. The inputs are distinct
        // socket addresses, so the build fails only past pingora's own
        // limits (65,536 backends, 2^28 points): then route nowhere.
        let ring = builder.build(nodes).unwrap_or_else(|e| {
            log::error!("ketama selection: {e}; routing to no backend");
            RingBuilder::new()
                .build(Vec::new())
                .expect("an empty ring always builds")
        });
        KetamaSelection {
            ring,
            backends: kept,
        }
    }

    fn build(backends: &BTreeSet<Backend>) -> Self {
        Self::build_with_config(backends, &KetamaSelectionConfig::default())
    }

    fn iter(self: &Arc<Self>, key: &[u8]) -> KetamaIter {
        KetamaIter {
            cursor: self.ring.failover_cursor_for_key(key),
            sel: self.clone(),
        }
    }
}

/// Backends in ring order from the key's point, each once.
pub struct KetamaIter {
    sel: Arc<KetamaSelection>,
    cursor: ketama::FailoverCursor,
}

impl BackendIter for KetamaIter {
    fn next(&mut self) -> Option<&Backend> {
        // The cursor was made by this ring (in `iter`): never foreign.
        let i = self.sel.ring.advance(&mut self.cursor).ok().flatten()?;
        self.sel.backends.get(i)
    }
}

/// The workspace README's examples, compiled and run as doctests here,
/// where every crate they use is a dependency (only under `cargo test`:
/// the files are outside this crate's package).
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;

/// The library guide's examples.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
pub struct LibraryGuideDoctests;

/// The router guide's examples (the `ketama-pingora` drop-in).
#[cfg(doctest)]
#[doc = include_str!("../../../docs/router.md")]
pub struct RouterGuideDoctests;

/// The bounded-loads guide's examples.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/bounded-loads.md")]
pub struct BoundedLoadsDoctests;

/// This crate's README (what crates.io shows), compiled and run as a
/// doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct CrateReadmeDoctests;
