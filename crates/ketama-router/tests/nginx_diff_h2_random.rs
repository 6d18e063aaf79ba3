//! The random HTTP/2 differential against nginx 1.22 (`listen ... http2`,
//! h2c): seeded frame sequences ([`common::h2gen`]: header blocks split
//! into CONTINUATIONs, DATA of every size with END_STREAM anywhere,
//! trailers, client resets, control frames between them, several streams
//! at once) sent as raw bytes to the router and to nginx, each in front
//! of its own recording origin. Each case is followed by a canary stream
//! on its connection and a canary connection. Checked on every case:
//!
//! - the router's origin is handed what nginx's is, for every stream the
//!   client did not reset, and the client reads the same answer (a
//!   status, or a refusal on both sides);
//! - the router never hands its origin anything a case did not send (a
//!   stray last-chunk read as a request, a body other than the DATA), and
//!   never a stream the client reset before it was forwarded;
//! - both canaries are answered, unless the router ended the connection
//!   for a reason docs/router.md lists.
//!
//! Differences kept on purpose are excused by the names docs/router.md
//! gives them ("Differences from nginx"). `KETAMA_H2_DIFF_CASES` and
//! `KETAMA_H2_DIFF_SEED` choose a longer run (`scripts/differential.sh`);
//! by default 2,000 cases of two fixed seeds.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use common::differential::{pair_on, Pair, Seen, Side};
use common::h2gen::{case, Case, Ending, Length, Odd, Stream};
use common::h2raw::{self, ConnRead, Reader};

/// Differences kept on purpose, by the name docs/router.md gives them.
const EXCUSED: &[&str] = &["h2_request_trailers", "h2_field_bytes", "h2_malformed"];

const WAIT: Duration = Duration::from_secs(10);

/// What one side did with a case.
#[derive(Debug, Default)]
struct Side2 {
    read: ConnRead,
    /// The canary stream on the case's connection was answered.
    canary_stream: bool,
    /// The canary connection was answered.
    canary_conn: bool,
    /// Whole requests the origin was handed, by path.
    forwarded: BTreeMap<String, Seen>,
    /// Requests the origin was handed that no case stream sent.
    strays: Vec<String>,
}

fn path_of(line: &str) -> String {
    line.split(' ').nth(1).unwrap_or("").to_string()
}

fn run(side: &Side, c: &Case) -> Side2 {
    let mut conn = h2raw::connect(side.addr);
    let canary = c.streams.last().map_or(1, |s| s.id + 2);
    let mut bytes = c.bytes.clone();
    bytes.extend(h2raw::headers(
        canary,
        &h2raw::request("GET", "/canary", &[]),
        true,
    ));
    // A proxy that ends the connection early leaves part unwritten.
    let _ = conn.write_all(&bytes);
    let mut rd = Reader::default();
    let ids: Vec<u32> = c
        .streams
        .iter()
        .filter(|s| !s.reset())
        .map(|s| s.id)
        .collect();
    rd.until(&mut conn, WAIT, |r| {
        r.goaway.is_some() || (r.stream(canary).done() && ids.iter().all(|id| r.stream(*id).done()))
    });
    let canary_stream = rd.read.stream(canary).status == Some(200);
    let fresh = h2raw::exchange(
        side.addr,
        &h2raw::headers(1, &h2raw::request("GET", "/canary2", &[]), true),
        &[1],
        WAIT,
    );
    let canary_conn = fresh.stream(1).status == Some(200);
    drop(conn);
    // Both canaries' requests, and whatever the case's streams forwarded
    // before them (each answered stream's request arrived before its
    // answer; a refused one's never comes whole).
    let wanted = usize::from(canary_stream) + usize::from(canary_conn);
    let recorded = side
        .origin
        .take_at_least(wanted + answered(&rd.read, c), WAIT);
    let mut out = Side2 {
        read: rd.read,
        canary_stream,
        canary_conn,
        ..Side2::default()
    };
    for r in recorded.into_iter().filter(|r| r.complete) {
        let seen = Seen::from(r);
        let path = path_of(&seen.line);
        if path.starts_with("/canary") {
            continue;
        }
        if !c.streams.iter().any(|s| s.path == path) || out.forwarded.contains_key(&path) {
            out.strays.push(seen.to_string());
        }
        out.forwarded.insert(path, seen);
    }
    out
}

/// Streams of the case answered with a status (their requests reached
/// the origin first).
fn answered(r: &ConnRead, c: &Case) -> usize {
    c.streams
        .iter()
        .filter(|s| r.stream(s.id).status == Some(200))
        .count()
}

fn refused(r: &ConnRead, id: u32) -> bool {
    let s = r.stream(id);
    s.reset.is_some()
        || s.status.is_some_and(|st| st >= 400)
        || (r.goaway.is_some() && s.status.is_none())
}

/// The excuse a stream falls under, if any.
fn excuse(s: &Stream) -> Option<&'static str> {
    match s.odd {
        // The h2 crate ends the connection on a field its HPACK decoder
        // refuses; nginx forwards a control byte in a value and resets
        // the stream of an upper-case name.
        Odd::ValueByte => return Some("h2_field_bytes"),
        Odd::UpperName => return Some("h2_malformed"),
        Odd::None => {}
    }
    // nginx 1.22 refuses request trailers (a connection error); the
    // router passes them on.
    (s.ending == Ending::Trailers).then_some("h2_request_trailers")
}

