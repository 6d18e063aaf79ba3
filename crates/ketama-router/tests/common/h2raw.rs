//! A raw HTTP/2 client for tests: frames written as bytes, so that a case
//! can hold what no HTTP/2 library would send (an empty last DATA frame,
//! trailers without DATA, a reset at any point, control-frame floods),
//! and a reader of what came back, stream by stream. Header blocks are
//! encoded here as literals without indexing (RFC 7541 section 6.2.2), so
//! that blocks can be split, repeated or dropped without a dynamic table
//! going out of step; the peer's blocks are decoded with `hpack`.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;

/// One frame's bytes.
pub fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes()[1..].to_vec();
    f.extend([kind, flags]);
    f.extend(stream.to_be_bytes());
    f.extend(payload);
    f
}

fn int(mut v: usize, prefix_bits: u8, first: u8, out: &mut Vec<u8>) {
    let max = (1usize << prefix_bits) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128 + 128) as u8);
        v /= 128;
    }
    out.push(v as u8);
}

/// A header block of `fields`, each a literal without indexing with a
/// new name, any bytes as they are.
pub fn block(fields: &[(&[u8], &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, v) in fields {
        out.push(0);
        int(n.len(), 7, 0, &mut out);
        out.extend_from_slice(n);
        int(v.len(), 7, 0, &mut out);
        out.extend_from_slice(v);
    }
    out
}

/// A request's fields: its pseudo-headers, then `extra`.
pub fn request<'a>(
    method: &'a str,
    path: &'a str,
    extra: &[(&'a str, &'a str)],
) -> Vec<(&'a [u8], &'a [u8])> {
    let mut v: Vec<(&[u8], &[u8])> = vec![
        (b":method", method.as_bytes()),
        (b":scheme", b"http"),
        (b":authority", b"a.test"),
        (b":path", path.as_bytes()),
    ];
    v.extend(extra.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())));
    v
}

/// HEADERS (`END_HEADERS`, and `END_STREAM` with `end`) of `fields`.
pub fn headers(stream: u32, fields: &[(&[u8], &[u8])], end: bool) -> Vec<u8> {
    let flags = END_HEADERS | if end { END_STREAM } else { 0 };
    frame(HEADERS, flags, stream, &block(fields))
}

/// A connection that sent its preface and an empty SETTINGS frame.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_nodelay(true).unwrap();
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &[]));
    c.write_all(&hello).unwrap();
    c
}

/// What came back on one stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamRead {
    /// The final status.
    pub status: Option<u16>,
    /// Response fields (the final head's), lower-case names.
    pub fields: Vec<(String, String)>,
    /// The DATA bytes.
    pub body: Vec<u8>,
    /// Trailing HEADERS' fields.
    pub trailers: Vec<(String, String)>,
    /// RST_STREAM's error code.
    pub reset: Option<u32>,
    /// END_STREAM came.
    pub ended: bool,
}

impl StreamRead {
    /// It ended, one way or another.
    pub fn done(&self) -> bool {
        self.ended || self.reset.is_some()
    }
}

/// What came back on a connection.
#[derive(Debug, Default)]
pub struct ConnRead {
    pub streams: BTreeMap<u32, StreamRead>,
    /// GOAWAY's last stream id and error code.
    pub goaway: Option<(u32, u32)>,
    /// The peer closed (or reset) the connection.
    pub closed: bool,
    /// The peer's SETTINGS came (and were acknowledged).
    pub settings: bool,
}

impl ConnRead {
    /// Stream `id`'s answer so far.
    pub fn stream(&self, id: u32) -> StreamRead {
        self.streams.get(&id).cloned().unwrap_or_default()
    }
}

/// Reads frames from `c` (acknowledging SETTINGS and answering PINGs)
/// into `into` until `done` says so, the connection ends, or `limit`
/// passes; whether `done` was reached.
pub struct Reader {
    decoder: hpack::Decoder<'static>,
    buf: Vec<u8>,
    pub read: ConnRead,
    /// Writes nothing (no acknowledgements, no window updates): for a
    /// test whose other thread writes the connection, which a frame
    /// written from here would cut in two.
    pub quiet: bool,
}

impl Default for Reader {
    fn default() -> Self {
        Reader {
            decoder: hpack::Decoder::new(),
            buf: Vec::new(),
            read: ConnRead::default(),
            quiet: false,
        }
    }
}

