//! Seeded HTTP/2 cases for the frame-level differential against nginx:
//! one to three request streams on one connection, each a header block
//! (a HEADERS frame alone or split into CONTINUATIONs), DATA frames of
//! every size (empty ones included) with END_STREAM on any of them, on an
//! extra empty frame or on trailers, a `content-length` that agrees or
//! not, fields with bytes nginx and the `h2` crate judge differently, a
//! client's RST_STREAM at any point, and SETTINGS, PING, PRIORITY and
//! WINDOW_UPDATE frames between them all, interleaved across streams as
//! RFC 9113 allows (a header block is never split by another frame).
//! One stream in five is shaped as a gRPC call: `POST`,
//! `content-type: application/grpc`, `te: trailers`, `grpc-timeout`, no
//! `content-length`, a body of length-prefixed messages cut into DATA
//! frames anywhere (empty ones included), ended on its last DATA frame or
//! an empty one.

use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

use super::h2raw::{self, frame, CONTINUATION, DATA, END_HEADERS, END_STREAM, HEADERS};

/// How a stream's request ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// END_STREAM on the HEADERS frame: no body.
    OnHeaders,
    /// END_STREAM on the last DATA frame that carries data.
    OnData,
    /// An extra empty DATA frame carries END_STREAM.
    EmptyData,
    /// Trailing HEADERS carry END_STREAM.
    Trailers,
}

/// How the case's stream treats its `content-length`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    None,
    Right,
    Wrong,
}

/// A field whose bytes RFC 9113 or nginx judge (see docs/router.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Odd {
    None,
    /// A control byte (0x01 or 0x7f) in a value: nginx forwards it.
    ValueByte,
    /// An upper-case letter in a name: malformed (RFC 9113 8.2.1).
    UpperName,
}

/// One request stream of a case.
#[derive(Clone)]
pub struct Stream {
    pub id: u32,
    pub method: &'static str,
    pub path: String,
    pub body: Vec<u8>,
    pub pieces: Vec<usize>,
    pub ending: Ending,
    pub length: Length,
    pub odd: Odd,
    /// Shaped as a gRPC call (see the module docs).
    pub grpc: bool,
    /// The client resets the stream after this many of its frames
    /// (`None`: never).
    pub reset_after: Option<usize>,
    /// Its frames, in order, each a unit that may not be split.
    pub units: Vec<Vec<u8>>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}{} {} {} data {:?} {:?} length {:?} {:?} reset after {:?}",
            self.id,
            if self.grpc { " grpc" } else { "" },
            self.method,
            self.path,
            self.pieces,
            self.ending,
            self.length,
            self.odd,
            self.reset_after
        )
    }
}

impl Stream {
    /// Whether the client reset it.
    pub fn reset(&self) -> bool {
        self.reset_after.is_some()
    }
}

/// A case: its streams and the bytes that send them.
#[derive(Clone, Debug)]
pub struct Case {
    pub streams: Vec<Stream>,
    pub bytes: Vec<u8>,
}

const EXTRA: [(&str, &str); 6] = [
    ("accept", "*/*"),
    ("user-agent", "h2gen"),
    ("x-a", "1"),
    ("cookie", "a=1"),
    ("content-type", "application/grpc"),
    ("te", "trailers"),
];

/// A gRPC-shaped stream (see the module docs).
fn grpc_stream(rng: &mut StdRng, id: u32, case: u64) -> Stream {
    let mut body = Vec::new();
    for _ in 0..rng.random_range(1..=3) {
        let n = *[0usize, 5, 100, 3000].choose(rng).unwrap();
        body.push(0);
        body.extend((n as u32).to_be_bytes());
        body.extend((0..n).map(|i| b'A' + (i % 26) as u8));
    }
    // Cut anywhere, message boundaries or not; some cuts empty.
    let mut cuts: Vec<usize> = (0..rng.random_range(0..4))
        .map(|_| rng.random_range(0..=body.len()))
        .collect();
    cuts.sort_unstable();
    let mut pieces = Vec::new();
    let mut at = 0;
    for c in cuts.into_iter().chain([body.len()]) {
        pieces.push(c - at);
        at = c;
    }
    let mut s = Stream {
        id,
        method: "POST",
        path: format!("/pkg.Svc/Call{case}x{id}"),
        body,
        pieces,
        ending: *[Ending::OnData, Ending::EmptyData].choose(rng).unwrap(),
        length: Length::None,
        odd: Odd::None,
        grpc: true,
        reset_after: None,
        units: Vec::new(),
    };
    s.units = units(rng, &s);
    if rng.random_bool(0.1) {
        s.reset_after = Some(rng.random_range(1..=s.units.len()));
    }
    s
}

