//! Synthetic server names (`10.A.B.C:PORT`) for benchmarks, sweeps and
//! tests: one generator, so that every tool names the same servers.

use crate::mix::SplitMix64;

/// The name of synthetic server `i`: `10.A.B.C:PORT` where `A.B.C` are the
/// three low bytes of `i` (so up to 2^24 distinct names per port).
fn name(i: u32, port: u16) -> String {
    format!(
        "10.{}.{}.{}:{port}",
        (i >> 16) & 255,
        (i >> 8) & 255,
        i & 255
    )
}

/// Servers `0..n` named `10.A.B.C:PORT` (`A.B.C` the three low bytes of the number), all on `port`: `10.0.0.0:443`,
/// `10.0.0.1:443`, ...
pub fn numbered(n: u32, port: u16) -> Vec<String> {
    (0..n).map(|i| name(i, port)).collect()
}

/// `n` distinct random servers: the 24 address bits and a port from 1,024
/// to 65,535 come from a SplitMix64 stream seeded with `seed` (a repeat is
/// skipped), so a seed names the same servers on every machine and
/// release.
pub fn seeded(n: usize, seed: u64) -> Vec<String> {
    let mut rng = SplitMix64::new(seed);
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let x = rng.next();
        let port = 1024 + (x >> 32) as u32 % (65_536 - 1024);
        let s = name(x as u32 & 0x00FF_FFFF, port as u16);
        if seen.insert(s.clone()) {
            out.push(s);
        }
    }
    out
}
