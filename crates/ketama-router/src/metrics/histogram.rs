//! A latency histogram of plain atomics: 20 buckets from 100 us doubling
//! to about 26 s, then `+Inf`, and the sum. 168 bytes; an observation is
//! two relaxed atomic adds.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Buckets, `+Inf` included.
pub const BUCKETS: usize = ketama_fleet::report::LATENCY_BUCKETS;

/// Upper bounds of the buckets, in seconds, as the exposition writes them.
pub const LE: [&str; BUCKETS] = [
    "0.0001", "0.0002", "0.0004", "0.0008", "0.0016", "0.0032", "0.0064", "0.0128", "0.0256",
    "0.0512", "0.1024", "0.2048", "0.4096", "0.8192", "1.6384", "3.2768", "6.5536", "13.1072",
    "26.2144", "+Inf",
];

/// See the module docs.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Non-cumulative counts per bucket; cumulated when rendered.
    buckets: [AtomicU64; BUCKETS],
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Counts one duration.
    pub fn observe(&self, seconds: f64) {
        // Bucket i holds durations up to 100 us x 2^i.
        let mut bucket = 0;
        let mut bound = 0.0001;
        while bucket < BUCKETS - 1 && seconds > bound {
            bucket += 1;
            bound *= 2.0;
        }
        self.buckets[bucket].fetch_add(1, Relaxed);
        self.sum_ns
            .fetch_add((seconds.max(0.0) * 1e9) as u64, Relaxed);
    }

    /// The counts per bucket (not cumulated).
    pub fn counts(&self) -> [u64; BUCKETS] {
        self.buckets.each_ref().map(|c| c.load(Relaxed))
    }

    /// Writes the family's samples for one backend: `_sum`, `_count`,
    /// then the cumulative `_bucket`s.
    pub fn render(&self, out: &mut String, name: &str, label: &str) {
        let counts = self.counts();
        let count: u64 = counts.iter().sum();
        let sum = self.sum_ns.load(Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{{backend=\"{label}\"}} {sum:?}");
        let _ = writeln!(out, "{name}_count{{backend=\"{label}\"}} {count}");
        let mut cumulative = 0;
        for (le, n) in LE.iter().zip(counts) {
            cumulative += n;
            out.push_str(name);
            out.push_str("_bucket{le=\"");
            out.push_str(le);
            out.push_str("\",backend=\"");
            out.push_str(label);
            out.push_str("\"} ");
            out.push_str(itoa::Buffer::new().format(cumulative));
            out.push('\n');
        }
    }
}

/// The `q` quantile (0 to 1) of bucket counts, in seconds (the fleet's
/// reports carry the same buckets: one rule for both).
pub fn quantile(counts: &[u64; BUCKETS], q: f64) -> Option<f64> {
    ketama_fleet::report::quantile(counts, q)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_their_bucket_and_quantiles_interpolate() {
        let h = Histogram::default();
        for _ in 0..90 {
            h.observe(0.00015); // bucket 1: (0.0001, 0.0002]
        }
        for _ in 0..10 {
            h.observe(0.05); // bucket 9: (0.0256, 0.0512]
        }
        let c = h.counts();
        assert_eq!((c[1], c[9]), (90, 10));
        let p50 = quantile(&c, 0.5).unwrap();
        assert!(p50 > 0.0001 && p50 <= 0.0002, "{p50}");
        let p99 = quantile(&c, 0.99).unwrap();
        assert!(p99 > 0.0256 && p99 <= 0.0512, "{p99}");
        assert_eq!(quantile(&[0; BUCKETS], 0.5), None);
        h.observe(100.0);
        assert_eq!(h.counts()[BUCKETS - 1], 1);
        let mut s = String::new();
        h.render(&mut s, "x", "b");
        assert!(s.contains("x_count{backend=\"b\"} 101\n"), "{s}");
        assert!(
            s.contains("x_bucket{le=\"+Inf\",backend=\"b\"} 101\n"),
            "{s}"
        );
    }
}
