//! Envoy's and gRPC's consistent hashing: `ring_hash` (Envoy, gRPC's C
//! core, grpc-go, grpc-java: one ring) and Envoy's `maglev`, exactly as
//! `source/extensions/load_balancing_policies/{ring_hash,maglev}/` in
//! envoyproxy/envoy and `ring_hash.cc` in grpc/grpc build and search them.
//!
//! # `ring_hash`
//!
//! Weights are normalised (`w / sum`); the ring gets
//! `scale = min(ceil(min_w x min_ring_size) / min_w, max_ring_size)`
//! entries in all, host by host in configuration order: a running target
//! `target += scale x w` and entries `XXH64("<host>_<i>", 0)` for
//! `i = 0, 1, ...` while the running count is below the target (so the
//! fractional parts carry from host to host, in IEEE doubles as there).
//! Entries are 64-bit and sorted; a key goes to the first entry at or
//! after `XXH64(key, 0)`, wrapping. gRPC caps both sizes at its
//! `ring_size_cap` (4,096 by default): [`RingHash::GRPC`].
//!
//! The layouts hold 32-bit hashes, so a 64-bit entry is split: its top 32
//! bits go into the layout like any point (equal tops stay side by side,
//! nothing is merged), its low 32 bits into one array beside it. A lookup
//! searches the top bits and compares low bits only when the key's top
//! bits equal the found entry's (about one lookup in `2^32 / P`). An entry
//! costs the layout's bytes per point plus 4: 12 B in `Wide`, 10 in
//! `Packed`, and in `Compact` 4 plus its 3.0 to 3.5 (measured in
//! `docs/envoy.md`); the low bits are incompressible (the floor for 64-bit
//! hashes is `64 - log2 P + 1.44` bits an entry, 6.7 B at 4,096 entries
//! before owners). Envoy keeps 24 B an entry (the hash and a
//! `shared_ptr`), gRPC 16 (the hash and an index).
//!
//! Envoy's ties (two entries of one 64-bit hash) are unordered (`std::sort`);
//! ketama puts the earlier node in configuration order first. At 4,096
//! entries two equal hashes turn up once in 10^12 rings.
//!
//! # `maglev`
//!
//! A table of `M` (prime) slots. Hosts sorted by their key string; each has
//! `offset = XXH64(key, 0) % M` and `skip = XXH64(key, 1) % (M - 1) + 1`,
//! and in rounds takes its next free slot of `offset + skip x j` when
//! `round x w >= target` (then `target += max_w`). A key goes to
//! `table[XXH64(key, 0) % M]`; Envoy's retry `a` looks at
//! `table[(hash ^ (2^64 - a)) % M]`, which is ketama's failover order
//! (distinct hosts as the attempts find them, then table order).
//!
//! The table is a ring of `M` points: slot `s` at
//! `floor((s + 1) x 2^32 / M) - 1`, a key's 32-bit hash that of its slot.
//! A slot costs 8 bytes in `Wide`, 6 in `Packed`, and in `Compact` only its
//! owner, `ceil(log2 N)` bits (1 byte for up to 256 servers), its hash
//! computed and its lookup one multiplication (Envoy: 16 B a slot, or
//! `bit_width(N)` bits in its compact table).

mod maglev;
mod murmur;
pub mod policy;
mod xxh64;

use std::fmt;

pub use maglev::{is_prime, table as maglev_table};
pub use murmur::murmur2_64;
pub use xxh64::xxh64;

/// The hash function of a `ring_hash` ring (Envoy's `hash_function`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RingHashFunction {
    /// `XX_HASH`: XXH64 with seed 0, Envoy's default and gRPC's only.
    #[default]
    XxHash,
    /// `MURMUR_HASH_2`: MurmurHash64A with Envoy's `STD_HASH_SEED`.
    Murmur2,
}

