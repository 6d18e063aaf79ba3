//! Backends from DNS, the pure part: what each answer means as backends,
//! what string each backend hashes as, when a change is held back, how
//! often to ask again. The router does the asking (see its `discovery`
//! module); everything here is testable without a network.
//!
//! # Identity: what a discovered backend hashes as
//!
//! A key stays where it is as long as its backend's string on the ring
//! stays the same, so the string is chosen to change only when something
//! real changed:
//!
//! | source | scheme | hashes as | an address change |
//! |---|---|---|---|
//! | SRV | nginx (every ring of the config) | `target:port` (lowercase, no final dot), as nginx hashes a `server` name | moves no key |
//! | SRV | a pingora scheme on any ring | each address, `IP:PORT` (pingora hashes socket addresses) | moves that backend's keys |
//! | A/AAAA (`name`) | any | each address, `IP:PORT` | moves that backend's keys (it is a new backend) |
//!
//! With the nginx scheme, an SRV target with several addresses is one
//! backend that connects to the lowest of them; with a pingora scheme each
//! address is a backend of its own (the target's weight each). A
//! discovered backend whose address is also a static `[[backends]]` entry
//! is that one backend: the static entry's weight and labels win. The
//! backends of all sources are sorted by their string and repeated ones
//! dropped, so the order or repetition of DNS answers never changes the
//! ring.
//!
//! # SRV records
//!
//! The records with the lowest priority value present are the serving
//! set (RFC 2782); the others wait for it to disappear. With
//! `weight = "srv"` a record's weight is the backend's ketama weight, 0
//! being drained (known, no points) unless every serving record has weight
//! 0, which RFC 2782 reads as "no preference": then they all weigh 1.
//! `weight = "equal"` (the default) gives every backend weight 1, because
//! some publishers rescale every weight when one member joins (CoreDNS
//! gives each of n pods floor(100 / n)), which would move keys everywhere.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

/// What a source asks DNS for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Query {
    /// SRV records of this name.
    Srv(String),
    /// A and AAAA records of this name, each address with this port.
    Host {
        /// The name.
        name: String,
        /// The backends' port.
        port: u16,
    },
}

impl std::fmt::Display for Query {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Query::Srv(n) => write!(f, "srv {n}"),
            Query::Host { name, port } => write!(f, "name {name} port {port}"),
        }
    }
}

/// How a source weighs its backends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WeightMode {
    /// Every backend weight 1 (SRV default).
    Equal,
    /// The SRV record's weight.
    Srv,
    /// This weight for every backend (A/AAAA; default 1).
    Fixed(u32),
}

/// A validated `[[discovery]]` source.
#[derive(Clone, Debug, PartialEq)]
pub struct DiscoverySource {
    /// Its position in `[[discovery]]`.
    pub index: usize,
    /// What it asks for.
    pub query: Query,
    /// How its backends are weighed.
    pub weight: WeightMode,
    /// Labels every backend of the source carries.
    pub labels: Vec<String>,
    /// Name servers; empty: the system's.
    pub resolvers: Vec<SocketAddr>,
    /// Bounds around the answer's TTL.
    pub min_interval: Duration,
    /// See `min_interval`.
    pub max_interval: Duration,
    /// How long one resolution may take.
    pub timeout: Duration,
    /// The flap guard's threshold (share of the source's weight).
    pub max_remove_share: f64,
    /// The flap guard's confirmations.
    pub confirm: u32,
    /// Whether a start waits for it.
    pub wait: bool,
    /// Its backends are reached over TLS: with this SNI, else the SRV
    /// target (or the A/AAAA name).
    pub tls: Option<Option<String>>,
    /// Its backends are spoken to in HTTP/2 with prior knowledge.
    pub h2c: bool,
}

impl DiscoverySource {
    /// A name for logs, `/status` and metric labels: its query.
    pub fn id(&self) -> String {
        self.query.to_string()
    }

    /// How long until the next resolution after an answer with this TTL:
    /// the TTL, within the source's bounds.
    pub fn interval(&self, ttl: Duration) -> Duration {
        ttl.clamp(self.min_interval, self.max_interval)
    }
}

/// One SRV record (or, for an A/AAAA source, the name with its port and
/// priority and weight 0), with the addresses its target resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The target name.
    pub target: String,
    /// The port.
    pub port: u16,
    /// SRV priority (lowest serves).
    pub priority: u16,
    /// SRV weight.
    pub weight: u16,
    /// The target's addresses.
    pub addrs: Vec<IpAddr>,
}

/// A backend found in DNS.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Discovered {
    /// The string it hashes as on the ring (see the module docs).
    pub server: String,
    /// Where to connect.
    pub addr: SocketAddr,
    /// Its ketama weight.
    pub weight: u32,
    /// Its labels (the source's).
    pub labels: Vec<String>,
    /// The source (its `[[discovery]]` index).
    pub source: usize,
    /// Reached over TLS with this SNI (`None`: plain).
    pub tls: Option<String>,
    /// Spoken to in HTTP/2 with prior knowledge (the source's `h2c`).
    pub h2c: bool,
}

