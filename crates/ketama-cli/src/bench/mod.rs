//! `ketama bench`: ketama against pingora-ketama, built from the same nodes
//! in one process, runs interleaved, medians reported.
//!
//! - `rings`: every ketama layout against pingora-ketama v1 and v2: build
//!   time and memory, lookups (throughput, latency, batch);
//! - `subsets`: one ketama ring serving every label combination against a
//!   pingora-ketama ring per combination;
//! - `balance`: the bounded-loads decision against the plain one;
//! - `alloc`: the counting allocator both measure memory with; it counts
//!   only while a benchmark has switched it on.

pub mod alloc;
mod balance;
mod rings;
mod subsets;

use std::time::Duration;

use clap::Args;
use ketama::{Layout, Scheme, DEFAULT_POINT_MULTIPLE};

/// Options of `ketama bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Nodes on the ring (named 10.A.B.C:443).
    #[arg(long, default_value_t = 10_000)]
    pub(crate) nodes: u32,
    /// Weight of every node.
    #[arg(long, default_value_t = 1)]
    pub(crate) weight: u32,
    /// Points per weight unit.
    #[arg(long, default_value_t = DEFAULT_POINT_MULTIPLE)]
    pub(crate) point_multiple: u32,
    /// Lookups per measurement (30-byte keys).
    #[arg(long, default_value_t = 1_000_000)]
    pub(crate) keys: usize,
    /// Rounds; every implementation runs once per round, interleaved, and
    /// the table reports medians.
    #[arg(long, default_value_t = 5)]
    pub(crate) rounds: usize,
    /// ketama's scheme (pingora rows always use their own): nginx,
    /// pingora-v1, pingora-v2, libmemcached, twemproxy, haproxy,
    /// envoy-ring-hash or maglev (as `ketama route --compat`).
    #[arg(long, default_value = "nginx")]
    pub(crate) compat: Scheme,
    /// twemproxy's key hash (as in `ketama route --key-hash`).
    #[arg(long)]
    pub(crate) key_hash: Option<ketama::KeyHash>,
    /// Print one JSON object instead of the markdown table.
    #[arg(long)]
    pub(crate) json: bool,
    /// Instead: F labels (each node carries each with probability 1/2),
    /// one ketama ring serving all 2^F label combinations against 2^F
    /// pingora-ketama v2 rings; memory and ns per lookup.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub(crate) subsets: Option<u32>,
    /// ketama's layout for --subsets and --balance.
    #[arg(long, default_value = "compact")]
    pub(crate) layout: Layout,
    /// Instead: the bounded-loads decision at this balance factor (percent,
    /// 100 to 1000) against the plain decision and a pingora-ketama v2
    /// lookup, on one thread and on two sharing the counters.
    #[arg(long, conflicts_with = "subsets")]
    pub(crate) balance: Option<u32>,
}

/// Runs the benchmark the options ask for, with memory counting on.
pub fn run(mut args: BenchArgs) -> anyhow::Result<()> {
    args.compat = crate::args::with_key_hash(args.compat, args.key_hash, "--key-hash")?;
    alloc::enable();
    match (args.subsets, args.balance) {
        (Some(f), _) => subsets::run(&args, f),
        (None, Some(pct)) => balance::run(&args, pct),
        (None, None) => rings::run(&args),
    }
}

/// 30-byte keys, `/cdn/obj/` and 21 hex digits, back to back.
pub fn make_keys(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 30);
    for i in 0..n as u64 {
        out.extend_from_slice(&key(i));
    }
    out
}

/// Benchmark key number `i`: `/cdn/obj/` and 21 hex digits.
pub fn key(i: u64) -> [u8; 30] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // A multiplicative hash spreads the digits; keys stay distinct.
    let x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) as u128 & ((1 << 84) - 1);
    let mut k = *b"/cdn/obj/000000000000000000000";
    for (d, o) in k[9..].iter_mut().enumerate() {
        *o = HEX[(x >> (80 - 4 * d) & 15) as usize];
    }
    k
}

pub fn per(d: Duration, n: usize) -> f64 {
    d.as_secs_f64() * 1e9 / n.max(1) as f64
}

pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}
