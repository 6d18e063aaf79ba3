//! The differential against nginx: the same raw bytes sent to the router
//! and to nginx 1.22, each in front of its own recording origin
//! ([`super::recorder`]); what each origin is handed and what each client
//! reads must be the same. Each case is followed on its connection by a
//! pipelined canary, a filler of empty lines (which every head reader
//! skips, and which completes any body a case announced but did not
//! send: see [`super::mutate::MAX_BODY`]) and a last request with
//! `Connection: close`, so that every case ends on its own without a
//! timeout.
//!
//! The nginx side is configured as the router behaves by default: `Host`
//! as the client sent it, `X-Forwarded-For` and `X-Forwarded-Proto`,
//! WebSocket upgrades forwarded, bodies streamed
//! (`proxy_request_buffering off`) and unlimited.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::recorder::{Framing, Recorded, Recorder};
use super::tls::Nginx;
use super::RouterProc;

/// The pipelined canary after each case.
pub const CANARY: &[u8] = b"GET /canary HTTP/1.1\r\nHost: canary\r\n\r\n";
/// The last request of each connection.
pub const LAST: &[u8] = b"GET /last HTTP/1.1\r\nHost: last\r\nConnection: close\r\n\r\n";

/// Fields a proxy writes itself: compared by value, not by position.
pub const SET_BY_PROXY: &[&str] = &[
    "host",
    "connection",
    "upgrade",
    "x-forwarded-for",
    "x-forwarded-proto",
    "content-length",
    "transfer-encoding",
];

/// A proxy in front of its own recording origin.
pub struct Side {
    pub addr: SocketAddr,
    pub origin: Recorder,
}

/// The router and nginx, each over its own recorder.
pub struct Pair {
    pub nginx: Nginx,
    pub router: RouterProc,
    pub nginx_side: Side,
    pub router_side: Side,
    pub _dir: tempfile::TempDir,
}

/// nginx configured as the router behaves (see the module docs), with
/// `nginx_server` added to its `server` block, and the router with
/// `router_server` added to its `[server]`.
pub fn pair_with(router_server: &str, nginx_server: &str) -> Pair {
    pair_on("", router_server, nginx_server)
}

/// [`pair_with`], nginx's `listen` with `listen_options` (`http2`: HTTP/2
/// with prior knowledge, h2c).
pub fn pair_on(listen_options: &str, router_server: &str, nginx_server: &str) -> Pair {
    let (n_origin, r_origin) = (Recorder::start(), Recorder::start());
    let o = n_origin.addr;
    let nginx = Nginx::start(|addr| {
        format!(
            r#"
  map "$http_upgrade|$server_protocol" $ws {{ "~*^websocket\|HTTP/1\.0*[1-9]" websocket; default ""; }}
  map $ws $conn {{ websocket upgrade; default ""; }}
  upstream o {{ server {o}; keepalive 8; }}
  server {{
    listen {addr} {listen_options};
    client_max_body_size 0;
    {nginx_server}
    location / {{
      proxy_pass http://o;
      proxy_http_version 1.1;
      proxy_request_buffering off;
      proxy_set_header Host $http_host;
      proxy_set_header Connection $conn;
      proxy_set_header Upgrade $ws;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
    }}
  }}"#
        )
    });
    let (router, dir) = super::router_over(&[r_origin.addr], router_server, "enabled = false");
    Pair {
        nginx_side: Side {
            addr: nginx.addr,
            origin: n_origin,
        },
        router_side: Side {
            addr: router.proxy,
            origin: r_origin,
        },
        nginx,
        router,
        _dir: dir,
    }
}

/// What one side did with a case.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The statuses the client read, in order (`100` included).
    pub statuses: Vec<u16>,
    /// The whole requests its origin was handed, normalized.
    pub forwarded: Vec<Seen>,
    /// Requests its origin got only part of.
    pub incomplete: usize,
    /// Whole requests whose body came chunked (compared as
    /// `Content-Length` ones: see [`Seen`]).
    pub chunked: usize,
    /// The connection did not end within the read timeout.
    pub hung: bool,
}

/// A request as an origin saw it, in the form compared: the fields a
/// proxy writes itself by value, every other field in order as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub line: String,
    pub set: BTreeMap<String, Vec<String>>,
    pub fields: Vec<(String, String)>,
    pub framing: Framing,
    pub body: String,
}

fn show(b: &[u8]) -> String {
    b.escape_ascii().to_string()
}

impl From<Recorded> for Seen {
    fn from(r: Recorded) -> Seen {
        let mut set = BTreeMap::new();
        let mut fields = Vec::new();
        for (n, v) in &r.headers {
            let lower = String::from_utf8_lossy(n).to_ascii_lowercase();
            if SET_BY_PROXY.contains(&lower.as_str()) {
                set.entry(lower).or_insert_with(Vec::new).push(show(v));
            } else {
                fields.push((show(n), show(v)));
            }
        }
        // A chunked body nginx had whole when it connected goes with
        // Content-Length, the router streams it chunked: the same body
        // (the documented difference `chunked_framing`).
        let mut framing = r.framing;
        if framing == Framing::Chunked {
            framing = Framing::Length(r.body.len() as u64);
            set.remove("transfer-encoding");
            set.insert("content-length".into(), vec![r.body.len().to_string()]);
        }
        // A proxy's `Connection` without tokens is none at all.
        if set
            .get("connection")
            .is_some_and(|v| v.iter().all(String::is_empty))
        {
            set.remove("connection");
        }
        Seen {
            line: show(&r.line),
            set,
            fields,
            framing,
            body: show(&r.body),
        }
    }
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:?} {:?} {:?} {:?}",
            self.line, self.set, self.fields, self.framing, self.body
        )
    }
}

