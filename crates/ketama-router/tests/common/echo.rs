//! An origin that tells which origin a request reached and how.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener};

/// An origin that answers every request with `saw PORT LINE`, the request
/// line as it arrived (a body is read by its Content-Length), followed by
/// ` +expect` when the request had an `Expect` field and ` +prev=VALUE`
/// when it had an `x-ketama-previous-owner` field, on keep-alive
/// connections.
pub fn echo_origin() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            std::thread::spawn(move || {
                let mut r = BufReader::new(c.try_clone().unwrap());
                let mut w = c;
                loop {
                    let mut line = Vec::new();
                    if r.read_until(b'\n', &mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if line.trim_ascii().is_empty() {
                        continue;
                    }
                    let (mut length, mut expect, mut prev) = (0usize, false, None);
                    loop {
                        let mut h = Vec::new();
                        if r.read_until(b'\n', &mut h).unwrap_or(0) == 0
                            || h.trim_ascii().is_empty()
                        {
                            break;
                        }
                        let h = String::from_utf8_lossy(&h).to_ascii_lowercase();
                        if let Some(v) = h.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        expect |= h.starts_with("expect:");
                        if let Some(v) = h.strip_prefix("x-ketama-previous-owner:") {
                            prev = Some(v.trim().to_string());
                        }
                    }
                    let mut body = vec![0u8; length];
                    if r.read_exact(&mut body).is_err() {
                        return;
                    }
                    let mut body = format!("saw {} ", addr.port()).into_bytes();
                    body.extend_from_slice(line.trim_ascii());
                    if expect {
                        body.extend_from_slice(b" +expect");
                    }
                    if let Some(p) = prev {
                        body.extend_from_slice(format!(" +prev={p}").as_bytes());
                    }
                    let mut resp =
                        format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len())
                            .into_bytes();
                    resp.extend_from_slice(&body);
                    if w.write_all(&resp).is_err() {
                        return;
                    }
                }
            });
        }
    });
    addr
}