fn stream(rng: &mut StdRng, id: u32, case: u64) -> Stream {
    if rng.random_bool(0.2) {
        return grpc_stream(rng, id, case);
    }
    let method = *["GET", "POST", "PUT", "POST"].choose(rng).unwrap();
    let path = format!("/c{case}/s{id}?q={}", rng.random_range(0..1000));
    let has_body = method != "GET" && rng.random_bool(0.85);
    let mut pieces = Vec::new();
    let mut body = Vec::new();
    if has_body {
        for _ in 0..rng.random_range(1..=4) {
            let n = *[0usize, 0, 1, 7, 100, 1000, 5000].choose(rng).unwrap();
            pieces.push(n);
            body.extend((0..n).map(|i| b'a' + (i % 26) as u8));
        }
    }
    let ending = if !has_body {
        if rng.random_bool(0.9) {
            Ending::OnHeaders
        } else {
            *[Ending::EmptyData, Ending::Trailers].choose(rng).unwrap()
        }
    } else {
        *[
            Ending::OnData,
            Ending::OnData,
            Ending::EmptyData,
            Ending::EmptyData,
            Ending::Trailers,
        ]
        .choose(rng)
        .unwrap()
    };
    let length = match rng.random_range(0..10) {
        0..=4 => Length::None,
        5..=8 => Length::Right,
        _ => Length::Wrong,
    };
    let odd = match rng.random_range(0..20) {
        0 => Odd::ValueByte,
        1 => Odd::UpperName,
        _ => Odd::None,
    };
    let mut s = Stream {
        id,
        method,
        path,
        body,
        pieces,
        ending,
        length,
        odd,
        grpc: false,
        reset_after: None,
        units: Vec::new(),
    };
    s.units = units(rng, &s);
    if rng.random_bool(0.1) {
        s.reset_after = Some(rng.random_range(1..=s.units.len()));
    }
    s
}

fn units(rng: &mut StdRng, s: &Stream) -> Vec<Vec<u8>> {
    let cl = match s.length {
        Length::None => None,
        Length::Right => Some(s.body.len()),
        Length::Wrong => Some(s.body.len() + [1, 3].choose(rng).copied().unwrap_or(1)),
    };
    let cl = cl.map(|n| n.to_string());
    let mut fields: Vec<(Vec<u8>, Vec<u8>)> = h2raw::request(s.method, &s.path, &[])
        .into_iter()
        .map(|(n, v)| (n.to_vec(), v.to_vec()))
        .collect();
    if s.grpc {
        for (n, v) in [
            ("content-type", "application/grpc"),
            ("te", "trailers"),
            ("grpc-timeout", "10S"),
            ("user-agent", "grpc-c/48.0.0 (linux; chttp2)"),
        ] {
            fields.push((n.as_bytes().to_vec(), v.as_bytes().to_vec()));
        }
    }
    for _ in 0..rng.random_range(0..3) {
        let (n, v) = EXTRA.choose(rng).unwrap();
        // A gRPC stream's own fields are not repeated: the `h2` crate
        // hands a name's values together, so a repeat with another name
        // between would reach the backend moved up (same-name order kept,
        // which is all RFC 9110 gives meaning to); nginx keeps the order
        // as received.
        if s.grpc && fields.iter().any(|(f, _)| f == n.as_bytes()) {
            continue;
        }
        fields.push((n.as_bytes().to_vec(), v.as_bytes().to_vec()));
    }
    if let Some(cl) = &cl {
        fields.push((b"content-length".to_vec(), cl.as_bytes().to_vec()));
    }
    match s.odd {
        Odd::ValueByte => fields.push((
            b"x-odd".to_vec(),
            [b'a', *[1u8, 0x7f].choose(rng).unwrap(), b'b'].to_vec(),
        )),
        Odd::UpperName => fields.push((b"X-Odd".to_vec(), b"1".to_vec())),
        Odd::None => {}
    }
    let refs: Vec<(&[u8], &[u8])> = fields
        .iter()
        .map(|(n, v)| (n.as_slice(), v.as_slice()))
        .collect();
    let block = h2raw::block(&refs);
    let end_on_headers = s.ending == Ending::OnHeaders;
    let mut units = Vec::new();
    // The header block: one frame, or split in two or three.
    let parts = rng.random_range(1..=3usize).min(block.len().max(1));
    let mut unit = Vec::new();
    let step = block.len().div_ceil(parts).max(1);
    for (i, chunk) in block.chunks(step).enumerate() {
        let last = (i + 1) * step >= block.len();
        let kind = if i == 0 { HEADERS } else { CONTINUATION };
        let mut flags = if last { END_HEADERS } else { 0 };
        if i == 0 && end_on_headers {
            flags |= END_STREAM;
        }
        unit.extend(frame(kind, flags, s.id, chunk));
    }
    if block.is_empty() {
        unit.extend(frame(HEADERS, END_HEADERS, s.id, &[]));
    }
    units.push(unit);
    let mut at = 0;
    for (i, &n) in s.pieces.iter().enumerate() {
        let last = i + 1 == s.pieces.len() && s.ending == Ending::OnData;
        units.push(frame(
            DATA,
            if last { END_STREAM } else { 0 },
            s.id,
            &s.body[at..at + n],
        ));
        at += n;
    }
    match s.ending {
        Ending::EmptyData => units.push(frame(DATA, END_STREAM, s.id, &[])),
        Ending::Trailers => {
            let t: [(&[u8], &[u8]); 1] = [(b"x-trailer", b"t")];
            units.push(h2raw::headers(s.id, &t, true));
        }
        Ending::OnHeaders | Ending::OnData => {}
    }
    units
}

