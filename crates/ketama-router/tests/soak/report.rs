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

/// The first sample at or after `warm`: the base growth is judged from.
pub fn warm_sample(samples: &[Sample], warm: Duration) -> Option<&Sample> {
    samples.iter().find(|s| s.at >= warm)
}

/// On a run of five minutes or more: per router, its (RSS, descriptors)
/// growth as a share, from the first sample at or after `warm` to the
/// last; `None` on shorter runs, where warm-up dominates.
pub fn growth(samples: &[Sample], warm: Duration) -> Option<Vec<(f64, f64)>> {
    let last = samples.last()?;
    if last.at < Duration::from_secs(300) {
        return None;
    }
    let base = warm_sample(samples, warm)?;
    let share = |l: f64, b: f64| l / b.max(1.0) - 1.0;
    Some(
        base.per
            .iter()
            .zip(&last.per)
            .map(|(b, l)| (share(l.0 as f64, b.0 as f64), share(l.1 as f64, b.1 as f64)))
            .collect(),
    )
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
    /// When warm-up ends: growth is judged from the first sample after.
    pub warm: Duration,
    /// Kept-alive connections the router closed as a request went out.
    pub raced: u64,
    /// Requests sent over TLS.
    pub tls_requests: usize,
    /// Requests sent over h2c (uploads, trailers, after a reset stream).
    pub h2_requests: usize,
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
        "| requests | {} ({} over TLS, {} over h2c) |",
        v.requests, i.tls_requests, i.h2_requests
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
    let mut picks: Vec<(&str, &Sample)> = match i.samples {
        [] => vec![],
        [only] => vec![("start", only)],
        all => vec![
            ("start", &all[0]),
            ("mid", &all[all.len() / 2]),
            ("end", &all[all.len() - 1]),
        ],
    };
    if growth(i.samples, i.warm).is_some() {
        if let Some(w) = warm_sample(i.samples, i.warm) {
            picks.insert(1, ("warm, growth's base", w));
        }
    }
    for (name, smp) in picks {
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

#[test]
fn growth_is_judged_per_router_on_both_rss_and_descriptors() {
    let at = |s| Duration::from_secs(s);
    let samples = [
        Sample {
            at: at(0),
            per: vec![(1000, 10), (1000, 10)],
        },
        Sample {
            at: at(120),
            per: vec![(2000, 50), (3000, 60)],
        },
        Sample {
            at: at(600),
            per: vec![(2100, 50), (3000, 90)],
        },
    ];
    let g = growth(&samples, at(120)).unwrap();
    assert_eq!(g.len(), 2, "one entry per router: {g:?}");
    assert!((g[0].0 - 0.05).abs() < 1e-9 && g[0].1 == 0.0, "{g:?}");
    // The second router's descriptors grew by half: the entry must say so.
    assert!(g[1].0 == 0.0 && (g[1].1 - 0.5).abs() < 1e-9, "{g:?}");
    assert!(
        growth(&samples[..2], at(120)).is_none(),
        "a short run is not judged"
    );
}