impl Reader {
    /// Reads until `done(&self.read)`, the connection's end or `limit`;
    /// whether `done` was reached.
    pub fn until(
        &mut self,
        c: &mut TcpStream,
        limit: Duration,
        done: impl Fn(&ConnRead) -> bool,
    ) -> bool {
        let deadline = Instant::now() + limit;
        c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        loop {
            if done(&self.read) {
                return true;
            }
            if self.read.closed || Instant::now() >= deadline {
                return false;
            }
            let mut b = [0u8; 65536];
            match c.read(&mut b) {
                Ok(0) => self.read.closed = true,
                Ok(n) => {
                    self.buf.extend_from_slice(&b[..n]);
                    self.frames(c);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => self.read.closed = true,
            }
        }
    }

    fn frames(&mut self, c: &mut TcpStream) {
        let buf = std::mem::take(&mut self.buf);
        let mut at = 0;
        while buf.len() - at >= 9 {
            let h = &buf[at..at + 9];
            let len = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
            if buf.len() - at < 9 + len {
                break;
            }
            let (kind, flags) = (h[3], h[4]);
            let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
            let payload = &buf[at + 9..at + 9 + len];
            at += 9 + len;
            self.frame(c, kind, flags, id, payload);
        }
        self.buf = buf[at..].to_vec();
    }

    fn frame(&mut self, c: &mut TcpStream, kind: u8, flags: u8, id: u32, payload: &[u8]) {
        if kind == SETTINGS && flags & 1 == 0 {
            self.read.settings = true;
        }
        if self.quiet && matches!(kind, SETTINGS | PING | DATA) {
            if kind == DATA {
                let s = self.read.streams.entry(id).or_default();
                s.body.extend_from_slice(payload);
                s.ended |= flags & END_STREAM != 0;
            }
            return;
        }
        {
            match kind {
                SETTINGS if flags & 1 == 0 => {
                    let _ = c.write_all(&frame(SETTINGS, 1, 0, &[]));
                }
                PING if flags & 1 == 0 => {
                    let _ = c.write_all(&frame(PING, 1, 0, payload));
                }
                HEADERS => {
                    let fields = self.decoder.decode(payload).unwrap_or_default();
                    let s = self.read.streams.entry(id).or_default();
                    let fields: Vec<(String, String)> = fields
                        .iter()
                        .map(|(n, v)| {
                            (
                                String::from_utf8_lossy(n).into_owned(),
                                String::from_utf8_lossy(v).into_owned(),
                            )
                        })
                        .collect();
                    let status = fields
                        .iter()
                        .find(|(n, _)| n == ":status")
                        .and_then(|(_, v)| v.parse().ok());
                    match status {
                        // An interim head: the final one is still to come.
                        Some(st) if (100..200).contains(&st) => {}
                        Some(st) => {
                            s.status = Some(st);
                            s.fields = fields;
                        }
                        None => s.trailers = fields,
                    }
                    s.ended |= flags & END_STREAM != 0;
                }
                DATA => {
                    let s = self.read.streams.entry(id).or_default();
                    s.body.extend_from_slice(payload);
                    s.ended |= flags & END_STREAM != 0;
                    // Give the window back, for bodies larger than one.
                    if !payload.is_empty() {
                        let inc = (payload.len() as u32).to_be_bytes();
                        let mut w = frame(WINDOW_UPDATE, 0, 0, &inc);
                        w.extend(frame(WINDOW_UPDATE, 0, id, &inc));
                        let _ = c.write_all(&w);
                    }
                }
                RST_STREAM if payload.len() == 4 => {
                    let code = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]]);
                    self.read.streams.entry(id).or_default().reset = Some(code);
                }
                GOAWAY if payload.len() >= 8 => {
                    let last = u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                        & 0x7fff_ffff;
                    let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
                    self.read.goaway = Some((last, code));
                }
                _ => {}
            }
        }
    }
}

/// Sends `bytes` on a new connection and reads until every stream in
/// `streams` ended (or the connection did, or `limit` passed).
pub fn exchange(addr: SocketAddr, bytes: &[u8], streams: &[u32], limit: Duration) -> ConnRead {
    let mut c = connect(addr);
    c.write_all(bytes).unwrap();
    let mut r = Reader::default();
    r.until(&mut c, limit, |read| {
        streams
            .iter()
            .all(|id| read.streams.get(id).is_some_and(StreamRead::done))
    });
    r.read
}