/// Checks one case; the differences found, and the excuse used if any.
/// An excused stream is not compared; the case's other streams are,
/// unless one side ended the connection over the excused one (then
/// nothing after it on that connection can be compared).
fn compare(c: &Case, n: &Side2, r: &Side2) -> (Vec<String>, Option<&'static str>) {
    let mut d = Vec::new();
    let reason = c.streams.iter().find_map(excuse);
    let ended = n.read.goaway.is_some_and(|g| g.1 != 0) || r.read.goaway.is_some_and(|g| g.1 != 0);
    let excused = reason.filter(|_| ended);
    if !r.strays.is_empty() {
        d.push(format!(
            "the router's origin got requests no stream sent: {:?}",
            r.strays
        ));
    }
    for s in &c.streams {
        let fwd = r.forwarded.get(&s.path);
        if let Some(f) = fwd {
            if f.body != s.body.escape_ascii().to_string() {
                d.push(format!("stream {}: the origin got body {:?}", s.id, f.body));
            }
            if s.length == Length::Wrong {
                d.push(format!(
                    "stream {}: forwarded with a wrong content-length",
                    s.id
                ));
            }
        }
        if s.reset() {
            // Forwarded only if nginx forwarded it too (a reset that came
            // after the request was whole may race on either side).
            if fwd.is_some() && !n.forwarded.contains_key(&s.path) {
                d.push(format!(
                    "stream {}: reset by the client, forwarded by the router alone",
                    s.id
                ));
            }
            continue;
        }
        if excused.is_some() || excuse(s).is_some() {
            continue;
        }
        if fwd != n.forwarded.get(&s.path) {
            d.push(format!(
                "stream {}: forwarded\n    nginx:  {:?}\n    router: {:?}",
                s.id,
                n.forwarded.get(&s.path).map(ToString::to_string),
                fwd.map(ToString::to_string)
            ));
        }
        let (ns, rs) = (n.read.stream(s.id), r.read.stream(s.id));
        let same = ns.status.is_some() && ns.status == rs.status
            || refused(&n.read, s.id) && refused(&r.read, s.id);
        if !same {
            d.push(format!("stream {}: nginx read {ns:?}, router {rs:?}", s.id));
        }
    }
    if !r.canary_conn {
        d.push("the canary connection was not answered by the router".into());
    }
    if excused.is_none() && n.canary_stream && !r.canary_stream {
        d.push(format!(
            "the canary stream was answered by nginx, not the router ({:?})",
            r.read.goaway
        ));
    }
    (d, excused)
}

fn differential(p: &Pair, seed: u64, cases: u64) -> Vec<String> {
    let mut failures = Vec::new();
    let mut tally: BTreeMap<String, u64> = BTreeMap::new();
    for i in 0..cases {
        let c = case(seed, i);
        let (n, r) = std::thread::scope(|s| {
            let n = s.spawn(|| run(&p.nginx_side, &c));
            (n.join().unwrap(), run(&p.router_side, &c))
        });
        let (d, excused) = compare(&c, &n, &r);
        let verdict = match excused {
            Some(e) => format!("cases ending a connection over {e}"),
            None if d.is_empty() => "cases compared whole, the same".into(),
            None => "cases differing".into(),
        };
        *tally.entry(verdict).or_default() += 1;
        for (who, side) in [("nginx", &n), ("router", &r)] {
            if side.read.goaway.is_some_and(|g| g.1 != 0) {
                *tally
                    .entry(format!("{who}: GOAWAY with an error"))
                    .or_default() += 1;
            }
        }
        for s in &c.streams {
            let key = match excuse(s) {
                Some(e) => format!("streams excused: {e}"),
                None if s.reset() => "streams reset by the client".into(),
                None => "streams compared".into(),
            };
            *tally.entry(key).or_default() += 1;
        }
        let forwarded = c
            .streams
            .iter()
            .filter(|s| r.forwarded.contains_key(&s.path))
            .count();
        *tally
            .entry("streams the router forwarded whole".into())
            .or_default() += forwarded as u64;
        if !d.is_empty() {
            failures.push(format!(
                "seed {seed} case {i} ({:?}):\n  {}",
                c.streams,
                d.join("\n  ")
            ));
        }
    }
    eprintln!("seed {seed}, {cases} cases:");
    for (k, v) in &tally {
        eprintln!("  {k}: {v}");
    }
    failures
}

#[test]
fn random_http2_frames_are_handled_as_nginx_handles_them() {
    let p = pair_on("http2", "h2c = true", "");
    let cases: u64 = std::env::var("KETAMA_H2_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let seeds: Vec<u64> = match std::env::var("KETAMA_H2_DIFF_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(s) => vec![s],
        None => vec![1, 2],
    };
    let mut failures = Vec::new();
    for seed in seeds {
        failures.extend(differential(&p, seed, cases));
    }
    assert!(
        failures.is_empty(),
        "{} cases differ:\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_excused_differences_are_documented() {
    common::differential::assert_documented(EXCUSED);
}
