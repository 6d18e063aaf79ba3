//! HTTP/2 against nginx 1.22's `listen ... http2` (h2c), where RFC 9113
//! leaves a choice or nginx's HTTP/1 rules apply to HTTP/2: the same
//! frames to the router and to nginx, each in front of its own recording
//! origin, then what each origin was handed and what each client read
//! compared. Headers are HPACK-encoded here (the `hpack` crate), so a
//! case can hold what no HTTP/2 library would send.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::differential::{pair_on, show_forwarded, Outcome, Side};

use common::h2raw::{frame, PREFACE};

/// What the client read on stream 1.
#[derive(Debug, Default, PartialEq, Eq)]
struct Read2 {
    status: Option<u16>,
    /// RST_STREAM's error code.
    reset: Option<u32>,
    goaway: bool,
}

/// Sends one request (its fields, pseudo-headers first as given, then its
/// DATA) on a new h2c connection; reads stream 1 until it ends.
fn send(addr: SocketAddr, fields: &[(&str, &str)], data: Option<&[u8]>) -> Read2 {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let block =
        hpack::Encoder::new().encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
    let mut out = PREFACE.to_vec();
    out.extend(frame(0x4, 0, 0, &[]));
    let end_stream = if data.is_none() { 0x1 } else { 0 };
    out.extend(frame(0x1, 0x4 | end_stream, 1, &block));
    if let Some(d) = data {
        out.extend(frame(0x0, 0x1, 1, d));
    }
    c.write_all(&out).unwrap();
    let mut decoder = hpack::Decoder::new();
    let mut got = Read2::default();
    let mut buf = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let mut b = [0u8; 16384];
        match c.read(&mut b) {
            Ok(0) => break,
            Ok(n) => buf.extend_from_slice(&b[..n]),
            Err(_) => continue,
        }
        while buf.len() >= 9 {
            let len = u32::from_be_bytes([0, buf[0], buf[1], buf[2]]) as usize;
            if buf.len() < 9 + len {
                break;
            }
            let (kind, flags) = (buf[3], buf[4]);
            let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]) & 0x7fff_ffff;
            let payload = buf[9..9 + len].to_vec();
            buf.drain(..9 + len);
            match kind {
                0x4 if flags & 1 == 0 => {
                    let _ = c.write_all(&frame(0x4, 1, 0, &[]));
                }
                0x1 if stream == 1 => {
                    let fields = decoder.decode(&payload).unwrap_or_default();
                    if got.status.is_none() {
                        got.status = fields
                            .iter()
                            .find(|(n, _)| n == b":status")
                            .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse().ok());
                    }
                    if flags & 1 != 0 {
                        return got;
                    }
                }
                0x1 => {
                    let _ = decoder.decode(&payload);
                }
                0x0 if stream == 1 && flags & 1 != 0 => return got,
                0x3 if stream == 1 => {
                    got.reset = Some(u32::from_be_bytes([
                        payload[0], payload[1], payload[2], payload[3],
                    ]));
                    return got;
                }
                0x7 => {
                    got.goaway = true;
                    return got;
                }
                _ => {}
            }
        }
    }
    got
}

fn run(side: &Side, fields: &[(&str, &str)], data: Option<&[u8]>) -> (Read2, Outcome) {
    let read = send(side.addr, fields, data);
    // The origin's side of the exchange may lag the client's.
    std::thread::sleep(Duration::from_millis(100));
    let recorded = side.origin.take();
    let outcome = Outcome {
        statuses: read.status.into_iter().collect(),
        forwarded: recorded
            .into_iter()
            .filter(|r| r.complete)
            .map(Into::into)
            .collect(),
        ..Outcome::default()
    };
    (read, outcome)
}

/// How the two must compare on a case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// The same status, the same requests forwarded.
    Same,
    /// A request RFC 9113 calls malformed: nginx answers 400, the `h2`
    /// crate resets the stream (or, for a field name it cannot decode,
    /// ends the connection); RFC 9113 section 8.1.1 allows either. Both
    /// refuse, nothing is forwarded.
    Refused,
    /// A difference kept on purpose (docs/router.md, "Differences from
    /// nginx"), by its name.
    Excused(&'static str),
}

type Case = (
    &'static str,
    Vec<(&'static str, &'static str)>,
    Option<&'static [u8]>,
    Expect,
);

