//! The soak's judge: each answer a client saw against the scheduler's own
//! log of which backend was down, stalled or lying when, and of which
//! configuration was in force. A failure is expected only where the log
//! explains it:
//!
//! | client saw | named backend's fault overlapping the request |
//! |---|---|
//! | 504 | stall (the request was sent, then no answer: not retried) |
//! | 502 | stall, garbage or reset; down only if it went down during the request |
//! | a 200 cut short | reset; down only if it went down during the request |
//! | 502 "no healthy backend left" | any fault; and at least `retries` + 1 origins faulty within `OUT_OF_ROTATION_MS` before it |
//!
//! The last row is the router doing what nginx does when every peer is
//! marked failed: a backend stays out of rotation after its fault ends
//! (passive health for `fail_timeout_ms`, the checker until its next check
//! passes), so a key whose other candidates failed a moment ago has none
//! left. The judge does not compute each key's candidates; it asks that
//! enough origins had a fault that recently for the key to have run out.
//!
//! Anything else (a failure with no such fault, a transport error from
//! the router, a wrong body, a backend that neither a configuration nor
//! the DNS records in force during the request named) is unexpected.

use std::collections::BTreeMap;
use std::time::Instant;

use crate::client::{Outcome, Record};
use crate::common::chaos::Mode;

/// One fault the scheduler injected.
#[derive(Clone, Debug)]
pub struct Fault {
    /// What it was: an origin mode, or "etcd member" / "etcd leader".
    pub kind: String,
    /// The origin's port (0 for etcd faults).
    pub port: u16,
    /// The origin's mode during it.
    pub mode: Option<Mode>,
    /// When it began and ended.
    pub start: Instant,
    /// When it ended.
    pub end: Instant,
}

/// A configuration's backends and when it was in force: from its write
/// until every router showed the next one.
#[derive(Clone, Debug)]
pub struct ConfigWindow {
    /// Its backends' ports.
    pub ports: Vec<u16>,
    /// When it was written.
    pub written: Instant,
    /// When the next one was visible on every router (`None`: last).
    pub replaced: Option<Instant>,
}

/// What the judge found.
#[derive(Default, Debug)]
pub struct Verdict {
    /// Requests judged.
    pub requests: usize,
    /// Failures the fault log explains, by what the client saw.
    pub expected: BTreeMap<String, usize>,
    /// Failures it does not, by what the client saw.
    pub unexpected: BTreeMap<String, usize>,
    /// Up to ten unexpected records, for the report.
    pub examples: Vec<String>,
    /// Latencies (ms) of requests overlapping an origin fault, and not.
    pub inside_ms: Vec<f64>,
    /// Latencies (ms) of requests overlapping no origin fault.
    pub outside_ms: Vec<f64>,
}

impl Verdict {
    /// How many unexpected failures there were.
    pub fn unexpected_total(&self) -> usize {
        self.unexpected.values().sum()
    }
}

fn overlaps(f: &Fault, r: &Record) -> bool {
    f.start <= r.end && f.end >= r.start
}

/// How long after its fault a backend may still be out of rotation:
/// `fail_timeout_ms` (2000) plus a health check's interval and timeout
/// (500 + 300), as the soak configures them.
pub const OUT_OF_ROTATION_MS: u64 = 2800;
/// Candidates a request has: `retries` (2) + 1.
pub const CANDIDATES: usize = 3;

fn went_down_during(f: &Fault, r: &Record) -> bool {
    f.mode == Some(Mode::Down) && f.start >= r.start && f.start <= r.end
}

/// Whether the fault log explains this failed record.
fn explained(r: &Record, faults: &[Fault]) -> bool {
    let Some(port) = r.backend else {
        return false;
    };
    if r.outcome == Outcome::Exhausted {
        let since = r
            .start
            .checked_sub(std::time::Duration::from_millis(OUT_OF_ROTATION_MS))
            .unwrap_or(r.start);
        let recent: std::collections::BTreeSet<u16> = faults
            .iter()
            .filter(|f| f.mode.is_some() && f.start <= r.end && f.end >= since)
            .map(|f| f.port)
            .collect();
        return recent.contains(&port) && recent.len() >= CANDIDATES;
    }
    faults
        .iter()
        .filter(|f| f.port == port && overlaps(f, r))
        .any(|f| match (&r.outcome, f.mode) {
            (Outcome::Status(504), Some(Mode::Stall)) => true,
            (Outcome::Status(502), Some(Mode::Stall | Mode::Garbage | Mode::Reset)) => true,
            (Outcome::Truncated, Some(Mode::Reset)) => true,
            (Outcome::Status(502) | Outcome::Truncated, Some(Mode::Down)) => went_down_during(f, r),
            _ => false,
        })
}

