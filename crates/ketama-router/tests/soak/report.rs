//! The soak's table: requests, failures by cause (expected or not),
//! faults injected by kind, p99 latency inside and outside origin fault
//! windows, how long changes took to show, RSS and descriptors over time.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::judge::{quantile, Verdict};
use crate::procs::rss_and_fds;
use crate::Change;

/// The routers' RSS (KiB) and descriptors at one moment of the run.
pub struct Sample {
    /// Time since the load started.
    pub at: Duration,
    /// Per router: (RSS KiB, open descriptors).
    pub per: Vec<(u64, usize)>,
}

/// Samples every router now.
pub fn sample(t0: Instant, pids: &[u32]) -> Sample {
    Sample {
        at: t0.elapsed(),
        per: pids.iter().map(|&p| rss_and_fds(p)).collect(),
    }
}

/// On a run of five minutes or more: each router's RSS and descriptor
/// growth (as a share) from the first sample at or after `warm` to the
/// last; `None` on shorter runs, where warm-up dominates.
pub fn growth(samples: &[Sample], warm: Duration) -> Option<Vec<f64>> {
    let last = samples.last()?;
    if last.at < Duration::from_secs(300) {
        return None;
    }
    let base = samples.iter().find(|s| s.at >= warm)?;
    let mut out = Vec::new();
    for (b, l) in base.per.iter().zip(&last.per) {
        out.push(l.0 as f64 / b.0.max(1) as f64 - 1.0);
        out.push(l.1 as f64 / b.1.max(1) as f64 - 1.0);
    }
    Some(out)
}

/// What the table is made from.
pub struct Inputs<'a> {
    /// The schedule's seed.
    pub seed: u64,
    /// The run's length.
    pub seconds: u64,
    /// The judge's findings.
    pub verdict: &'a Verdict,
    /// Faults and changes injected, by kind.
    pub counts: &'a BTreeMap<&'static str, usize>,
    /// Each change and how long it took to show.
    pub changes: &'a [Change],
    /// RSS and descriptors over time.
    pub samples: &'a [Sample],
    /// Kept-alive connections the router closed as a request went out.
    pub raced: u64,
    /// Requests sent over TLS.
    pub tls_requests: usize,
    /// Each graceful upgrade, SIGQUIT to the new process serving (ms).
    pub upgrades_ms: &'a [f64],
}

/// The table, in Markdown.
pub fn table(i: &Inputs) -> String {
    let v = i.verdict;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "soak: {} s, seed {}, two routers, 3 etcd members, 8 origins (5 in the config, 3 by DNS)\n",
        i.seconds, i.seed
    );
    let _ = writeln!(s, "| measure | value |\n|---|---|");
    let _ = writeln!(
        s,
        "| requests | {} ({} over TLS) |",
        v.requests, i.tls_requests
    );
    let failures: usize = v.expected.values().sum::<usize>() + v.unexpected_total();
    let _ = writeln!(
        s,
        "| failed requests | {failures} ({} expected, {} unexpected) |",
        failures - v.unexpected_total(),
        v.unexpected_total()
    );
    for (k, n) in &v.expected {
        let _ = writeln!(s, "| expected: {k} | {n} |");
    }
    for (k, n) in &v.unexpected {
        let _ = writeln!(s, "| **unexpected: {k}** | {n} |");
    }
    let _ = writeln!(
        s,
        "| kept-alive connections closed as a request went out (retried) | {} |",
        i.raced
    );
    for (k, n) in i.counts {
        let _ = writeln!(s, "| injected: {k} | {n} |");
    }
    let (mut inside, mut outside) = (v.inside_ms.clone(), v.outside_ms.clone());
    let _ = writeln!(
        s,
        "| p99 latency inside origin fault windows | {:.1} ms ({} requests) |",
        quantile(&mut inside, 0.99),
        inside.len()
    );
    let _ = writeln!(
        s,
        "| p99 latency outside them | {:.1} ms ({} requests) |",
        quantile(&mut outside, 0.99),
        outside.len()
    );
    for near in [false, true] {
        let mut lags: Vec<f64> = i
            .changes
            .iter()
            .filter(|c| c.etcd_fault_near == near)
            .map(|c| c.lag.as_secs_f64() * 1e3)
            .collect();
        let when = if near {
            "within 5 s of an etcd kill"
        } else {
            "no etcd fault near"
        };
        let n = lags.len();
        let _ = writeln!(
            s,
            "| changes visible on both routers, {when} | {n}: p50 {:.0} ms, max {:.0} ms |",
            quantile(&mut lags, 0.5),
            lags.iter().cloned().fold(0.0, f64::max)
        );
    }
    let mut kinds: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for c in i.changes {
        kinds
            .entry(c.what)
            .or_default()
            .push(c.lag.as_secs_f64() * 1e3);
    }
    for (what, lags) in &mut kinds {
        let n = lags.len();
        let max = lags.iter().cloned().fold(0.0, f64::max);
        let _ = writeln!(
            s,
            "| {what} changes visible on both routers | {n}: p50 {:.0} ms, max {max:.0} ms |",
            quantile(lags, 0.5)
        );
    }
    if !i.upgrades_ms.is_empty() {
        let mut ms = i.upgrades_ms.to_vec();
        let _ = writeln!(
            s,
            "| graceful upgrades of router 1 (start of the new process to the old one gone) | {}: p50 {:.0} ms, max {:.0} ms |",
            ms.len(),
            quantile(&mut ms, 0.5),
            ms.iter().cloned().fold(0.0, f64::max)
        );
    }
    let picks: Vec<&Sample> = match i.samples {
        [] => vec![],
        [only] => vec![only],
        all => vec![&all[0], &all[all.len() / 2], &all[all.len() - 1]],
    };
    for (name, smp) in ["start", "mid", "end"].iter().zip(picks) {
        let per: Vec<String> = smp
            .per
            .iter()
            .map(|(rss, fds)| format!("{:.1} MiB, {fds} fds", *rss as f64 / 1024.0))
            .collect();
        let _ = writeln!(
            s,
            "| routers at {name} ({:.0} s) | {} |",
            smp.at.as_secs_f64(),
            per.join("; ")
        );
    }
    if !v.examples.is_empty() {
        let _ = writeln!(s, "\nunexpected, first {}:", v.examples.len());
        for e in &v.examples {
            let _ = writeln!(s, "- {e}");
        }
    }
    s
}