fn cases() -> Vec<Case> {
    use Expect::*;
    let req = |method: &'static str,
               authority: &'static str,
               path: &'static str,
               extra: &[(&'static str, &'static str)]| {
        let mut v = vec![(":method", method), (":scheme", "http")];
        if !authority.is_empty() {
            v.push((":authority", authority));
        }
        v.push((":path", path));
        v.extend_from_slice(extra);
        v
    };
    let get = |extra: &[(&'static str, &'static str)]| req("GET", "a.test", "/a?b=1", extra);
    vec![
        (
            "plain",
            get(&[("user-agent", "t"), ("accept", "*/*")]),
            None,
            Same,
        ),
        (
            "host_only",
            req("GET", "", "/h", &[("host", "h.test")]),
            None,
            Same,
        ),
        ("authority_and_host", get(&[("host", "a.test")]), None, Same),
        (
            "authority_and_other_host",
            get(&[("host", "b.test")]),
            None,
            Same,
        ),
        ("neither", req("GET", "", "/n", &[]), None, Same),
        (
            "two_cookies",
            get(&[("cookie", "a=1"), ("cookie", "b=2")]),
            None,
            Same,
        ),
        ("underscore", get(&[("x_under", "1")]), None, Same),
        ("dot", get(&[("x.dot", "1")]), None, Same),
        ("te_trailers", get(&[("te", "trailers")]), None, Same),
        (
            "two_if_match",
            get(&[("if-match", "a"), ("if-match", "b")]),
            None,
            Same,
        ),
        ("xff", get(&[("x-forwarded-for", "1.2.3.4")]), None, Same),
        ("value_tab", get(&[("x-tab", "a\tb")]), None, Same),
        ("empty_value", get(&[("x-empty", "")]), None, Same),
        ("trace", req("TRACE", "a.test", "/t", &[]), None, Same),
        (
            "connect",
            vec![(":method", "CONNECT"), (":authority", "a.test:443")],
            None,
            Same,
        ),
        ("path_star", req("OPTIONS", "a.test", "*", &[]), None, Same),
        ("dotdot", req("GET", "a.test", "/../x", &[]), None, Same),
        (
            "dotdot_escaped",
            req("GET", "a.test", "/a/%2e%2e/%2E%2E/x", &[]),
            None,
            Same,
        ),
        ("method_lower", req("get", "a.test", "/x", &[]), None, Same),
        (
            "brace_path",
            req("GET", "a.test", "/{a}|b", &[]),
            None,
            Same,
        ),
        (
            "authority_port",
            req("GET", "a.test:8080", "/x", &[]),
            None,
            Same,
        ),
        (
            "scheme_https",
            vec![
                (":method", "GET"),
                (":scheme", "https"),
                (":authority", "a.test"),
                (":path", "/x"),
            ],
            None,
            Same,
        ),
        (
            "post_length",
            req("POST", "a.test", "/p", &[("content-length", "3")]),
            Some(b"abc"),
            Same,
        ),
        (
            "post_no_length",
            req("POST", "a.test", "/p", &[]),
            Some(b"abc"),
            Same,
        ),
        ("upper", get(&[("X-Up", "1")]), None, Refused),
        (
            "length_no_body",
            get(&[("content-length", "5")]),
            None,
            Refused,
        ),
        (
            "post_short",
            req("POST", "a.test", "/p", &[("content-length", "5")]),
            Some(b"abc"),
            Refused,
        ),
        ("bad_authority", req("GET", "a/b", "/x", &[]), None, Refused),
        ("no_slash", req("GET", "a.test", "a", &[]), None, Refused),
        (
            "te_gzip",
            get(&[("te", "gzip")]),
            None,
            Excused("h2_malformed"),
        ),
        (
            "connection",
            get(&[("connection", "keep-alive")]),
            None,
            Excused("h2_malformed"),
        ),
        (
            "fragment",
            req("GET", "a.test", "/a#b", &[]),
            None,
            Excused("h2_fragment"),
        ),
    ]
}

/// Names of the differences this test excuses (docs/router.md lists
/// them; a test below checks that it does).
const EXCUSED: [&str; 2] = ["h2_malformed", "h2_fragment"];

fn refused(r: &Read2) -> bool {
    r.reset.is_some() || r.goaway || r.status.is_some_and(|s| s >= 400)
}

#[test]
fn http2_as_nginx_handles_it() {
    let pair = pair_on("http2", "h2c = true", "");
    let mut differ = Vec::new();
    for (name, fields, data, expect) in cases() {
        let (nr, no) = run(&pair.nginx_side, &fields, data);
        let (rr, ro) = run(&pair.router_side, &fields, data);
        let forwarded = show_forwarded(&no, &ro);
        let ok = match expect {
            Expect::Same => nr.status.is_some() && nr.status == rr.status && forwarded.is_empty(),
            Expect::Refused => {
                refused(&nr) && refused(&rr) && no.forwarded.is_empty() && ro.forwarded.is_empty()
            }
            // The router's side of the difference, as documented.
            Expect::Excused("h2_malformed") => refused(&rr) && ro.forwarded.is_empty(),
            Expect::Excused(_) => {
                rr.status == nr.status
                    && ro.forwarded.len() == 1
                    && ro.forwarded[0].line.starts_with("GET /a HTTP/1.1")
            }
        };
        if !ok {
            differ.push(format!(
                "{name} ({expect:?}): nginx {nr:?}, router {rr:?}\n{forwarded}"
            ));
        }
    }
    assert!(
        differ.is_empty(),
        "{} cases differ:\n{}",
        differ.len(),
        differ.join("\n")
    );
}

#[test]
fn the_excused_differences_are_documented() {
    common::differential::assert_documented(&EXCUSED);
}