/// The name as hashed: lowercase, without the final dot.
fn clean(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// The backends an answer makes, sorted by their string, repeats dropped.
/// `nginx_identity`: whether every ring of the config uses the nginx
/// scheme (then SRV targets hash as `target:port`).
pub fn backends_of(
    source: &DiscoverySource,
    records: &[Record],
    nginx_identity: bool,
) -> Vec<Discovered> {
    let serving = records.iter().map(|r| r.priority).min();
    let serving: Vec<&Record> = records
        .iter()
        .filter(|r| Some(r.priority) == serving && !r.addrs.is_empty())
        .collect();
    let all_zero = serving.iter().all(|r| r.weight == 0);
    let weight_of = |r: &Record| match source.weight {
        WeightMode::Equal => 1,
        WeightMode::Fixed(w) => w,
        WeightMode::Srv if all_zero => 1,
        WeightMode::Srv => r.weight as u32,
    };
    let mut out = Vec::new();
    for r in serving {
        let mut addrs = r.addrs.clone();
        addrs.sort();
        addrs.dedup();
        let make = |server: String, ip: IpAddr| Discovered {
            server,
            addr: SocketAddr::new(ip, r.port),
            weight: weight_of(r),
            labels: source.labels.clone(),
            source: source.index,
            tls: source
                .tls
                .as_ref()
                .map(|sni| sni.clone().unwrap_or_else(|| clean(&r.target))),
            h2c: source.h2c,
        };
        match (&source.query, nginx_identity) {
            (Query::Srv(_), true) => {
                out.push(make(format!("{}:{}", clean(&r.target), r.port), addrs[0]))
            }
            _ => out.extend(
                addrs
                    .iter()
                    .map(|&ip| make(SocketAddr::new(ip, r.port).to_string(), ip)),
            ),
        }
    }
    out.sort();
    out.dedup_by(|b, a| a.server == b.server);
    out
}

/// What the flap guard makes of a resolution.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Apply it (nothing removed, or little, or confirmed).
    Apply,
    /// Hold it: it would remove much; seen this many times in a row.
    Hold {
        /// Times seen in a row, this one included.
        seen: u32,
        /// Times needed.
        confirm: u32,
        /// The share of the source's weight it would remove.
        removed_share: f64,
    },
}

/// A source's flap guard: a resolution that would remove more than
/// `max_remove_share` of the source's current weight is held until the
/// same answer has been seen `confirm` times in a row.
#[derive(Clone, Debug, Default)]
pub struct FlapGuard {
    held: Option<(Vec<Discovered>, u32)>,
}

impl FlapGuard {
    /// Judges `new` against the source's `current` backends.
    pub fn judge(
        &mut self,
        source: &DiscoverySource,
        current: &[Discovered],
        new: &[Discovered],
    ) -> Verdict {
        let total: u64 = current.iter().map(|b| b.weight as u64).sum();
        let kept: HashMap<&str, ()> = new.iter().map(|b| (b.server.as_str(), ())).collect();
        let removed: u64 = current
            .iter()
            .filter(|b| !kept.contains_key(b.server.as_str()))
            .map(|b| b.weight as u64)
            .sum();
        let share = if total == 0 {
            0.0
        } else {
            removed as f64 / total as f64
        };
        if share <= source.max_remove_share {
            self.held = None;
            return Verdict::Apply;
        }
        let seen = match &self.held {
            Some((h, n)) if h == new => n + 1,
            _ => 1,
        };
        if seen >= source.confirm {
            self.held = None;
            return Verdict::Apply;
        }
        self.held = Some((new.to_vec(), seen));
        Verdict::Hold {
            seen,
            confirm: source.confirm,
            removed_share: share,
        }
    }

