//! The soak's clients: HTTP/1.1 over keep-alive connections, a new
//! connection per request, TLS (keep-alive, a new handshake every
//! [`TLS_REQUESTS_PER_CONNECTION`] requests, so certificate rotations meet
//! fresh handshakes), and HTTP/2 with prior knowledge (uploads, trailers
//! and resets: [`crate::h2client`]), each answer recorded as the client saw it
//! (status, the backend the router named, whether the body was whole and
//! from that backend) with when it started and ended.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::chaos::body_for;

/// The words of the router's 502 when every candidate was out of rotation.
const EXHAUSTED: &[u8] = b"no healthy backend left for this key";

/// What one request came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A whole 200 from the backend the router named.
    Ok,
    /// Any other status (the router's own 502/504 among them).
    Status(u16),
    /// The router's own 502 saying no candidate of the key was left in
    /// rotation (its body: "no healthy backend left for this key").
    Exhausted,
    /// A 200 whose body stopped short (the connection closed under it).
    Truncated,
    /// A 200 whose body is not what the named backend sends for it.
    WrongBody,
    /// No answer: the router refused, reset or said nothing.
    Transport(String),
}

/// One request as the client saw it.
#[derive(Clone, Debug)]
pub struct Record {
    /// Which router it went through.
    pub router: usize,
    /// Its target.
    pub target: String,
    /// When it was sent and when its answer ended.
    pub start: Instant,
    /// When the answer ended (or failed).
    pub end: Instant,
    /// The port in `x-ketama-backend`, if any.
    pub backend: Option<u16>,
    /// What it came to.
    pub outcome: Outcome,
}

/// Requests a TLS client sends on one connection before it opens another.
pub const TLS_REQUESTS_PER_CONNECTION: u64 = 50;

/// The name the soak's certificates carry and its TLS clients ask for.
pub const TLS_NAME: &str = "soak.test";

/// A connection, plain or TLS.
trait Conn: Read + Write + Send {}
impl Conn for TcpStream {}
impl Conn for rustls::StreamOwned<rustls::ClientConnection, TcpStream> {}

/// How a client reaches its router.
#[derive(Clone)]
enum Via {
    Plain { keep_alive: bool },
    Tls(Arc<rustls::ClientConfig>),
    H2c,
}

impl Via {
    fn tag(&self) -> &'static str {
        match self {
            Via::Plain { keep_alive: true } => "k",
            Via::Plain { keep_alive: false } => "n",
            Via::Tls(_) => "t",
            Via::H2c => "h",
        }
    }

    fn keep_alive(&self) -> bool {
        !matches!(self, Via::Plain { keep_alive: false })
    }
}

