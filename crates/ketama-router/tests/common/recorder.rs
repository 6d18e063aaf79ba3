//! An origin that records what it is handed: every request's line, its
//! header lines as written (name, and value after `": "`), its framing
//! and its body bytes (chunked bodies decoded), in arrival order. It
//! answers each request `200` with an empty body and keeps connections
//! alive, so that a proxy in front of it pools them. A request whose
//! connection ended before its body did is recorded as incomplete.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// How a recorded request framed its body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body header.
    None,
    /// `Content-Length: N`.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// One request as the origin read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// The request line, without its line end.
    pub line: Vec<u8>,
    /// Header lines: the name as written, the value after `": "`.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// The body's framing.
    pub framing: Framing,
    /// The body (decoded when chunked).
    pub body: Vec<u8>,
    /// A chunked body's trailer lines: name as written, value after `": "`.
    pub trailers: Vec<(Vec<u8>, Vec<u8>)>,
    /// Whether the whole request arrived.
    pub complete: bool,
}

impl Recorded {
    /// The values of header `name` (any case), in order.
    pub fn values(&self, name: &str) -> Vec<&[u8]> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name.as_bytes()))
            .map(|(_, v)| v.as_slice())
            .collect()
    }
}

/// A recording origin (see the module docs).
#[derive(Clone)]
pub struct Recorder {
    /// Where it listens.
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Recorded>>>,
}

impl Recorder {
    /// Starts one on a free loopback port.
    pub fn start() -> Recorder {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || serve(c, &s));
            }
        });
        Recorder { addr, seen }
    }

    /// What it recorded since the last call.
    pub fn take(&self) -> Vec<Recorded> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }

    /// What it recorded since the last call, once that is at least `n`
    /// requests (or `limit` passed).
    pub fn take_at_least(&self, n: usize, limit: std::time::Duration) -> Vec<Recorded> {
        let deadline = std::time::Instant::now() + limit;
        while self.seen.lock().unwrap().len() < n && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        self.take()
    }

    /// How many it recorded since the last [`Recorder::take`].
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }
}

fn serve(c: TcpStream, seen: &Mutex<Vec<Recorded>>) {
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut w = c;
    loop {
        let Some(line) = read_line(&mut r) else {
            return;
        };
        let mut rec = Recorded {
            line,
            headers: Vec::new(),
            framing: Framing::None,
            body: Vec::new(),
            trailers: Vec::new(),
            complete: false,
        };
        loop {
            let Some(h) = read_line(&mut r) else {
                seen.lock().unwrap().push(rec);
                return;
            };
            if h.is_empty() {
                break;
            }
            let colon = h.iter().position(|&b| b == b':').unwrap_or(h.len());
            let value = h.get(colon + 1..).unwrap_or(&[]);
            let value = value.strip_prefix(b" ").unwrap_or(value);
            rec.headers.push((h[..colon].to_vec(), value.to_vec()));
        }
        let te = rec.values("transfer-encoding").first().map(|v| v.to_vec());
        let cl = rec.values("content-length").first().map(|v| v.to_vec());
        let ok = if te.is_some_and(|v| v.eq_ignore_ascii_case(b"chunked")) {
            rec.framing = Framing::Chunked;
            read_chunked(&mut r, &mut rec.body, &mut rec.trailers)
        } else if let Some(n) = cl.and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok()) {
            rec.framing = Framing::Length(n);
            rec.body = vec![0; n as usize];
            r.read_exact(&mut rec.body).is_ok()
        } else {
            true
        };
        rec.complete = ok;
        seen.lock().unwrap().push(rec);
        if !ok
            || w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                .is_err()
        {
            return;
        }
    }
}

/// A line without its `\r\n` (or `\n`); `None` at the connection's end.
fn read_line(r: &mut impl BufRead) -> Option<Vec<u8>> {
    let mut line = Vec::new();
    if r.read_until(b'\n', &mut line).ok()? == 0 || line.last() != Some(&b'\n') {
        return None;
    }
    line.pop();
    if line.last() == Some(&b'\r') {
        line.pop();
    }
    Some(line)
}

/// Reads a chunked body (strictly: both proxies write it well formed).
fn read_chunked(
    r: &mut impl BufRead,
    body: &mut Vec<u8>,
    trailers: &mut Vec<(Vec<u8>, Vec<u8>)>,
) -> bool {
    loop {
        let Some(size) = read_line(r) else {
            return false;
        };
        let size = std::str::from_utf8(&size).unwrap_or("x");
        let size = size.split(';').next().unwrap_or("x").trim();
        let Ok(n) = usize::from_str_radix(size, 16) else {
            return false;
        };
        if n == 0 {
            // Trailer lines, then the empty one.
            loop {
                match read_line(r) {
                    Some(l) if l.is_empty() => return true,
                    Some(l) => {
                        let colon = l.iter().position(|&b| b == b':').unwrap_or(l.len());
                        let value = l.get(colon + 1..).unwrap_or(&[]);
                        let value = value.strip_prefix(b" ").unwrap_or(value);
                        trailers.push((l[..colon].to_vec(), value.to_vec()));
                    }
                    None => return false,
                }
            }
        }
        let at = body.len();
        body.resize(at + n, 0);
        if r.read_exact(&mut body[at..]).is_err() || read_line(r) != Some(Vec::new()) {
            return false;
        }
    }
}