/// The two sides' forwarded requests side by side, differing ones marked.
pub fn show_forwarded(n: &Outcome, r: &Outcome) -> String {
    let mut s = String::new();
    for i in 0..n.forwarded.len().max(r.forwarded.len()) {
        let (a, b) = (n.forwarded.get(i), r.forwarded.get(i));
        if a == b {
            continue;
        }
        let show = |x: Option<&Seen>| x.map_or("-".to_string(), |x| x.to_string());
        s.push_str(&format!(
            "    [{i}] nginx:  {}\n    [{i}] router: {}\n",
            show(a),
            show(b)
        ));
    }
    s
}

/// Sends `case`, the canary, `filler` empty lines and the last request on
/// a new connection to `side`; reads until the proxy closes it.
pub fn run(side: &Side, case: &[u8], filler: usize) -> Outcome {
    let mut bytes = case.to_vec();
    bytes.extend_from_slice(CANARY);
    bytes.extend(std::iter::repeat_n(*b"\r\n", filler).flatten());
    bytes.extend_from_slice(LAST);
    let mut c = TcpStream::connect(side.addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let writer = {
        let mut w = c.try_clone().unwrap();
        // A proxy that closes early leaves part unwritten: not an error.
        std::thread::spawn(move || {
            let _ = w.write_all(&bytes);
        })
    };
    let mut out = Vec::new();
    let mut hung = false;
    let mut buf = [0u8; 16384];
    loop {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                hung = true;
                break;
            }
            Err(_) => break,
        }
    }
    drop(c);
    let _ = writer.join();
    let recorded = side.origin.take();
    let incomplete = recorded.iter().filter(|r| !r.complete).count();
    let chunked = recorded
        .iter()
        .filter(|r| r.complete && r.framing == Framing::Chunked)
        .count();
    Outcome {
        statuses: statuses(&out),
        forwarded: recorded
            .into_iter()
            .filter(|r| r.complete)
            .map(Seen::from)
            .collect(),
        incomplete,
        chunked,
        hung,
    }
}

/// The statuses of the responses in `out`, in order. A body is skipped by
/// its `Content-Length` or chunked framing; a response to `HEAD` has none
/// although it may announce one, so a head right after a head is read as
/// the next response.
pub fn statuses(out: &[u8]) -> Vec<u16> {
    let mut seen = Vec::new();
    let mut rest = out;
    while rest.starts_with(b"HTTP/1.") {
        let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") else {
            break;
        };
        let head = String::from_utf8_lossy(&rest[..end]).to_string();
        seen.push(head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0));
        rest = &rest[end + 4..];
        if rest.starts_with(b"HTTP/1.") {
            continue;
        }
        let field = |name: &str| {
            head.lines().find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
            })
        };
        if field("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
            rest = skip_chunked(rest);
        } else {
            let len: usize = field("content-length")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            rest = &rest[len.min(rest.len())..];
        }
    }
    seen
}

fn skip_chunked(mut rest: &[u8]) -> &[u8] {
    loop {
        let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") else {
            return &[];
        };
        let size = std::str::from_utf8(&rest[..eol]).unwrap_or("x");
        let Ok(n) = usize::from_str_radix(size.split(';').next().unwrap_or("x").trim(), 16) else {
            return &[];
        };
        rest = &rest[eol + 2..];
        if n == 0 {
            let end = rest
                .windows(2)
                .position(|w| w == b"\r\n")
                .map_or(rest.len(), |e| e + 2);
            return &rest[end..];
        }
        rest = &rest[(n + 2).min(rest.len())..];
    }
}

/// A difference between the two sides, by kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Difference {
    /// The clients read other statuses.
    Statuses,
    /// The origins were handed other requests (or another number).
    Forwarded,
    /// One side's connection did not end.
    Hung,
}

/// How the two outcomes differ.
pub fn differences(n: &Outcome, r: &Outcome) -> Vec<Difference> {
    let mut d = Vec::new();
    if n.hung || r.hung {
        d.push(Difference::Hung);
    }
    if n.statuses != r.statuses {
        d.push(Difference::Statuses);
    }
    if n.forwarded != r.forwarded {
        d.push(Difference::Forwarded);
    }
    d
}

/// Asserts that every difference in `excused` is listed, by its name, in
/// the router guide's "Differences from nginx" section.
pub fn assert_documented(excused: &[&str]) {
    let doc = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/router.md"),
    )
    .unwrap();
    let section = doc
        .split_once("### Differences from nginx")
        .expect("docs/router.md: no \"Differences from nginx\" section")
        .1;
    let section = section.split("\n### ").next().unwrap();
    for name in excused {
        assert!(
            section.contains(&format!("`{name}`")),
            "`{name}` not in docs/router.md's \"Differences from nginx\""
        );
    }
}
