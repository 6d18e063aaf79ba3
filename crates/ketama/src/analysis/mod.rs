//! The numbers behind a ring: exact keyspace shares, predicted and measured
//! balance, and the cost of a change between two rings.
//!
//! - shares and the balance model: [`keyspace`], [`analyze`], [`predicted_cv`];
//! - [`diff`]: the exact keyspace that changes server between two rings
//!   (one key hash), [`diff_sampled`]: the same estimated from sampled keys
//!   (rings with different key hashes); [`migration_plan`]: the share moved
//!   at each rollout step;
//! - [`sweep_step`]: the CV measured over random server sets, for sweeps;
//! - [`recommend`]: the smallest point multiple that meets a balance target;
//! - [`layout_memory`]: what a ring costs in each layout;
//! - [`simulate`]: a workload replayed with bounded loads, to choose a
//!   balance factor.
//!
//! # Shares
//!
//! A key with hash `h` goes to the first point at or after `h`, so point
//! `i` (in ring order) serves the `hash[i] - hash[i-1]` keys above its
//! predecessor, and the first point also serves everything past the last
//! point: `hash[0] + 2^32 - hash[P-1]` keys. A point of a `down` node serves
//! nothing itself: its keys go to the next serving point in ring order.
//! Summing per node gives each node's exact share of the 2^32 keyspace as
//! an integer; the counts add up to exactly 2^32. `O(P)`.
//!
//! # Predicted balance
//!
//! Throw `P` points uniformly on the ring; the `P` arcs between them are
//! jointly Dirichlet(1, ..., 1), so a node holding `k` of the points owns a
//! share `S ~ Beta(k, P - k)`: mean `k / P`, variance
//! `k (P - k) / (P^2 (P + 1))`. Its coefficient of variation is therefore
//!
//! ```text
//! CV_k = sqrt((P - k) / (k (P + 1)))
//! ```
//!
//! With `N` equal nodes of `k` points each (`P = N k`) this is the article's
//! `sqrt((N - 1) / (N k + 1))`: 0.990 for N = 100, k = 1; 0.0787 at k = 160.
//! With unequal weights, node `i` has `k_i = w_i x m` points and its own
//! `CV_i`; the ring's predicted CV is the root mean square of the `CV_i` over
//! the nodes of nonzero weight, because the measured CV is the spread of
//! `share_i / expected_i` (whose mean is 1 and whose variance for node `i`
//! is `CV_i^2`) over those nodes. The model ignores collisions: 32-bit
//! hashes of `P` points collide about `P^2 / 2^33` times, and each collision
//! hands a point (and its arc) to the tie winner, which adds error the
//! formula does not see once `P` reaches the tens of millions.

pub mod cache_sim;
mod diff;
mod diff_requests;
mod lru;
mod recommend;
mod shares;
pub mod simulate;
mod sweep;

pub use diff::{diff, diff_sampled, Diff, SampledDiff, ServerDiff};
pub use diff_requests::{diff_requests, request_counts, RequestCounts, RequestDiff};
pub use recommend::{layout_memory, recommend, Recommendation, Target};
pub use shares::{
    analyze, keyspace, predicted_cv, predicted_cv_equal, predicted_cv_of, Analysis, NodeStats,
    KEYSPACE,
};

/// The migration's plan: for each rollout step (basis points), the share
/// of the keyspace whose server changes against the old ring: `bp /
/// 10,000` times the exact moved fraction between the rings (rollout
/// buckets are independent of ring position). `O(P_old + P_new)`.
///
/// # Errors
/// As [`diff`]: rings with different key hashes need a sampled estimate
/// ([`diff_sampled`]) and [`crate::migration::plan_for`].
pub fn migration_plan(
    old: &crate::Ring,
    new: &crate::Ring,
    steps: &[u16],
) -> crate::Result<Vec<(u16, f64)>> {
    Ok(crate::migration::plan_for(diff(old, new)?.moved, steps))
}
pub use sweep::{sweep_step, SweepRow};
