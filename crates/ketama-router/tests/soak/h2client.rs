//! The soak's HTTP/2 client (h2c, raw frames): on one connection, by
//! turns, an upload ended by an empty DATA frame with END_STREAM (what
//! `curl -T -` sends), a POST ended by trailers, a GET after a stream
//! it opened and reset at once (rapid reset's shape), and a gRPC-shaped
//! call (`application/grpc`, `te: trailers`, `grpc-timeout`, a framed
//! message cut across two DATA frames; the router's own refusal of it is
//! trailers-only, `grpc-status` 14). Each answer is
//! judged as the HTTP/1 clients' are: a whole 200 from the backend the
//! router named, with that backend's body for the target.

use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::client::Outcome;
use crate::common::chaos::body_for;
use crate::common::h2raw::{self, frame, headers, request, Reader, DATA, END_STREAM, RST_STREAM};

/// A connection and the next stream id on it.
pub struct H2Conn {
    c: TcpStream,
    reader: Reader,
    next: u32,
}

/// Streams one connection opens before the client opens another.
const STREAMS_PER_CONNECTION: u32 = 200;

/// Request `i` to `target`: what it came to, and the backend named.
pub fn exchange(
    conn: &mut Option<H2Conn>,
    addr: SocketAddr,
    target: &str,
    i: u64,
) -> (Option<u16>, Outcome) {
    if conn.as_ref().is_none_or(|c| {
        c.next > 2 * STREAMS_PER_CONNECTION
            || c.reader.read.closed
            || c.reader.read.goaway.is_some()
    }) {
        let c = match TcpStream::connect(addr) {
            Ok(c) => c,
            Err(e) => return (None, Outcome::Transport(format!("connect: {e}"))),
        };
        let mut c = c;
        let mut hello = h2raw::PREFACE.to_vec();
        hello.extend(frame(h2raw::SETTINGS, 0, 0, &[]));
        if c.write_all(&hello).is_err() {
            return (None, Outcome::Transport("h2c preface refused".into()));
        }
        *conn = Some(H2Conn {
            c,
            reader: Reader::default(),
            next: 1,
        });
    }
    let h = conn.as_mut().unwrap();
    let id = h.next;
    let mut bytes = Vec::new();
    match i % 4 {
        // An upload as curl -T - sends it.
        0 => {
            bytes.extend(headers(id, &request("PUT", target, &[]), false));
            bytes.extend(frame(DATA, 0, id, b"soak upload\n"));
            bytes.extend(frame(DATA, END_STREAM, id, &[]));
        }
        // A body ended by trailers.
        1 => {
            bytes.extend(headers(id, &request("POST", target, &[]), false));
            bytes.extend(frame(DATA, 0, id, b"soak"));
            let t: [(&[u8], &[u8]); 1] = [(b"x-soak", b"1")];
            bytes.extend(headers(id, &t, true));
        }
        // A gRPC-shaped call.
        2 => {
            let grpc = [
                ("content-type", "application/grpc"),
                ("te", "trailers"),
                ("grpc-timeout", "10S"),
            ];
            bytes.extend(headers(id, &request("POST", target, &grpc), false));
            bytes.extend(frame(DATA, 0, id, &[0, 0, 0, 0, 9, b's', b'o']));
            bytes.extend(frame(DATA, END_STREAM, id, b"ak grpc"));
        }
        // A stream reset at once, then the GET.
        _ => {
            bytes.extend(headers(
                id,
                &request("GET", &format!("{target}-reset"), &[]),
                true,
            ));
            bytes.extend(frame(RST_STREAM, 0, id, &8u32.to_be_bytes()));
            h.next += 2;
            bytes.extend(headers(id + 2, &request("GET", target, &[]), true));
        }
    }
    let id = h.next;
    h.next += 2;
    if h.c.write_all(&bytes).is_err() {
        *conn = None;
        return (None, Outcome::Transport("h2c write failed".into()));
    }
    let done = h
        .reader
        .until(&mut h.c, Duration::from_secs(10), |r| r.stream(id).done());
    let s = h.reader.read.stream(id);
    h.reader.read.streams.clear();
    let backend = s
        .fields
        .iter()
        .find(|(n, _)| n == "x-ketama-backend")
        .and_then(|(_, v)| v.rsplit(':').next()?.parse().ok());
    let own = own_grpc_answer(&s.fields).filter(|_| s.status == Some(200) && done);
    let outcome = match s.status {
        // The router's own answer to the gRPC-shaped call.
        Some(200) if own.is_some() => own.unwrap_or(Outcome::Ok),
        _ if !done => {
            Outcome::Transport(format!("no end of stream {id}: {:?}", h.reader.read.goaway))
        }
        None => Outcome::Transport(format!("stream {id} reset ({:?})", s.reset)),
        Some(502) if s.body.windows(12).any(|w| w == b"no healthy b") => Outcome::Exhausted,
        Some(200) if s.reset.is_some() => Outcome::Truncated,
        Some(200) if backend.is_none_or(|p| s.body != body_for(p, target)) => Outcome::WrongBody,
        Some(200) => Outcome::Ok,
        Some(st) => Outcome::Status(st),
    };
    if outcome != Outcome::Ok {
        *conn = None;
    }
    (backend, outcome)
}

/// The router's own trailers-only answer to a gRPC call (`server:
/// ketama-router`, `grpc-status` 14 or 4), as the HTTP answer it stands
/// for: no backend left, a 504 (a timeout, its words say), else a 502.
fn own_grpc_answer(fields: &[(String, String)]) -> Option<Outcome> {
    let field = |name: &str| {
        fields
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    if field("server") != Some("ketama-router") {
        return None;
    }
    let words = field("grpc-message")?;
    Some(match field("grpc-status")? {
        "14" if words.contains("no healthy b") => Outcome::Exhausted,
        "14" if words.contains(" in time") => Outcome::Status(504),
        "14" => Outcome::Status(502),
        "4" => Outcome::Status(504),
        _ => return None,
    })
}
