//! The live differential against nginx 1.22 (HTTP Garden's method): seeded
//! mutations of valid requests ([`common::mutate`]) sent as raw bytes to
//! the router and to nginx, each in front of its own recording origin
//! ([`common::differential`]). The router's origin must be handed exactly
//! what nginx's is, and its clients must read the same statuses, except
//! for the differences docs/router.md lists ("Differences from nginx"),
//! which are excused here by name.
//!
//! `KETAMA_DIFF_CASES` and `KETAMA_DIFF_SEED` choose a longer run
//! (`scripts/differential.sh N SEED`); by default two fixed seeds of
//! 1,000 cases each.

mod common;

use std::collections::BTreeMap;

use common::differential::{differences, pair_with, run, show_forwarded, Outcome, Pair};
use common::mutate::{case, Req};

/// Differences kept on purpose, by the name docs/router.md gives them.
pub const EXCUSED: &[&str] = &[
    "http09",
    "absolute_form_host",
    "chunked_framing",
    "head_over_limit",
];

/// The excused difference this case falls under, if any, with the
/// outcomes adjusted to compare the rest: `http09` (a request line
/// without a version: nginx answers HTTP/0.9, without a status line; the
/// router refuses it) excuses the whole case; `absolute_form_host` (an
/// absolute-form target: the router's `Host` is its authority, as RFC
/// 9112 section 3.2.2 asks of a proxy; nginx's `$http_host` is the
/// client's field) leaves `Host` out of the comparison; `head_over_limit`
/// (a head over the router's `max_header_bytes` is 431, where nginx,
/// whose limits are per line, answers 400 for its own 494) counts the
/// router's last 431 as nginx's 400.
fn excuse(req: &Req, n: &mut Outcome, r: &mut Outcome) -> Option<&'static str> {
    if req.version.is_empty() {
        return Some("http09");
    }
    if r.statuses.last() == Some(&431) && n.statuses.last() == Some(&400) {
        *r.statuses.last_mut().unwrap() = 400;
        return Some("head_over_limit");
    }
    let t = req.target.to_ascii_lowercase();
    if t.starts_with(b"http://") || t.starts_with(b"https://") {
        for s in n.forwarded.iter_mut().chain(r.forwarded.iter_mut()) {
            s.set.remove("host");
        }
        return Some("absolute_form_host");
    }
    None
}

/// Runs `cases` cases of run `seed`; the differences not excused.
fn differential(p: &Pair, seed: u64, cases: u64) -> Vec<String> {
    let mut failures = Vec::new();
    let mut tally: BTreeMap<&str, u64> = BTreeMap::new();
    let from = std::env::var("KETAMA_DIFF_FROM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    for i in from..cases {
        let req = case(seed, i);
        let bytes = req.bytes();
        let (mut n, mut r) = std::thread::scope(|s| {
            let n = s.spawn(|| run(&p.nginx_side, &bytes, req.filler()));
            let r = run(&p.router_side, &bytes, req.filler());
            (n.join().unwrap(), r)
        });
        if std::env::var("KETAMA_DIFF_SHOW").is_ok() {
            eprintln!(
                "case {i}: {}\n  nginx {:?} {} fwd, router {:?} {} fwd",
                bytes.escape_ascii(),
                n.statuses,
                n.forwarded.len(),
                r.statuses,
                r.forwarded.len()
            );
        }
        let excused = excuse(&req, &mut n, &mut r);
        let d = differences(&n, &r);
        // Tallied: whether the case itself reached the origin (before the
        // canary and the last request), and under which excuse.
        let kind = match (excused, d.is_empty()) {
            (Some("http09"), _) => "excused http09",
            (_, false) => "different",
            _ if n
                .forwarded
                .first()
                .is_some_and(|s| !s.line.contains(" /canary ")) =>
            {
                "forwarded"
            }
            _ => "refused",
        };
        *tally.entry(kind).or_default() += 1;
        if let Some(name) = excused.filter(|&e| e != "http09" && d.is_empty()) {
            *tally.entry(name).or_default() += 1;
        }
        if d.is_empty() && n.chunked != r.chunked {
            *tally.entry("chunked_framing").or_default() += 1;
        }
        if kind == "different" {
            failures.push(format!(
                "seed {seed} case {i} {d:?}: {}\n  statuses nginx {:?}, router {:?}\n{}",
                bytes.escape_ascii(),
                n.statuses,
                r.statuses,
                show_forwarded(&n, &r)
            ));
        }
    }
    eprintln!("seed {seed}: {cases} cases: {tally:?}");
    failures
}

#[test]
fn the_origin_is_handed_what_nginx_hands_it() {
    let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
    let runs: Vec<(u64, u64)> = match (env("KETAMA_DIFF_SEED"), env("KETAMA_DIFF_CASES")) {
        (Some(seed), cases) => vec![(seed, cases.unwrap_or(1000))],
        (None, Some(cases)) => vec![(1, cases)],
        (None, None) => vec![(1, 1000), (2, 1000)],
    };
    let p = pair_with("", "");
    let mut failures = Vec::new();
    for (seed, cases) in runs {
        failures.extend(differential(&p, seed, cases));
    }
    let shown: Vec<&String> = failures.iter().take(8).collect();
    assert!(
        failures.is_empty(),
        "{} cases differ from nginx; the first:\n{}",
        failures.len(),
        shown
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Every difference excused here is listed, by its name, in the router
/// guide's "Differences from nginx".
#[test]
fn the_excused_differences_are_documented() {
    common::differential::assert_documented(EXCUSED);
}