/// Whether the backend that answered was in a configuration in force at
/// some moment of the request.
fn in_config(port: u16, r: &Record, configs: &[ConfigWindow]) -> bool {
    configs
        .iter()
        .filter(|c| c.written <= r.end && c.replaced.is_none_or(|t| t >= r.start))
        .any(|c| c.ports.contains(&port))
}

fn label(o: &Outcome) -> String {
    match o {
        Outcome::Ok => "ok".into(),
        Outcome::Status(s) => s.to_string(),
        Outcome::Exhausted => "502 no healthy backend left".into(),
        Outcome::Truncated => "truncated 200".into(),
        Outcome::WrongBody => "wrong body".into(),
        Outcome::Transport(_) => "no answer".into(),
    }
}

/// Judges every record: a backend may answer while the configuration or
/// the DNS records (`dns`, windows of the same shape) named it.
pub fn judge(
    records: &[Record],
    faults: &[Fault],
    configs: &[ConfigWindow],
    dns: &[ConfigWindow],
) -> Verdict {
    let mut v = Verdict {
        requests: records.len(),
        ..Verdict::default()
    };
    let origin_faults: Vec<&Fault> = faults.iter().filter(|f| f.mode.is_some()).collect();
    for r in records {
        let ms = (r.end - r.start).as_secs_f64() * 1e3;
        if origin_faults.iter().any(|f| overlaps(f, r)) {
            v.inside_ms.push(ms);
        } else {
            v.outside_ms.push(ms);
        }
        let what = match (&r.outcome, r.backend) {
            (Outcome::Ok, Some(p)) if in_config(p, r, configs) || in_config(p, r, dns) => continue,
            (Outcome::Ok, _) => Some("outside the configuration".to_string()),
            (_, _) if explained(r, faults) => None,
            (o, _) => Some(label(o)),
        };
        match what {
            None => *v.expected.entry(label(&r.outcome)).or_default() += 1,
            Some(w) => {
                if v.examples.len() < 10 {
                    let near: Vec<String> = faults
                        .iter()
                        .filter(|f| overlaps(f, r))
                        .map(|f| format!("{} {}", f.kind, f.port))
                        .collect();
                    let t0 = configs[0].written;
                    let at = |t: Instant| (t - t0).as_millis();
                    // Only the configurations in force near the request:
                    // a half-hour soak writes hundreds.
                    let near_r = Record {
                        start: r.start - std::time::Duration::from_secs(5).min(r.start - t0),
                        end: r.end + std::time::Duration::from_secs(5),
                        ..r.clone()
                    };
                    let windows: Vec<String> = configs
                        .iter()
                        .filter(|c| {
                            c.written <= near_r.end && c.replaced.is_none_or(|t| t >= near_r.start)
                        })
                        .map(|c| {
                            format!("{:?} {}..{:?}", c.ports, at(c.written), c.replaced.map(at))
                        })
                        .collect();
                    v.examples.push(format!(
                        "{w}: router {} {} backend {:?} {:?} at {} ms for {ms:.0} ms; faults overlapping: {near:?}; configs: {windows:?}",
                        r.router, r.target, r.backend, r.outcome, at(r.start)
                    ));
                }
                *v.unexpected.entry(w).or_default() += 1;
            }
        }
    }
    v
}