impl RingHashFunction {
    /// The 64-bit hash of `bytes`. Cost: one pass.
    #[inline]
    pub fn hash(self, bytes: &[u8]) -> u64 {
        match self {
            RingHashFunction::XxHash => xxh64(bytes, 0),
            RingHashFunction::Murmur2 => murmur2_64(bytes, murmur::STD_HASH_SEED),
        }
    }
}

/// A `ring_hash` configuration: the sizes and the hash function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RingHash {
    /// `minimum_ring_size` (gRPC: `minRingSize`).
    pub min_ring_size: u64,
    /// `maximum_ring_size` (gRPC: `maxRingSize`, capped by
    /// `ring_size_cap`).
    pub max_ring_size: u64,
    /// `hash_function`.
    pub function: RingHashFunction,
}

/// Envoy's defaults: 1,024 to 8,388,608 entries, XXH64.
impl Default for RingHash {
    fn default() -> Self {
        RingHash {
            min_ring_size: 1024,
            max_ring_size: 8 * 1024 * 1024,
            function: RingHashFunction::XxHash,
        }
    }
}

impl RingHash {
    /// gRPC's defaults: `minRingSize` 1,024 and `maxRingSize` 8M, both
    /// capped at `ring_size_cap`, 4,096.
    pub const GRPC: RingHash = RingHash {
        min_ring_size: 1024,
        max_ring_size: 4096,
        function: RingHashFunction::XxHash,
    };

    /// gRPC's `ring_size_cap` default.
    pub const GRPC_RING_SIZE_CAP: u64 = 4096;

    /// What is wrong with these sizes, if anything (Envoy's and gRPC's
    /// checks: `min <= max`, both at least 1, at most 8M).
    pub fn problem(&self) -> Option<String> {
        const MAX: u64 = 8 * 1024 * 1024;
        if self.min_ring_size == 0 || self.max_ring_size == 0 {
            return Some("ring sizes must be at least 1".into());
        }
        if self.min_ring_size > self.max_ring_size {
            return Some(format!(
                "min={} is over max={}: ring hash needs minimum_ring_size <= maximum_ring_size",
                self.min_ring_size, self.max_ring_size
            ));
        }
        if self.max_ring_size > MAX {
            return Some(format!(
                "max={} is over {MAX}, the largest ring Envoy and gRPC build",
                self.max_ring_size
            ));
        }
        None
    }

    /// How many entries each weight gets, in order, as Envoy and gRPC count
    /// them (zero weights get none and do not count). `O(N)`.
    pub fn entry_counts(&self, weights: &[u32]) -> Vec<u64> {
        let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
        let mut out = vec![0u64; weights.len()];
        if sum == 0 {
            return out;
        }
        let norm: Vec<f64> = weights.iter().map(|&w| f64::from(w) / sum as f64).collect();
        let min_w = norm
            .iter()
            .copied()
            .filter(|&w| w > 0.0)
            .fold(1.0f64, f64::min);
        let scale =
            ((min_w * self.min_ring_size as f64).ceil() / min_w).min(self.max_ring_size as f64);
        let (mut current, mut target) = (0.0f64, 0.0f64);
        for (o, &w) in out.iter_mut().zip(&norm) {
            if w == 0.0 {
                continue;
            }
            target += scale * w;
            while current < target {
                *o += 1;
                current += 1.0;
            }
        }
        out
    }

    /// The entries of `keys` (each host's hash key) with `counts` from
    /// [`entry_counts`](Self::entry_counts): `(hash, host index)`, sorted by
    /// hash, then host. `O(P log P)`.
    pub fn entries(&self, keys: &[&[u8]], counts: &[u64]) -> Vec<(u64, u32)> {
        let mut out = Vec::with_capacity(counts.iter().sum::<u64>() as usize);
        let mut buf = Vec::with_capacity(64);
        for (host, (key, &n)) in keys.iter().zip(counts).enumerate() {
            buf.clear();
            buf.extend_from_slice(key);
            buf.push(b'_');
            let stem = buf.len();
            for i in 0..n {
                buf.truncate(stem);
                push_decimal(&mut buf, i);
                out.push((self.function.hash(&buf), host as u32));
            }
        }
        out.sort_unstable();
        out
    }
}