/// A TLS client configuration trusting only the CA in `ca_pem`.
pub fn tls_config(ca_pem: &std::path::Path) -> Arc<rustls::ClientConfig> {
    use rustls_pki_types::pem::PemObject;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_file_iter(ca_pem).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    Arc::new(
        rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// Whether a request's target was sent over TLS.
pub fn over_tls(target: &str) -> bool {
    target.split('/').nth(2).is_some_and(|t| t.ends_with('t'))
}

/// Whether a request's target was sent over h2c.
pub fn over_h2c(target: &str) -> bool {
    target.split('/').nth(2).is_some_and(|t| t.ends_with('h'))
}

/// Client threads until stopped, their records collected.
pub struct Clients {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<(Vec<Record>, u64)>>,
}

impl Clients {
    /// For each router (its plain and its TLS address), one client on a
    /// keep-alive connection, one opening a new connection per request,
    /// one over TLS trusting `tls`, and one over h2c.
    pub fn start(routers: &[(SocketAddr, SocketAddr)], tls: &Arc<rustls::ClientConfig>) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for (n, &(plain, secure)) in routers.iter().enumerate() {
            for (addr, via) in [
                (plain, Via::Plain { keep_alive: true }),
                (plain, Via::Plain { keep_alive: false }),
                (secure, Via::Tls(tls.clone())),
                (plain, Via::H2c),
            ] {
                let stop = stop.clone();
                threads.push(std::thread::spawn(move || run(n, addr, &via, &stop)));
            }
        }
        Clients { stop, threads }
    }

    /// Stops them: every record, and how many kept-alive connections the
    /// router closed just as a request went out (retried on a new one, as
    /// HTTP lets a client do when nothing came back).
    pub fn stop(self) -> (Vec<Record>, u64) {
        self.stop.store(true, Relaxed);
        let mut all = Vec::new();
        let mut raced = 0;
        for t in self.threads {
            let (r, n) = t.join().unwrap();
            all.extend(r);
            raced += n;
        }
        all.sort_by_key(|r| r.start);
        (all, raced)
    }
}

fn run(router: usize, addr: SocketAddr, via: &Via, stop: &AtomicBool) -> (Vec<Record>, u64) {
    let tag = via.tag();
    let mut records = Vec::new();
    let mut conn: Option<BufReader<Box<dyn Conn>>> = None;
    let mut h2: Option<crate::h2client::H2Conn> = None;
    let mut raced = 0;
    let mut i = 0u64;
    while !stop.load(Relaxed) {
        let target = format!("/soak/{router}{tag}/{i}?v={}", i % 13);
        if matches!(via, Via::Tls(_)) && i % TLS_REQUESTS_PER_CONNECTION == 0 {
            conn = None;
        }
        i += 1;
        let start = Instant::now();
        if matches!(via, Via::H2c) {
            let (backend, outcome) = crate::h2client::exchange(&mut h2, addr, &target, i);
            let end = Instant::now();
            records.push(Record {
                router,
                target,
                start,
                end,
                backend,
                outcome,
            });
            continue;
        }
        let reused = conn.is_some();
        let mut got = exchange(&mut conn, addr, &target, via);
        if reused && matches!(&got, Err(Silent)) {
            raced += 1;
            conn = None;
            got = exchange(&mut conn, addr, &target, via);
        }
        let (backend, outcome) = match got {
            Ok(v) => v,
            Err(Silent) => (None, Outcome::Transport("closed without an answer".into())),
        };
        if outcome != Outcome::Ok {
            conn = None;
        }
        records.push(Record {
            router,
            target,
            start,
            end: Instant::now(),
            backend,
            outcome,
        });
    }
    (records, raced)
}

/// Nothing at all came back.
struct Silent;

fn exchange(
    conn: &mut Option<BufReader<Box<dyn Conn>>>,
    addr: SocketAddr,
    target: &str,
    via: &Via,
) -> Result<(Option<u16>, Outcome), Silent> {
    let keep_alive = via.keep_alive();
    if conn.is_none() {
        let tcp = match TcpStream::connect(addr) {
            Ok(c) => c,
            Err(e) => return Ok((None, Outcome::Transport(format!("connect: {e}")))),
        };
        let _ = tcp.set_read_timeout(Some(Duration::from_secs(10)));
        let c: Box<dyn Conn> = match via {
            Via::Plain { .. } | Via::H2c => Box::new(tcp),
            Via::Tls(config) => {
                let name = rustls_pki_types::ServerName::try_from(TLS_NAME).unwrap();
                let mut tls = rustls::ClientConnection::new(config.clone(), name).unwrap();
                let mut tcp = tcp;
                // The handshake first, so its failure is told apart from
                // a request the router dropped.
                while tls.is_handshaking() {
                    if let Err(e) = tls.complete_io(&mut tcp) {
                        return Ok((None, Outcome::Transport(format!("TLS handshake: {e}"))));
                    }
                }
                Box::new(rustls::StreamOwned::new(tls, tcp))
            }
        };
        *conn = Some(BufReader::new(c));
    }
    let r = conn.as_mut().unwrap();
    let close = if keep_alive {
        ""
    } else {
        "Connection: close\r\n"
    };
    let req = format!("GET {target} HTTP/1.1\r\nHost: soak\r\n{close}\r\n");
    if r.get_mut().write_all(req.as_bytes()).is_err() {
        return Err(Silent);
    }
    let mut status_line = String::new();
    match r.read_line(&mut status_line) {
        Ok(0) | Err(_) => return Err(Silent),
        Ok(_) => {}
    }
    let status: u16 = match status_line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
    {
        Some(s) => s,
        None => {
            return Ok((
                None,
                Outcome::Transport(format!("bad status line {status_line:?}")),
            ))
        }
    };
    let (mut length, mut backend, mut closes) = (None, None, !keep_alive);
    loop {
        let mut h = String::new();
        match r.read_line(&mut h) {
            Ok(0) | Err(_) => return Ok((backend, Outcome::Transport("head cut short".into()))),
            Ok(_) => {}
        }
        if h.trim().is_empty() {
            break;
        }
        let Some((k, v)) = h.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
        match k.as_str() {
            "content-length" => length = v.parse::<usize>().ok(),
            "x-ketama-backend" => backend = v.rsplit(':').next().and_then(|p| p.parse().ok()),
            "connection" => closes |= v.eq_ignore_ascii_case("close"),
            _ => {}
        }
    }
    let mut body = vec![0u8; length.unwrap_or(0)];
    let mut read = 0;
    while read < body.len() {
        match r.read(&mut body[read..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
    }
    if closes {
        *conn = None;
    }
    let outcome = if status == 502 && body.windows(EXHAUSTED.len()).any(|w| w == EXHAUSTED) {
        Outcome::Exhausted
    } else if status != 200 {
        Outcome::Status(status)
    } else if length.is_none() || read < body.len() {
        Outcome::Truncated
    } else if backend.is_none_or(|p| body != body_for(p, target)) {
        Outcome::WrongBody
    } else {
        Outcome::Ok
    };
    Ok((backend, outcome))
}
