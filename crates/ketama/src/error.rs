//! The errors a ring build or a servers file can produce.
//!
//! Every variant names the input at fault and says what to do about it; none
//! of them is ever raised by a lookup (lookups cannot fail: an empty ring
//! answers `None`).

use std::net::SocketAddr;

use crate::version::Version;
use crate::{Layout, Scheme};

/// An error building a [`Ring`](crate::Ring) or reading a servers file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Two nodes carry the same server string.
    #[error("duplicate server {server:?} (nodes #{first} and #{second}): every server string must be unique; remove one or merge their weights")]
    DuplicateServer {
        /// The repeated server string.
        server: String,
        /// Position (0-based, configuration order) of the first occurrence.
        first: usize,
        /// Position of the repeat.
        second: usize,
    },
    /// A node's server string is empty.
    #[error("node #{index} has an empty server string: give it an address such as 10.0.0.1:443")]
    EmptyServer {
        /// Position of the node in configuration order.
        index: usize,
    },
    /// A pingora scheme was given a server that is not a socket address.
    #[error("server {server:?} is not a socket address, which {compat} requires (pingora-ketama hashes a SocketAddr): write it as IP:PORT, e.g. 10.0.0.1:443 or [2001:db8::1]:443, or use the nginx scheme, which hashes any server string")]
    NotSocketAddr {
        /// The offending server string.
        server: String,
        /// The scheme that needs socket addresses.
        compat: Scheme,
    },
    /// Two server strings name the same socket address in a pingora scheme.
    #[error("servers {first:?} and {second:?} are the same socket address {addr} under {compat}: pingora-ketama would hash them identically; keep one")]
    DuplicateAddress {
        /// The first server string.
        first: String,
        /// The second server string.
        second: String,
        /// The address both parse to.
        addr: SocketAddr,
        /// The scheme in use.
        compat: Scheme,
    },
    /// More nodes than a pingora scheme can index.
    #[error("{nodes} nodes is more than {compat} supports ({max}): pingora-ketama keeps the node index in a u16 and would misroute; use the nginx scheme for larger rings")]
    TooManyNodesForCompat {
        /// Nodes given.
        nodes: usize,
        /// The most the scheme allows.
        max: usize,
        /// The scheme.
        compat: Scheme,
    },
    /// More nodes than a storage layout can index.
    #[error("{nodes} nodes is more than the {layout} layout holds ({max}): use the wide layout")]
    TooManyNodesForLayout {
        /// Nodes given.
        nodes: usize,
        /// The most the layout holds.
        max: usize,
        /// The layout.
        layout: Layout,
    },
    /// The point multiple is zero.
    #[error("point multiple 0 would give every node no points: use at least 1 (nginx uses 160)")]
    ZeroPointMultiple,
    /// The ring would have more points than [`MAX_POINTS`](crate::MAX_POINTS).
    #[error("too many points: node {server:?} (weight {weight} x point multiple {point_multiple} = {node_points} points) brings the ring to {total} points, over the limit of {max}; lower the weights or the point multiple")]
    TooManyPoints {
        /// The node at which the total crossed the limit.
        server: String,
        /// Its position in configuration order.
        index: usize,
        /// Its weight.
        weight: u32,
        /// The point multiple in use.
        point_multiple: u32,
        /// Points this node alone would add.
        node_points: u64,
        /// Total points including this node.
        total: u64,
        /// The limit.
        max: u64,
    },
    /// A ring's nodes carry more than 64 distinct labels.
    #[error("label {label:?} (on {server:?}) is the 65th distinct label: a ring holds at most 64; merge or drop labels")]
    TooManyLabels {
        /// The label that did not fit.
        label: String,
        /// The server carrying it.
        server: String,
    },
    /// A lookup required a label no node of the ring carries.
    #[error("unknown label {label:?}: the ring's labels are {known}")]
    UnknownLabel {
        /// The label asked for.
        label: String,
        /// The labels the ring has, comma-separated ("none" if none).
        known: String,
    },
    /// A [`Route`](crate::Route) was advanced on a table that did not make
    /// it.
    #[error("this route was made by another route table: advance a route only on the table whose route() made it")]
    ForeignRoute,
    /// [`RouteTable::counterpart`](crate::RouteTable::counterpart) was given
    /// a key other than the one its route was made for.
    #[error("this key is not the one the route was made for: pass counterpart() the key that route() was given")]
    KeyNotRouted,
    /// A [`FailoverCursor`](crate::FailoverCursor) was advanced on a ring
    /// (or requirement) that did not make it.
    #[error("this failover cursor was made by another ring: advance a cursor only on the ring (or requirement) that made it")]
    ForeignCursor,
    /// A peer's own hash was given to a ring of another scheme.
    #[error("{peer} hash keys themselves; a ring of {compat} cannot place such a hash: give the ring (and a migration's) a scheme of that peer (haproxy for balance source, envoy-ring-hash or maglev for hash policies)")]
    PeerHashOnRing {
        /// Whose hash it is.
        peer: &'static str,
        /// The ring's scheme.
        compat: Scheme,
    },
    /// A 64-bit hash was given to a ring of a 32-bit scheme.
    #[error("{compat} hashes keys in 32 bits: a 64-bit hash means nothing on its ring; look keys up by key (node, failover) or by their 32-bit hash")]
    NarrowScheme {
        /// The ring's scheme.
        compat: Scheme,
    },
    /// An exact diff was asked of rings that hash keys differently (or
    /// with a hash that does not cover all 2^32 values).
    #[error("the rings hash keys with {from} and {to}: their hash spaces are unrelated, so no exact diff exists; estimate it from sampled keys with analysis::diff_sampled (ketama diff samples by itself)")]
    DiffNeedsSampling {
        /// The `from` ring's key hash.
        from: &'static str,
        /// The `to` ring's key hash.
        to: &'static str,
    },
    /// A [`Need`](crate::Need) was used with a table that did not make it.
    #[error("this label requirement was prepared by another route table: prepare it on this table with RouteTable::need")]
    ForeignNeed,
    /// A [`LoadTracker`](crate::load::LoadTracker) was used with a table
    /// that did not make it.
    #[error("this load tracker was made for another route table: make one with LoadTracker::new(&table)")]
    ForeignTracker,
    /// An error on one ring of a migration.
    #[error("on the {ring} ring: {source}")]
    OnRing {
        /// The ring at fault.
        ring: Version,
        /// What went wrong there.
        source: Box<Error>,
    },
    /// Label requirements are defined for the nginx and pingora-v2 schemes
    /// only.
    #[error(
        "label requirements need the nginx, pingora-v2 or haproxy scheme, not {compat}: {why}"
    )]
    RequirementUnsupported {
        /// The ring's scheme.
        compat: Scheme,
        /// Why no subset answer can match the peer there.
        why: &'static str,
    },
    /// A scheme was given a server it cannot hash (a memcached scheme's
    /// malformed address, a twemproxy name under another scheme).
    #[error("server {server:?} cannot be used with {compat}: {reason}")]
    UnusableServer {
        /// The server string.
        server: String,
        /// The scheme.
        compat: Scheme,
        /// What is wrong and what to write instead.
        reason: String,
    },
    /// Two servers hash the same point name in a memcached scheme.
    #[error("servers {first:?} and {second:?} both hash as {name:?} under {compat}, so their points would coincide: keep one, or give them distinct names")]
    DuplicateName {
        /// The first server.
        first: String,
        /// The second server.
        second: String,
        /// The point name both have.
        name: String,
        /// The scheme.
        compat: Scheme,
    },
    /// The weights add up past what the scheme counts.
    #[error("the weights add up to {total}, over {compat}'s limit of {max} (it sums them in 32 bits): scale the weights down")]
    TotalWeightTooLarge {
        /// The sum of the weights.
        total: u64,
        /// The limit.
        max: u64,
        /// The scheme.
        compat: Scheme,
    },
    /// A scheme's own settings (a ring or table size) are ones its peer
    /// refuses.
    #[error("{compat}: {reason}")]
    SchemeSettings {
        /// The scheme.
        compat: Scheme,
        /// What is wrong, and what to do.
        reason: String,
    },
    /// A scheme whose point count is fixed was given another multiple.
    #[error("{compat} {}, whatever the point multiple: {given} is not supported; leave it at {}", fixed_points_text(*.compat), .compat.fixed_point_multiple().unwrap_or(0))]
    FixedPointMultiple {
        /// The scheme.
        compat: Scheme,
        /// The multiple asked for.
        given: u32,
    },
    /// No point multiple can reach a balance target.
    #[error("no point multiple reaches a CV of {target_cv}: the best is {best_cv:.6} at the largest multiple the point limit allows ({max_multiple}); ask for a larger CV")]
    UnreachableTarget {
        /// The CV asked for.
        target_cv: f64,
        /// The best predicted CV.
        best_cv: f64,
        /// The largest multiple that fits the point limit.
        max_multiple: u32,
    },
    /// Two servers were given the same HAProxy id.
    #[error("servers {first:?} and {second:?} both have id {id}: HAProxy refuses a custom id used twice; give each server its own id")]
    DuplicateId {
        /// The first server with the id.
        first: String,
        /// The second.
        second: String,
        /// The id.
        id: u32,
    },
    /// A HAProxy configuration has no such backend, or several to choose
    /// from.
    #[error("{file}: {reason}")]
    Backend {
        /// The configuration file.
        file: String,
        /// What is missing and what to do.
        reason: String,
    },
    /// A line of a servers file could not be read.
    #[error("{file}:{line}: {reason}")]
    Syntax {
        /// Name of the servers file (as given by the caller).
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// A servers file names the same server twice.
    #[error("{file}:{line}: duplicate server {server:?}, first defined on line {first_line}: every server must be unique")]
    DuplicateServerLine {
        /// Name of the servers file.
        file: String,
        /// Line of the repeat.
        line: usize,
        /// Line of the first definition.
        first_line: usize,
        /// The repeated server.
        server: String,
    },
}

/// How a scheme with fixed points places them, for [`Error::FixedPointMultiple`].
fn fixed_points_text(compat: Scheme) -> &'static str {
    if compat.is_memcached() {
        "gives 160 points per server on average (in MD5 digests of four)"
    } else if compat.is_envoy() {
        "sizes its ring or table from its own settings (min/max ring size, table size), not a point multiple: leave the multiple at its default, 160"
    } else {
        "gives 16 points per weight unit (HAProxy's BE_WEIGHT_SCALE)"
    }
}

/// Short for `Result<T, ketama::Error>`.
pub type Result<T, E = Error> = std::result::Result<T, E>;