fn push_decimal(buf: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    buf.extend_from_slice(&digits[i..]);
}

/// Prints `min=..,max=..[,murmur2]`, the options [`parse_options`] reads.
impl fmt::Display for RingHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "min={},max={}", self.min_ring_size, self.max_ring_size)?;
        if self.function == RingHashFunction::Murmur2 {
            f.write_str(",murmur2")?;
        }
        Ok(())
    }
}

/// Reads `ring_hash` options: comma-separated `min=N`, `max=N`,
/// `cap=N` (gRPC's `ring_size_cap`: both sizes at most N), `grpc` (gRPC's
/// defaults), `xxhash`, `murmur2`; later ones win. `None` for anything
/// else.
pub fn parse_options(s: &str) -> Option<RingHash> {
    let mut r = RingHash::default();
    let mut cap = None;
    for opt in s.split(',').map(str::trim) {
        match opt.split_once('=') {
            Some(("min", v)) => r.min_ring_size = v.parse().ok()?,
            Some(("max", v)) => r.max_ring_size = v.parse().ok()?,
            Some(("cap", v)) => cap = Some(v.parse::<u64>().ok()?),
            None if opt == "grpc" => {
                r.min_ring_size = RingHash::GRPC.min_ring_size;
                r.max_ring_size = 8 * 1024 * 1024;
                cap = Some(RingHash::GRPC_RING_SIZE_CAP);
            }
            None if opt == "xxhash" => r.function = RingHashFunction::XxHash,
            None if opt == "murmur2" => r.function = RingHashFunction::Murmur2,
            _ => return None,
        }
    }
    if let Some(c) = cap {
        r.min_ring_size = r.min_ring_size.min(c);
        r.max_ring_size = r.max_ring_size.min(c);
    }
    Some(r)
}

/// A Maglev configuration: the table size.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Maglev {
    /// `table_size`: a prime, at most [`Maglev::MAX_TABLE_SIZE`].
    pub table_size: u64,
}

/// Envoy's default table, 65,537 slots.
impl Default for Maglev {
    fn default() -> Self {
        Maglev { table_size: 65537 }
    }
}

impl Maglev {
    /// Envoy's largest table size (its API's bound).
    pub const MAX_TABLE_SIZE: u64 = 5_000_011;

    /// What is wrong with the table size, if anything.
    pub fn problem(&self) -> Option<String> {
        let m = self.table_size;
        if m > Self::MAX_TABLE_SIZE {
            return Some(format!(
                "table size {m} is over Envoy's largest, {}",
                Self::MAX_TABLE_SIZE
            ));
        }
        if !is_prime(m) {
            return Some(format!(
                "table size {m} is not a prime: Maglev's permutations need one (e.g. 65537, 655373)"
            ));
        }
        None
    }

    /// The 32-bit ring hash of table slot `s`: slots split the 32-bit
    /// circle into `M` arcs, slot `s` at the end of its arc.
    #[inline]
    pub fn slot_hash(&self, s: u64) -> u32 {
        ((((s + 1) << 32) / self.table_size) - 1) as u32
    }

    /// The slot whose arc holds a 32-bit ring hash: the first slot whose
    /// [`slot_hash`](Self::slot_hash) is at or after it.
    #[inline]
    pub fn slot_of_hash(&self, hash: u32) -> u64 {
        ((u64::from(hash) + 1) * self.table_size).div_ceil(1 << 32) - 1
    }

    /// The slot of a key's 64-bit hash on retry attempt `attempt` (0: the
    /// first pick), as Envoy's `chooseHost(hash, attempt)`.
    #[inline]
    pub fn slot(&self, hash: u64, attempt: u64) -> u64 {
        let h = if attempt > 0 {
            hash ^ attempt.wrapping_neg()
        } else {
            hash
        };
        h % self.table_size
    }
}

#[cfg(test)]
mod tests;