    /// Forgets a held resolution (the source failed or answered as before).
    pub fn reset(&mut self) {
        self.held = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source(query: Query, weight: WeightMode) -> DiscoverySource {
        DiscoverySource {
            index: 0,
            query,
            weight,
            labels: vec!["eu".into()],
            resolvers: vec![],
            min_interval: Duration::from_secs(1),
            max_interval: Duration::from_secs(60),
            timeout: Duration::from_secs(2),
            max_remove_share: 0.5,
            confirm: 3,
            wait: false,
            tls: None,
            h2c: false,
        }
    }

    #[test]
    fn tls_sources_send_the_target_as_sni_unless_told() {
        let mut src = source(Query::Srv("_c._tcp.x.".into()), WeightMode::Equal);
        let recs = [rec("Cache-1.X.", 443, 1, 1, &["10.0.0.1"])];
        assert_eq!(backends_of(&src, &recs, true)[0].tls, None);
        src.tls = Some(None);
        assert_eq!(
            backends_of(&src, &recs, true)[0].tls.as_deref(),
            Some("cache-1.x")
        );
        assert_eq!(
            backends_of(&src, &recs, false)[0].tls.as_deref(),
            Some("cache-1.x")
        );
        src.tls = Some(Some("origin.example".into()));
        assert_eq!(
            backends_of(&src, &recs, true)[0].tls.as_deref(),
            Some("origin.example")
        );
    }

    fn rec(target: &str, port: u16, priority: u16, weight: u16, addrs: &[&str]) -> Record {
        Record {
            target: target.into(),
            port,
            priority,
            weight,
            addrs: addrs.iter().map(|a| a.parse().unwrap()).collect(),
        }
    }

    #[test]
    fn srv_identity_and_serving_set() {
        let s = source(Query::Srv("_c._tcp.x".into()), WeightMode::Srv);
        let records = [
            rec("B.node.", 8080, 1, 20, &["10.0.0.2", "10.0.0.9"]),
            rec("a.node.", 8080, 1, 10, &["10.0.0.1"]),
            rec("standby.node.", 8080, 5, 10, &["10.0.0.3"]),
            rec("a.node.", 8080, 1, 10, &["10.0.0.1"]), // repeated
        ];
        let nginx = backends_of(&s, &records, true);
        let got: Vec<(&str, String, u32)> = nginx
            .iter()
            .map(|b| (b.server.as_str(), b.addr.to_string(), b.weight))
            .collect();
        assert_eq!(
            got,
            [
                ("a.node:8080", "10.0.0.1:8080".into(), 10),
                ("b.node:8080", "10.0.0.2:8080".into(), 20)
            ]
        );
        let pingora = backends_of(&s, &records, false);
        let servers: Vec<&str> = pingora.iter().map(|b| b.server.as_str()).collect();
        assert_eq!(servers, ["10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.9:8080"]);
        // Reordered answers give the same backends.
        let mut rev = records.to_vec();
        rev.reverse();
        assert_eq!(backends_of(&s, &rev, true), nginx);
        // All serving weights 0: equal.
        let zero = [
            rec("a.", 1, 0, 0, &["10.0.0.1"]),
            rec("b.", 1, 0, 0, &["10.0.0.2"]),
        ];
        assert!(backends_of(&s, &zero, true).iter().all(|b| b.weight == 1));
        let some_zero = [
            rec("a.", 1, 0, 0, &["10.0.0.1"]),
            rec("b.", 1, 0, 5, &["10.0.0.2"]),
        ];
        let w: Vec<u32> = backends_of(&s, &some_zero, true)
            .iter()
            .map(|b| b.weight)
            .collect();
        assert_eq!(w, [0, 5]);
        let eq = source(Query::Srv("_c._tcp.x".into()), WeightMode::Equal);
        assert!(backends_of(&eq, &records, true)
            .iter()
            .all(|b| b.weight == 1));
    }

    #[test]
    fn host_sources_hash_addresses() {
        let s = source(
            Query::Host {
                name: "c.internal".into(),
                port: 81,
            },
            WeightMode::Fixed(3),
        );
        let b = backends_of(
            &s,
            &[rec("c.internal", 81, 0, 0, &["::1", "10.0.0.4"])],
            true,
        );
        let got: Vec<(&str, u32)> = b.iter().map(|b| (b.server.as_str(), b.weight)).collect();
        assert_eq!(got, [("10.0.0.4:81", 3), ("[::1]:81", 3)]);
    }

    #[test]
    fn the_flap_guard_holds_mass_removals_until_confirmed() {
        let s = source(Query::Srv("_c._tcp.x".into()), WeightMode::Equal);
        let all: Vec<Record> = (0..10)
            .map(|i| rec(&format!("n{i}."), 80, 0, 1, &[&format!("10.0.0.{i}")]))
            .collect();
        let current = backends_of(&s, &all, true);
        let few = backends_of(&s, &all[..3], true);
        let mut g = FlapGuard::default();
        // Removing 2 of 10: applied at once.
        assert_eq!(
            g.judge(&s, &current, &backends_of(&s, &all[..8], true)),
            Verdict::Apply
        );
        // Removing 7 of 10: held twice, applied the third time.
        for seen in 1..=2 {
            assert_eq!(
                g.judge(&s, &current, &few),
                Verdict::Hold {
                    seen,
                    confirm: 3,
                    removed_share: 0.7
                }
            );
        }
        assert_eq!(g.judge(&s, &current, &few), Verdict::Apply);
        // A different answer in between starts the count over.
        let mut g = FlapGuard::default();
        assert!(matches!(
            g.judge(&s, &current, &few),
            Verdict::Hold { seen: 1, .. }
        ));
        assert!(matches!(
            g.judge(&s, &current, &backends_of(&s, &all[..2], true)),
            Verdict::Hold { seen: 1, .. }
        ));
    }

    #[test]
    fn intervals_follow_the_ttl_within_bounds() {
        let s = source(Query::Srv("x".into()), WeightMode::Equal);
        assert_eq!(s.interval(Duration::ZERO), Duration::from_secs(1));
        assert_eq!(s.interval(Duration::from_secs(30)), Duration::from_secs(30));
        assert_eq!(
            s.interval(Duration::from_secs(3600)),
            Duration::from_secs(60)
        );
    }
}