/// A control frame that changes nothing a request carries.
fn control(rng: &mut StdRng, open: &[u32]) -> Vec<u8> {
    match rng.random_range(0..5) {
        0 => frame(h2raw::PING, 0, 0, &rng.random::<[u8; 8]>()),
        1 => frame(h2raw::SETTINGS, 0, 0, &[]),
        2 => frame(
            h2raw::WINDOW_UPDATE,
            0,
            0,
            &rng.random_range(1u32..65536).to_be_bytes(),
        ),
        3 if !open.is_empty() => {
            let id = *open.choose(rng).unwrap();
            frame(
                h2raw::WINDOW_UPDATE,
                0,
                id,
                &rng.random_range(1u32..65536).to_be_bytes(),
            )
        }
        _ => {
            let id = open.choose(rng).copied().unwrap_or(1);
            frame(h2raw::PRIORITY, 0, id, &[0, 0, 0, 0, rng.random()])
        }
    }
}

/// Case `i` of the run seeded `seed`.
pub fn case(seed: u64, i: u64) -> Case {
    let mut rng = StdRng::seed_from_u64(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i ^ 0x5eed_0f42);
    let n = *[1usize, 1, 2, 3].choose(&mut rng).unwrap();
    let streams: Vec<Stream> = (0..n)
        .map(|k| stream(&mut rng, 1 + 2 * k as u32, i))
        .collect();
    // Interleave the streams' units; a stream opens only after the one
    // before it opened (ids rise), and a reset goes after its unit.
    let mut next = vec![0usize; n];
    let mut bytes = Vec::new();
    loop {
        let ready: Vec<usize> = (0..n)
            .filter(|&k| {
                let s = &streams[k];
                let left = s.reset_after.unwrap_or(s.units.len());
                next[k] < left && (k == 0 || next[k - 1] > 0)
            })
            .collect();
        let Some(&k) = ready.choose(&mut rng) else {
            break;
        };
        let s = &streams[k];
        bytes.extend_from_slice(&s.units[next[k]]);
        next[k] += 1;
        if s.reset_after == Some(next[k]) {
            bytes.extend(frame(h2raw::RST_STREAM, 0, s.id, &8u32.to_be_bytes()));
        }
        if rng.random_bool(0.25) {
            // Streams opened and not reset by the client (frames on a
            // stream it reset would be its own protocol error).
            let open: Vec<u32> = (0..n)
                .filter(|&j| next[j] > 0 && streams[j].reset_after.is_none_or(|r| next[j] < r))
                .map(|j| streams[j].id)
                .collect();
            bytes.extend(control(&mut rng, &open));
        }
    }
    Case { streams, bytes }
}