/// The `q` quantile of `xs` (0 when empty).
pub fn quantile(xs: &mut [f64], q: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[((xs.len() - 1) as f64 * q).round() as usize]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rec(backend: u16, outcome: Outcome, at_ms: u64, took_ms: u64, t0: Instant) -> Record {
        Record {
            router: 0,
            target: "/x".into(),
            start: t0 + Duration::from_millis(at_ms),
            end: t0 + Duration::from_millis(at_ms + took_ms),
            backend: Some(backend),
            outcome,
        }
    }

    fn fault(port: u16, mode: Mode, from_ms: u64, to_ms: u64, t0: Instant) -> Fault {
        Fault {
            kind: mode.name().into(),
            port,
            mode: Some(mode),
            start: t0 + Duration::from_millis(from_ms),
            end: t0 + Duration::from_millis(to_ms),
        }
    }

    #[test]
    fn failures_are_excused_only_by_a_matching_fault_of_their_backend() {
        let t0 = Instant::now();
        let configs = [ConfigWindow {
            ports: vec![1, 2],
            written: t0,
            replaced: None,
        }];
        let faults = [
            fault(1, Mode::Stall, 100, 200, t0),
            fault(2, Mode::Down, 500, 900, t0),
        ];
        let records = [
            rec(1, Outcome::Status(504), 150, 800, t0), // stall: excused
            rec(2, Outcome::Status(504), 150, 800, t0), // 2 was not stalled
            rec(1, Outcome::Truncated, 150, 10, t0),    // a stall does not cut bodies
            rec(2, Outcome::Status(502), 490, 20, t0),  // went down during it
            rec(2, Outcome::Status(502), 600, 20, t0),  // down before: should have failed over
            rec(1, Outcome::Status(504), 300, 10, t0),  // after the stall ended
            rec(3, Outcome::Ok, 300, 10, t0),           // not in the config
            rec(2, Outcome::Ok, 300, 10, t0),
        ];
        let v = judge(&records, &faults, &configs, &[]);
        assert_eq!(v.expected.values().sum::<usize>(), 2, "{v:?}");
        assert_eq!(v.unexpected_total(), 5, "{v:?}");
        assert_eq!(v.unexpected["outside the configuration"], 1);
    }

    #[test]
    fn no_backend_left_is_excused_only_after_enough_recent_faults() {
        let t0 = Instant::now() + Duration::from_secs(10);
        let configs = [ConfigWindow {
            ports: vec![1, 2, 3, 4],
            written: t0,
            replaced: None,
        }];
        let faults = [
            fault(1, Mode::Garbage, 1000, 1100, t0),
            fault(2, Mode::Down, 2000, 4000, t0),
            fault(3, Mode::Reset, 1500, 1600, t0),
        ];
        let records = [
            rec(2, Outcome::Exhausted, 3000, 2, t0), // 1, 2, 3 faulty lately: excused
            rec(4, Outcome::Exhausted, 3000, 2, t0), // 4 itself never failed
            rec(2, Outcome::Exhausted, 4350, 2, t0), // 1 and 3 are long back in rotation
        ];
        let v = judge(&records, &faults, &configs, &[]);
        assert_eq!(v.expected.values().sum::<usize>(), 1, "{v:?}");
        assert_eq!(v.unexpected_total(), 2, "{v:?}");
    }

    #[test]
    fn a_backend_is_allowed_while_its_config_was_in_force() {
        let t0 = Instant::now();
        let ms = |m| t0 + Duration::from_millis(m);
        let configs = [
            ConfigWindow {
                ports: vec![1],
                written: ms(0),
                replaced: Some(ms(100)),
            },
            ConfigWindow {
                ports: vec![2],
                written: ms(90),
                replaced: None,
            },
        ];
        let ok = |b, at| rec(b, Outcome::Ok, at, 5, t0);
        let answers = [
            ok(1, 50),
            ok(2, 92),
            ok(1, 95),
            ok(1, 200),
            ok(2, 200),
            ok(3, 200),
        ];
        let v = judge(&answers, &[], &configs, &[]);
        assert_eq!(v.unexpected_total(), 2, "{v:?}");
        // A backend DNS named from 150 ms is allowed from then on.
        let dns = [ConfigWindow {
            ports: vec![3],
            written: ms(150),
            replaced: None,
        }];
        let v = judge(&answers, &[], &configs, &dns);
        assert_eq!(v.unexpected_total(), 1, "{v:?}");
    }
}
