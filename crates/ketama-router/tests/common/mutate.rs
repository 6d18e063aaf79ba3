//! Requests for the differential against nginx (HTTP Garden's method):
//! valid requests, then seeded mutations of them: header lines inserted,
//! deleted, duplicated, their case changed, whitespace around the colon,
//! `Content-Length` and `Transfer-Encoding` variants, `Connection` tokens
//! naming any field, bare LF and stray CR, versions, methods, bytes in
//! names and values, and bodies that disagree with their framing. A body
//! length a mutation announces is at most [`MAX_BODY`], and a valid
//! request's at most its own length, so that the filler the harness sends
//! after a case ([`Req::filler`]) always ends it.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

/// The largest body length a case announces (a `Content-Length` or a
/// chunk size), except lengths nginx refuses outright.
pub const MAX_BODY: usize = 3000;

/// One header line: name, what goes between name and value, value, line
/// end.
#[derive(Clone, Debug)]
pub struct Field {
    pub name: Vec<u8>,
    pub sep: Vec<u8>,
    pub value: Vec<u8>,
    pub end: Vec<u8>,
}

/// A request as its parts, written out by [`Req::bytes`].
#[derive(Clone, Debug)]
pub struct Req {
    /// Empty lines before the request line.
    pub lead: Vec<u8>,
    pub method: Vec<u8>,
    pub target: Vec<u8>,
    /// `HTTP/1.1`, or anything else (empty: no version).
    pub version: Vec<u8>,
    pub line_end: Vec<u8>,
    pub fields: Vec<Field>,
    /// The empty line that ends the head.
    pub end: Vec<u8>,
    /// The body as sent (chunked framing included).
    pub body: Vec<u8>,
    /// The valid request's body length (a mutation may cut the body).
    pub announced: usize,
}

impl Req {
    /// The request's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        let mut v = self.lead.clone();
        v.extend_from_slice(&self.method);
        v.push(b' ');
        v.extend_from_slice(&self.target);
        if !self.version.is_empty() {
            v.push(b' ');
            v.extend_from_slice(&self.version);
        }
        v.extend_from_slice(&self.line_end);
        for f in &self.fields {
            v.extend_from_slice(&f.name);
            v.extend_from_slice(&f.sep);
            v.extend_from_slice(&f.value);
            v.extend_from_slice(&f.end);
        }
        v.extend_from_slice(&self.end);
        v.extend_from_slice(&self.body);
        v
    }

    /// How many empty lines the harness sends after the case: more bytes
    /// than any body it announces.
    pub fn filler(&self) -> usize {
        MAX_BODY.max(self.announced) + 1000
    }

    fn set(&mut self, name: &str, value: &[u8]) {
        self.fields.push(field(name.as_bytes(), value));
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.fields
            .iter()
            .position(|f| f.name.eq_ignore_ascii_case(name.as_bytes()))
    }
}

fn field(name: &[u8], value: &[u8]) -> Field {
    Field {
        name: name.to_vec(),
        sep: b": ".to_vec(),
        value: value.to_vec(),
        end: b"\r\n".to_vec(),
    }
}

/// A chunked body of `data` in pieces of at most `piece` bytes.
pub fn chunked(data: &[u8], piece: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for c in data.chunks(piece.max(1)) {
        v.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        v.extend_from_slice(c);
        v.extend_from_slice(b"\r\n");
    }
    v.extend_from_slice(b"0\r\n\r\n");
    v
}

fn text(rng: &mut StdRng, n: usize) -> Vec<u8> {
    (0..n)
        .map(|_| {
            *b"abcdefghijklmnopqrstuvwxyz0123456789-=&"
                .choose(rng)
                .unwrap()
        })
        .collect()
}

