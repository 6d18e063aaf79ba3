//! An HTTP/1 origin that records each request head it is handed (its
//! line and its fields, names lower-cased) and then behaves as the path's
//! first segment says, to make a backend fail in each way the router
//! must answer for:
//!
//! | path | the origin |
//! |---|---|
//! | `/ok/...` | reads the body, answers `200` with `ok`, keeps the connection |
//! | `/reset/...` | closes the connection after the head, answering nothing |
//! | `/cut/...` | reads the body, sends a head saying 1,000 bytes, 10 of them, and closes |
//! | `/early/...` | answers `413` as soon as it has the head, without reading the body, and closes |
//! | `/wait/...` | reads the body for as long as it comes, then answers `200` |

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request head as the origin read it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Head {
    /// The request line.
    pub line: String,
    /// The fields, names lower-cased, in order.
    pub fields: Vec<(String, String)>,
}

/// A scripted origin (see the module docs).
pub struct Scripted {
    /// Where it listens.
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Head>>>,
}

impl Scripted {
    /// Starts one on a free loopback port.
    pub fn start() -> Scripted {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        std::thread::spawn(move || {
            for c in l.incoming().flatten() {
                let s = s.clone();
                std::thread::spawn(move || {
                    let _ = serve(c, &s);
                });
            }
        });
        Scripted { addr, seen }
    }

    /// The heads it read since the last call.
    pub fn take(&self) -> Vec<Head> {
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

fn serve(c: TcpStream, seen: &Mutex<Vec<Head>>) -> std::io::Result<()> {
    c.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut r = BufReader::new(c.try_clone()?);
    let mut w = c;
    loop {
        let mut line = String::new();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let line = line.trim_end().to_string();
        let mut fields = Vec::new();
        loop {
            let mut f = String::new();
            r.read_line(&mut f)?;
            let f = f.trim_end();
            if f.is_empty() {
                break;
            }
            let (n, v) = f.split_once(':').unwrap_or((f, ""));
            fields.push((n.to_ascii_lowercase(), v.trim().to_string()));
        }
        let value = |name: &str| {
            fields
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
        };
        let length: Option<usize> = value("content-length").and_then(|v| v.parse().ok());
        let chunked = value("transfer-encoding").is_some();
        let path = line.split(' ').nth(1).unwrap_or("/").to_string();
        seen.lock().unwrap().push(Head { line, fields });
        let kind = path.split('/').nth(1).unwrap_or("");
        match kind {
            "reset" => return Ok(()),
            "early" => {
                w.write_all(
                    b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbig!",
                )?;
                // Shut the write side and drop what still comes, as a
                // server that refused an upload does, so the answer is
                // not lost to a reset.
                w.shutdown(std::net::Shutdown::Write)?;
                let mut sink = [0u8; 65536];
                while r.read(&mut sink).unwrap_or(0) > 0 {}
                return Ok(());
            }
            _ => {}
        }
        read_body(&mut r, length, chunked)?;
        match kind {
            "cut" => {
                w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n0123456789")?;
                return Ok(());
            }
            _ => w.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")?,
        }
    }
}

fn read_body(r: &mut impl BufRead, length: Option<usize>, chunked: bool) -> std::io::Result<()> {
    if !chunked {
        let mut body = vec![0u8; length.unwrap_or(0)];
        return r.read_exact(&mut body);
    }
    loop {
        let mut size = String::new();
        r.read_line(&mut size)?;
        let n =
            usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16).unwrap_or(0);
        let mut data = vec![0u8; n + 2];
        if n == 0 {
            // The last chunk: its (empty) trailer section's line end.
            let mut end = String::new();
            r.read_line(&mut end)?;
            return Ok(());
        }
        r.read_exact(&mut data)?;
    }
}
