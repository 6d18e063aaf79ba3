//! Any bytes as an HTTP/2 client's frames (decoded below into HEADERS,
//! CONTINUATION, DATA of any size with END_STREAM anywhere, trailers,
//! RST_STREAM, WINDOW_UPDATE, PING, SETTINGS, PRIORITY and raw bytes),
//! sent over loopback to the real router (`ketama-router`'s engine, run
//! in this process, h2c) in front of a recording HTTP/1 origin. What the
//! origin is handed and what the client reads must hold:
//!
//! - every request the origin reads whole is one a stream sent: no stray
//!   message (a second last-chunk read as a request line), and its body
//!   is exactly the DATA its stream carried;
//! - the router answers a fresh connection afterwards (no worker stuck
//!   or spinning on what the input left behind);
//! - nothing panics.
#![no_main]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use libfuzzer_sys::fuzz_target;

/// A request the origin read whole: its line and body.
type Seen = (String, Vec<u8>);

struct World {
    router: SocketAddr,
    seen: &'static Mutex<Vec<Seen>>,
    /// The body each stream sent, by path, with the run that sent it.
    sent: Mutex<HashMap<String, (u64, Vec<u8>)>>,
}

fn free() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

fn line(r: &mut impl BufRead) -> Option<String> {
    let mut l = Vec::new();
    if r.read_until(b'\n', &mut l).ok()? == 0 || l.last() != Some(&b'\n') {
        return None;
    }
    Some(
        String::from_utf8_lossy(&l)
            .trim_end_matches(['\r', '\n'])
            .to_string(),
    )
}

/// The origin's side of one connection: requests read strictly, each
/// answered 200 with an empty body.
fn serve(c: TcpStream, seen: &Mutex<Vec<Seen>>) -> Option<()> {
    let mut r = BufReader::new(c.try_clone().ok()?);
    let mut w = c;
    loop {
        let first = line(&mut r)?;
        let (mut length, mut chunked) = (None, false);
        loop {
            let h = line(&mut r)?;
            if h.is_empty() {
                break;
            }
            let (n, v) = h.split_once(':').unwrap_or((&h, ""));
            match n.to_ascii_lowercase().as_str() {
                "content-length" => length = v.trim().parse::<usize>().ok(),
                "transfer-encoding" => chunked = v.trim().eq_ignore_ascii_case("chunked"),
                _ => {}
            }
        }
        let mut body = Vec::new();
        if chunked {
            loop {
                let size =
                    usize::from_str_radix(line(&mut r)?.split(';').next()?.trim(), 16).ok()?;
                if size == 0 {
                    while !line(&mut r)?.is_empty() {}
                    break;
                }
                let at = body.len();
                body.resize(at + size, 0);
                r.read_exact(&mut body[at..]).ok()?;
                line(&mut r)?;
            }
        } else if let Some(n) = length {
            body.resize(n, 0);
            r.read_exact(&mut body).ok()?;
        }
        seen.lock().unwrap().push((first, body));
        w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            .ok()?;
    }
}

fn world() -> &'static World {
    static W: OnceLock<World> = OnceLock::new();
    W.get_or_init(|| {
        // libFuzzer's main starts this process, not Rust's, so SIGPIPE
        // keeps its default action (end the process, silently) unless it
        // is taken here: the router's vectored writes (`writev`, which
        // takes no MSG_NOSIGNAL) to a client that already closed raise it.
        // The router's own binary ignores it, as every Rust binary does.
        let pipe = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        signal_hook::flag::register(signal_hook::consts::SIGPIPE, pipe).unwrap();
        let seen: &'static Mutex<Vec<Seen>> = Box::leak(Box::default());
        let origin = TcpListener::bind("127.0.0.1:0").unwrap();
        let o = origin.local_addr().unwrap();
        std::thread::spawn(move || {
            for c in origin.incoming().flatten() {
                std::thread::spawn(move || serve(c, seen));
            }
        });
        let (listen, admin) = (free(), free());
        let text = format!(
            "[server]\nlisten = [\"{listen}\"]\nh2c = true\nclient_body_timeout_ms = 300\nclient_header_timeout_ms = 300\nretries = 0\n\n[admin]\nlisten = \"{admin}\"\nauth = false\n\n[health]\nenabled = false\n\n[[backends]]\naddress = \"{o}\"\n"
        );
        let v = ketama_config::parse(&text, "fuzz").unwrap();
        let source = ketama_router::cell::ConfigSource::Text { name: "fuzz".into(), text };
        let (server, _cell) = ketama_router::server::build(v, source, Default::default()).unwrap();
        std::thread::spawn(move || server.run());
        // Serving once a plain GET is answered.
        for _ in 0..500 {
            if get(listen).is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        World { router: listen, seen, sent: Mutex::default() }
    })
}

/// An HTTP/1.1 GET on a new connection: its status line.
fn get(addr: SocketAddr) -> Option<String> {
    let mut c = TcpStream::connect(addr).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    c.write_all(b"GET /fuzz/canary HTTP/1.1\r\nHost: f\r\nConnection: close\r\n\r\n")
        .ok()?;
    line(&mut BufReader::new(c))
}

fn frame(kind: u8, flags: u8, id: u32, payload: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend([kind, flags]);
    out.extend(id.to_be_bytes());
    out.extend_from_slice(payload);
}