/// One of the valid requests mutations start from.
pub fn base(rng: &mut StdRng) -> Req {
    let path = format!(
        "/{}?q={}",
        String::from_utf8(text(rng, 6)).unwrap(),
        rng.random_range(0..100)
    );
    let mut r = Req {
        lead: Vec::new(),
        method: b"GET".to_vec(),
        target: path.into_bytes(),
        version: b"HTTP/1.1".to_vec(),
        line_end: b"\r\n".to_vec(),
        fields: Vec::new(),
        end: b"\r\n".to_vec(),
        body: Vec::new(),
        announced: 0,
    };
    r.set("Host", b"example.test");
    r.set("User-Agent", b"diff/1");
    match rng.random_range(0..11) {
        // Bodies over the router's retry buffer (64 KiB): streamed.
        9 => {
            r.method = b"POST".to_vec();
            let n = rng.random_range(65_000..100_000);
            r.body = text(rng, n);
            r.set("Content-Length", n.to_string().as_bytes());
        }
        10 => {
            r.method = b"PUT".to_vec();
            let n = rng.random_range(65_000..100_000);
            let data = text(rng, n);
            r.body = chunked(&data, rng.random_range(1000..9000));
            r.set("Transfer-Encoding", b"chunked");
        }
        0 | 1 => r.set("Accept", b"*/*"),
        2 | 3 => {
            r.method = b"POST".to_vec();
            let n = rng.random_range(0..200);
            r.body = text(rng, n);
            r.set("Content-Length", n.to_string().as_bytes());
            r.set("Content-Type", b"text/plain");
        }
        4 => {
            r.method = b"POST".to_vec();
            let n = rng.random_range(1..300);
            let data = text(rng, n);
            r.body = chunked(&data, rng.random_range(1..64));
            r.set("Transfer-Encoding", b"chunked");
        }
        5 => {
            r.method = b"PUT".to_vec();
            let n = rng.random_range(1..100);
            r.body = text(rng, n);
            r.set("Content-Length", n.to_string().as_bytes());
            r.set("Expect", b"100-continue");
        }
        6 => {
            r.method = b"HEAD".to_vec();
            r.set("Connection", b"keep-alive");
        }
        7 => {
            r.version = b"HTTP/1.0".to_vec();
            r.set("Connection", b"keep-alive");
        }
        _ => {
            r.set("Connection", b"Upgrade");
            r.set("Upgrade", b"websocket");
            r.set("Sec-WebSocket-Key", b"dGhlIHNhbXBsZSBub25jZQ==");
            r.set("Sec-WebSocket-Version", b"13");
        }
    }
    r
}

/// Names a mutation inserts or a `Connection` line names.
const NAMES: &[&str] = &[
    "Host",
    "Content-Length",
    "Transfer-Encoding",
    "Connection",
    "Keep-Alive",
    "Proxy-Connection",
    "Proxy-Authorization",
    "TE",
    "Trailer",
    "Upgrade",
    "Expect",
    "X-Forwarded-For",
    "X-Forwarded-Proto",
    "X-Real-IP",
    "If-Match",
    "If-None-Match",
    "If-Modified-Since",
    "If-Range",
    "Authorization",
    "Content-Range",
    "Range",
    "Cookie",
    "Accept-Encoding",
    "X_Forwarded_For",
    "Content_Length",
    "Transfer_Encoding",
    "X-Custom",
    "x-a",
    "HTTP2-Settings",
    "Via",
];

/// Values a mutation gives a field.
fn value_for(rng: &mut StdRng, name: &str) -> Vec<u8> {
    let n = name.to_ascii_lowercase();
    let pick = |rng: &mut StdRng, vs: &[&str]| vs.choose(rng).unwrap().as_bytes().to_vec();
    match n.as_str() {
        "content-length" | "content_length" => pick(
            rng,
            &[
                "0",
                "5",
                "10",
                "00000000000000000005",
                "+5",
                "-1",
                "5, 5",
                "5,5",
                "",
                "0x5",
                "99999999999999999999",
                "1e2",
                " 7",
                "3000",
                "12 ",
                "5 5",
            ],
        ),
        "transfer-encoding" | "transfer_encoding" => pick(
            rng,
            &[
                "chunked",
                "Chunked",
                "CHUNKED",
                "chunked, chunked",
                "gzip, chunked",
                "identity",
                "chunked ",
                "gzip",
                "chunked;q=1",
                "xchunked",
                "",
                "chunked\t",
            ],
        ),
        "connection" => {
            let tokens: Vec<&str> = (0..rng.random_range(1..12))
                .map(|_| {
                    *[
                        "close",
                        "keep-alive",
                        "Upgrade",
                        "Content-Length",
                        "Transfer-Encoding",
                        "Host",
                        "X-Forwarded-For",
                        "X-Custom",
                        "TE",
                        "Keep-Alive",
                        "Expect",
                        "x-a",
                        "foo-closed",
                        "Cookie",
                    ]
                    .choose(rng)
                    .unwrap()
                })
                .collect();
            tokens.join(", ").into_bytes()
        }
        "host" => pick(
            rng,
            &[
                "a", "a/b", "", "a b", "a..b", "[::1]", "a:80", ".", "A.B", "a_b", "a\\b", "a.",
                "a:", "a:b:c", ":80", "[::1]:80", "a.b.", "h\x01", "x\x7fy",
            ],
        ),
        "expect" => pick(
            rng,
            &["100-continue", "100-Continue", "foo", "100-continue, x", ""],
        ),
        "upgrade" => pick(
            rng,
            &["websocket", "WebSocket", "h2c", "websocket, h2c", ""],
        ),
        "te" => pick(rng, &["trailers", "gzip", ""]),
        "x-forwarded-for" | "x_forwarded_for" => pick(rng, &["6.6.6.6", "1.1.1.1, 2.2.2.2", ""]),
        _ => pick(rng, &["v", "", "a b", "\"q\"", "x=1; y=2", "caf\u{e9}"]),
    }
}

