//! Building Envoy's Maglev table (`MaglevTable::constructMaglevTableInternal`
//! and `OriginalMaglevTable::constructImplementationInternals`).

use super::{xxh64, Maglev};

/// Whether `n` is prime (trial division: a table size is at most a few
/// million, so at most a few thousand divisions).
pub fn is_prime(n: u64) -> bool {
    if n < 2 {
        return false;
    }
    let mut d = 2u64;
    while d * d <= n {
        if n % d == 0 {
            return false;
        }
        d += 1;
    }
    true
}

/// The table: for each slot, the index (into `keys`) of its host. `keys`
/// are the hosts' hash keys, `weights` their weights (zero: not in the
/// table); empty when no host has weight. The caller has checked `m`
/// ([`Maglev::problem`]). `O(M log M)` expected (each host's probe
/// sequence skips taken slots).
pub fn table(m: &Maglev, keys: &[&[u8]], weights: &[u32]) -> Vec<u32> {
    struct Entry {
        host: u32,
        offset: u64,
        skip: u64,
        weight: f64,
        target: f64,
        next: u64,
    }
    let size = m.table_size;
    let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if sum == 0 {
        return Vec::new();
    }
    // Envoy fills in the order of the hosts' keys, so that the table does
    // not depend on the order the hosts came in.
    let mut order: Vec<usize> = (0..keys.len()).filter(|&i| weights[i] > 0).collect();
    order.sort_by(|&a, &b| keys[a].cmp(keys[b]));
    let norm = |i: usize| f64::from(weights[i]) / sum as f64;
    let max_w = order.iter().map(|&i| norm(i)).fold(0.0f64, f64::max);
    let mut entries: Vec<Entry> = order
        .iter()
        .map(|&i| Entry {
            host: i as u32,
            offset: xxh64(keys[i], 0) % size,
            skip: xxh64(keys[i], 1) % (size - 1) + 1,
            weight: norm(i),
            target: 0.0,
            next: 0,
        })
        .collect();
    const FREE: u32 = u32::MAX;
    let mut table = vec![FREE; size as usize];
    let mut filled = 0u64;
    let mut iteration: u32 = 1;
    // In u64 with wraparound, as Envoy's `permutation`.
    let perm = |e: &Entry| (e.offset.wrapping_add(e.skip.wrapping_mul(e.next)) % size) as usize;
    while filled < size {
        for e in entries.iter_mut() {
            if filled >= size {
                break;
            }
            if f64::from(iteration) * e.weight < e.target {
                continue;
            }
            e.target += max_w;
            let mut c = perm(e);
            while table[c] != FREE {
                e.next += 1;
                c = perm(e);
            }
            table[c] = e.host;
            e.next += 1;
            filled += 1;
        }
        iteration += 1;
    }
    table
}