/// A field as an HPACK literal without indexing, new name.
fn literal(n: &[u8], v: &[u8], out: &mut Vec<u8>) {
    out.push(0);
    for s in [n, v] {
        let len = s.len().min(126);
        out.push(len as u8);
        out.extend_from_slice(&s[..len]);
    }
}

/// The client's bytes for `data`, and each stream's DATA by path.
fn frames(data: &[u8], run: u64) -> (Vec<u8>, HashMap<String, Vec<u8>>) {
    let mut out = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    frame(0x4, 0, 0, &[], &mut out);
    let mut bodies: HashMap<String, Vec<u8>> = HashMap::new();
    let mut next_id = 1u32;
    let mut pending_block: Vec<u8> = Vec::new();
    let mut it = data.iter().copied();
    let path = |id: u32| format!("/f{run}/{id}");
    let current = |next: u32| next.saturating_sub(2).max(1);
    while let Some(op) = it.next() {
        let arg = it.next().unwrap_or(0);
        let id = current(next_id);
        match op % 10 {
            0 => {
                let id = next_id;
                next_id += 2;
                let mut block = Vec::new();
                let method: &[u8] = [&b"GET"[..], b"POST", b"PUT", b"HEAD"][usize::from(arg & 3)];
                literal(b":method", method, &mut block);
                literal(b":scheme", b"http", &mut block);
                literal(b":authority", b"f.test", &mut block);
                literal(b":path", path(id).as_bytes(), &mut block);
                if arg & 4 != 0 {
                    let n = it.next().unwrap_or(0);
                    literal(b"content-length", n.to_string().as_bytes(), &mut block);
                }
                if arg & 8 != 0 {
                    literal(b"x-f", &[it.next().unwrap_or(b'a')], &mut block);
                }
                bodies.entry(path(id)).or_default();
                // Split: part now, the rest in CONTINUATION (op 1).
                let cut = if arg & 16 != 0 {
                    block.len() / 2
                } else {
                    block.len()
                };
                let end_headers = if cut == block.len() { 0x4 } else { 0 };
                frame(0x1, end_headers | (arg >> 7), id, &block[..cut], &mut out);
                pending_block = block[cut..].to_vec();
            }
            1 => {
                frame(0x9, 0x4, id, &pending_block, &mut out);
                pending_block.clear();
            }
            2 => {
                let n = usize::from(it.next().unwrap_or(0)) * usize::from(arg & 15);
                let payload: Vec<u8> = (0..n).map(|i| b'a' + (i % 26) as u8).collect();
                bodies
                    .entry(path(id))
                    .or_default()
                    .extend_from_slice(&payload);
                frame(0x0, arg >> 7, id, &payload, &mut out);
            }
            3 => {
                let mut block = Vec::new();
                literal(b"x-trailer", &[b'a' + arg % 26], &mut block);
                frame(0x1, 0x5, id, &block, &mut out);
            }
            4 => frame(0x3, 0, id, &u32::from(arg).to_be_bytes(), &mut out),
            5 => {
                let target = if arg & 1 != 0 { id } else { 0 };
                frame(
                    0x8,
                    0,
                    target,
                    &u32::from(it.next().unwrap_or(1)).to_be_bytes(),
                    &mut out,
                );
            }
            6 => frame(0x6, arg & 1, 0, &[arg; 8], &mut out),
            7 => frame(
                0x4,
                0,
                0,
                &[0, (arg % 7) + 1, 0, 0, 0, it.next().unwrap_or(0)],
                &mut out,
            ),
            8 => frame(0x2, 0, id, &[0, 0, 0, arg & 1, arg], &mut out),
            _ => {
                let n = usize::from(arg % 32);
                out.extend(it.by_ref().take(n));
            }
        }
    }
    (out, bodies)
}

fuzz_target!(|data: &[u8]| {
    static RUN: AtomicU64 = AtomicU64::new(0);
    let w = world();
    let run = RUN.fetch_add(1, Relaxed);
    let (bytes, bodies) = frames(data, run);
    w.sent
        .lock()
        .unwrap()
        .extend(bodies.into_iter().map(|(p, b)| (p, (run, b))));
    if let Ok(mut c) = TcpStream::connect(w.router) {
        let _ = c.set_read_timeout(Some(Duration::from_secs(3)));
        let _ = c.write_all(&bytes);
        let _ = c.shutdown(std::net::Shutdown::Write);
        let mut sink = [0u8; 65536];
        while matches!(c.read(&mut sink), Ok(n) if n > 0) {}
    }
    assert!(
        get(w.router).is_some_and(|l| l.starts_with("HTTP/1.1 200")),
        "the router stopped answering"
    );
    let seen = std::mem::take(&mut *w.seen.lock().unwrap());
    let mut sent = w.sent.lock().unwrap();
    for (first, body) in seen {
        let path = first.split(' ').nth(1).unwrap_or("");
        if path == "/fuzz/canary" {
            continue;
        }
        let expected = sent.get(path).map(|(_, b)| b);
        assert!(
            expected.is_some(),
            "the origin read a request no stream sent: {first:?}"
        );
        assert!(
            expected == Some(&body),
            "{first}: the origin got {} body bytes, the stream sent {:?}",
            body.len(),
            expected.map(Vec::len)
        );
    }
    // Keep the last runs' streams: a request may reach the origin after
    // its run ended.
    sent.retain(|_, (r, _)| *r + 64 > run);
});