/// Bytes a mutation puts inside a name or a value.
const ODD: &[u8] = &[
    0x00, 0x01, b'\t', b' ', b'_', b'@', b'.', b'~', 0x7f, 0x80, 0xff, b':', b'"', b'(', b'\r',
    b'\n', b'/', b'%', b';', b',', 0x0b,
];

fn insert_byte(rng: &mut StdRng, v: &mut Vec<u8>) {
    let at = rng.random_range(0..=v.len());
    v.insert(at, *ODD.choose(rng).unwrap());
}

/// Applies one random mutation.
pub fn mutate(rng: &mut StdRng, r: &mut Req) {
    let nf = r.fields.len();
    let at = |rng: &mut StdRng| rng.random_range(0..nf.max(1));
    match rng.random_range(0..27) {
        // Header lines inserted, deleted, duplicated.
        0 | 1 => {
            let name = *NAMES.choose(rng).unwrap();
            let value = value_for(rng, name);
            let pos = rng.random_range(0..=nf);
            r.fields.insert(pos, field(name.as_bytes(), &value));
        }
        2 if nf > 0 => {
            r.fields.remove(at(rng));
        }
        3 if nf > 0 => {
            let i = at(rng);
            let f = r.fields[i].clone();
            r.fields.insert(rng.random_range(0..=nf), f);
        }
        // Case.
        4 if nf > 0 => {
            let i = at(rng);
            let f = &mut r.fields[i];
            match rng.random_range(0..3) {
                0 => f.name.make_ascii_uppercase(),
                1 => f.name.make_ascii_lowercase(),
                _ => {
                    for b in f.name.iter_mut() {
                        if rng.random_bool(0.5) {
                            *b = b.to_ascii_uppercase();
                        }
                    }
                }
            }
        }
        // Whitespace around the colon.
        5 if nf > 0 => {
            let i = at(rng);
            r.fields[i].sep = [
                &b" :"[..],
                b":",
                b":\t",
                b":  ",
                b" : ",
                b"\t:",
                b"::",
                b": \t",
            ]
            .choose(rng)
            .unwrap()
            .to_vec();
        }
        6 if nf > 0 => {
            let i = at(rng);
            let tail: &[u8] = [&b" "[..], b"\t", b"  ", b" \t"].choose(rng).unwrap();
            r.fields[i].value.extend_from_slice(tail);
        }
        // Framing variants.
        7 | 8 => {
            let name = ["Content-Length", "Transfer-Encoding"].choose(rng).unwrap();
            let value = value_for(rng, name);
            match r.find(name) {
                Some(i) if rng.random_bool(0.6) => r.fields[i].value = value,
                _ => r.set(name, &value),
            }
        }
        // Connection naming any field.
        9 => {
            let value = value_for(rng, "connection");
            match r.find("connection") {
                Some(i) if rng.random_bool(0.5) => r.fields[i].value = value,
                _ => r.set("Connection", &value),
            }
        }
        // Bare LF, stray CR.
        10 => {
            let lf: &[u8] = [&b"\n"[..], b"\r\r\n", b"\r", b"\n\r"].choose(rng).unwrap();
            match rng.random_range(0..3) {
                0 if nf > 0 => {
                    let i = at(rng);
                    r.fields[i].end = lf.to_vec();
                }
                1 => r.line_end = lf.to_vec(),
                _ => r.end = lf.to_vec(),
            }
        }
        11 => {
            for f in &mut r.fields {
                f.end = b"\n".to_vec();
            }
            r.line_end = b"\n".to_vec();
            r.end = b"\n".to_vec();
        }
        // Versions.
        12 => {
            r.version = [
                &b"HTTP/1.0"[..],
                b"HTTP/1.1",
                b"HTTP/1.2",
                b"HTTP/2.0",
                b"HTTP/1.01",
                b"http/1.1",
                b"HTTP/1.1 ",
                b"HTTP/1",
                b"HTTP/3.0",
                b"HTTP/1.10",
                b"",
            ]
            .choose(rng)
            .unwrap()
            .to_vec();
        }
        // Methods.
        13 => {
            r.method = [
                &b"GET"[..],
                b"POST",
                b"HEAD",
                b"PUT",
                b"DELETE",
                b"OPTIONS",
                b"TRACE",
                b"CONNECT",
                b"PATCH",
                b"get",
                b"G-T",
                b"X_Y",
                b"PROPFIND",
                b"G\x80T",
                b"GE T",
            ]
            .choose(rng)
            .unwrap()
            .to_vec();
        }
        // Bytes in names and values.
        14 | 15 if nf > 0 => {
            let i = at(rng);
            insert_byte(rng, &mut r.fields[i].name);
        }
        16 | 17 if nf > 0 => {
            let i = at(rng);
            insert_byte(rng, &mut r.fields[i].value);
        }
        // Bodies that disagree with their framing.
        18 => {
            let n = rng.random_range(1..40);
            let extra = text(rng, n);
            r.body.extend_from_slice(&extra);
        }
        19 if !r.body.is_empty() => {
            let n = rng.random_range(0..r.body.len());
            r.body.truncate(n);
        }
        20 => {
            let n = rng.random_range(1..200);
            let data = text(rng, n);
            r.body = match rng.random_range(0..8) {
                0 => chunked(&data, 16),
                1 => [
                    format!("{:x} foo\r\n", n).as_bytes(),
                    &data,
                    b"\r\n0\r\n\r\n",
                ]
                .concat(),
                2 => [
                    format!("{:x};ext=1\r\n", n).as_bytes(),
                    &data,
                    b"\r\n0\r\nX-T: 1\r\n\r\n",
                ]
                .concat(),
                3 => [
                    format!("{:x}\r\n", n + 3).as_bytes(),
                    &data,
                    b"\r\n0\r\n\r\n",
                ]
                .concat(),
                4 => [format!("{:x}\r\n", n).as_bytes(), &data, b"\r\n"].concat(),
                5 => [format!("0x{:x}\r\n", n).as_bytes(), &data, b"\r\n0\r\n\r\n"].concat(),
                6 => [b"fffffffffffffffff\r\n".as_slice(), &data].concat(),
                _ => [format!("{:08x}\n", n).as_bytes(), &data, b"\n0\n\n"].concat(),
            };
        }
        // Host.
        21 => {
            let v = value_for(rng, "host");
            match r.find("host") {
                Some(i) => r.fields[i].value = v,
                None => r.set("Host", &v),
            }
        }
        // Empty lines first; a folded line; a line without a colon; an
        // empty name.
        22 => r.lead = b"\r\n\n\r\n".to_vec(),
        23 => {
            let pos = rng.random_range(0..=nf);
            let f = match rng.random_range(0..4) {
                0 => Field {
                    name: b" folded".to_vec(),
                    sep: Vec::new(),
                    value: Vec::new(),
                    end: b"\r\n".to_vec(),
                },
                1 => Field {
                    name: b"NoColon".to_vec(),
                    sep: Vec::new(),
                    value: Vec::new(),
                    end: b"\r\n".to_vec(),
                },
                2 => field(b"", b"v"),
                _ => field(b"X-Empty", b""),
            };
            r.fields.insert(pos, f);
        }
        // Many lines, many tokens.
        24 => {
            for i in 0..rng.random_range(20..300) {
                r.set(&format!("X-Many-{i}"), b"v");
            }
        }
        // Targets.
        25 => {
            r.target = [
                &b"/a/../b"[..],
                b"/%zz",
                b"http://h.test/abs",
                b"*",
                b"/a?b#c",
                b"/a%2Fb",
                b"//x",
            ]
            .choose(rng)
            .unwrap()
            .to_vec();
        }
        26 => {
            // Unique fields twice.
            let name = [
                "If-Match",
                "Authorization",
                "Expect",
                "If-Range",
                "Content-Range",
            ]
            .choose(rng)
            .unwrap();
            r.set(name, b"x");
            r.set(name, b"y");
        }
        // A mutation that found nothing to change.
        _ => {}
    }
}

/// Case `i` of the run seeded `seed`: a valid request with one to three
/// mutations (one case in eight left valid).
pub fn case(seed: u64, i: u64) -> Req {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i);
    let mut r = base(&mut rng);
    r.announced = r.body.len();
    if rng.random_range(0..8) != 0 {
        for _ in 0..rng.random_range(1..=3) {
            mutate(&mut rng, &mut r);
        }
    }
    r
}
