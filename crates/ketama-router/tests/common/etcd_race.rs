//! A TCP proxy in front of a real etcd that loses a controller's race on
//! purpose: it forwards every request as it came, except that before the
//! `nth` transaction writing a given key it writes that key itself,
//! straight to etcd, so the transaction's revision condition no longer
//! holds. What the controller meets is what it would meet if an operator
//! wrote the rollout between its read and its transaction.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use base64::Engine as _;
use ketama_fleet::etcd::Client;

pub struct RaceProxy {
    pub url: String,
    raced: Arc<AtomicUsize>,
}

impl RaceProxy {
    /// Forwards to `etcd` (an `http://host:port` URL); before the `nth`
    /// (1-based) transaction that writes `key`, `client` writes `value`
    /// to it.
    pub fn start(etcd: &str, client: Client, key: &str, nth: usize, value: Vec<u8>) -> RaceProxy {
        let upstream: SocketAddr = etcd.trim_start_matches("http://").parse().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let quoted = format!(
            "\"{}\"",
            base64::engine::general_purpose::STANDARD.encode(key.as_bytes())
        );
        let seen = Arc::new(AtomicUsize::new(0));
        let raced = Arc::new(AtomicUsize::new(0));
        let shared = Arc::new((client, key.to_string(), value));
        {
            let raced = raced.clone();
            std::thread::spawn(move || {
                for conn in listener.incoming() {
                    let Ok(conn) = conn else { continue };
                    let (seen, raced, shared, quoted) =
                        (seen.clone(), raced.clone(), shared.clone(), quoted.clone());
                    std::thread::spawn(move || {
                        let _ = relay(conn, upstream, |path, body| {
                            let writes_key =
                                path.ends_with("/kv/txn") && memchr_all(body, quoted.as_bytes());
                            if writes_key && seen.fetch_add(1, SeqCst) + 1 == nth {
                                let (client, key, value) = &*shared;
                                client.put(key, value, None).unwrap();
                                raced.fetch_add(1, SeqCst);
                            }
                        });
                    });
                }
            });
        }
        RaceProxy { url, raced }
    }

    /// Whether the race was run.
    pub fn raced(&self) -> bool {
        self.raced.load(SeqCst) > 0
    }
}

fn memchr_all(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Copies one client connection's requests to etcd (each shown to
/// `before` first) and etcd's bytes back as they come.
fn relay(
    conn: TcpStream,
    upstream: SocketAddr,
    mut before: impl FnMut(&str, &[u8]),
) -> std::io::Result<()> {
    let mut up = TcpStream::connect(upstream)?;
    let (mut back, mut down) = (up.try_clone()?, conn.try_clone()?);
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut back, &mut down);
        let _ = down.shutdown(std::net::Shutdown::Both);
    });
    let mut reader = BufReader::new(conn);
    loop {
        let mut head = Vec::new();
        let mut length = 0usize;
        loop {
            let mut line = Vec::new();
            if reader.read_until(b'\n', &mut line)? == 0 {
                let _ = up.shutdown(std::net::Shutdown::Write);
                return Ok(());
            }
            let text = String::from_utf8_lossy(&line).to_ascii_lowercase();
            if let Some(v) = text.strip_prefix("content-length:") {
                length = v.trim().parse().unwrap_or(0);
            }
            head.extend_from_slice(&line);
            if line == b"\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let path = String::from_utf8_lossy(&head)
            .split(' ')
            .nth(1)
            .unwrap_or("")
            .to_string();
        before(&path, &body);
        up.write_all(&head)?;
        up.write_all(&body)?;
    }
}
