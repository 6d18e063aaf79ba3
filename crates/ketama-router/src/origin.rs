//! A small HTTP/1.1 origin on loopback, for the demo and for tests: answers
//! every request with `origin I: PATH` and the header `x-origin: I` (200 on
//! `/health` too), keeps connections alive, reads request bodies (by
//! `Content-Length` or chunked), and can be slowed down or killed.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

/// A running origin; see the module docs. Dropping it does not stop it
/// ([`kill`](Self::kill) does).
#[derive(Clone, Debug)]
pub struct Origin {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    index: usize,
    alive: AtomicBool,
    delay_ms: AtomicU64,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    served: AtomicU64,
    last_head: std::sync::Mutex<String>,
}

impl Origin {
    /// Starts origin `index` on a free loopback port.
    pub fn start(index: usize) -> io::Result<Origin> {
        Self::start_on(TcpListener::bind("127.0.0.1:0")?, index)
    }

    /// Starts origin `index` on a bound listener.
    pub fn start_on(listener: TcpListener, index: usize) -> io::Result<Origin> {
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            index,
            alive: AtomicBool::new(true),
            delay_ms: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            served: AtomicU64::new(0),
            last_head: std::sync::Mutex::new(String::new()),
        });
        let s = shared.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if !s.alive.load(SeqCst) {
                    break; // the listener closes: connects are refused from now on
                }
                if let Ok(c) = conn {
                    let s = s.clone();
                    std::thread::spawn(move || {
                        let _ = serve(c, &s);
                    });
                }
            }
        });
        Ok(Origin { addr, shared })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and closes every connection (within 50 ms).
    pub fn kill(&self) {
        self.shared.alive.store(false, SeqCst);
        // Wake the accept loop so it sees the flag and drops the listener.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(200));
        std::thread::sleep(Duration::from_millis(60));
    }

    /// Makes every response wait this long before it is sent.
    pub fn set_delay(&self, d: Duration) {
        self.shared.delay_ms.store(d.as_millis() as u64, SeqCst);
    }

    /// The most requests it has had in progress at once (since the last
    /// [`reset_max_in_flight`](Self::reset_max_in_flight)).
    pub fn max_in_flight(&self) -> usize {
        self.shared.max_in_flight.load(SeqCst)
    }

    /// Starts a new [`max_in_flight`](Self::max_in_flight) measurement.
    pub fn reset_max_in_flight(&self) {
        self.shared
            .max_in_flight
            .store(self.shared.in_flight.load(SeqCst), SeqCst);
    }

    /// Requests answered so far.
    pub fn served(&self) -> u64 {
        self.shared.served.load(SeqCst)
    }

    /// The request line and headers of the last request it read, health
    /// checks (`/health`) left out.
    pub fn last_head(&self) -> String {
        self.shared
            .last_head
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// Reads a line, giving up (`Ok(None)`) once the origin is killed.
fn line(r: &mut BufReader<TcpStream>, s: &Shared) -> io::Result<Option<String>> {
    let mut out = String::new();
    loop {
        if !s.alive.load(SeqCst) {
            return Ok(None);
        }
        match r.read_line(&mut out) {
            Ok(0) => return Ok(None),
            Ok(_) if out.ends_with('\n') => return Ok(Some(out)),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
}

fn read_exact_alive(r: &mut BufReader<TcpStream>, mut n: usize, s: &Shared) -> io::Result<bool> {
    let mut buf = [0u8; 8192];
    while n > 0 {
        if !s.alive.load(SeqCst) {
            return Ok(false);
        }
        match r.read(&mut buf[..n.min(8192)]) {
            Ok(0) => return Ok(false),
            Ok(k) => n -= k,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn serve(c: TcpStream, s: &Shared) -> io::Result<()> {
    c.set_read_timeout(Some(Duration::from_millis(50)))?;
    let mut r = BufReader::new(c.try_clone()?);
    let mut w = c;
    loop {
        let Some(request_line) = line(&mut r, s)? else {
            return Ok(());
        };
        if request_line.trim().is_empty() {
            continue;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("/")
            .to_string();
        let (mut close, mut length, mut chunked) = (false, 0usize, false);
        let mut head = request_line.clone();
        loop {
            let Some(h) = line(&mut r, s)? else {
                return Ok(());
            };
            if h == "\r\n" || h == "\n" {
                break;
            }
            head.push_str(&h);
            let (name, value) = h.split_once(':').unwrap_or((&h, ""));
            let (name, value) = (name.trim().to_ascii_lowercase(), value.trim());
            match name.as_str() {
                "connection" => close |= value.eq_ignore_ascii_case("close"),
                "content-length" => length = value.parse().unwrap_or(0),
                "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
                _ => {}
            }
        }
        if chunked {
            loop {
                let Some(size) = line(&mut r, s)? else {
                    return Ok(());
                };
                let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
                    .unwrap_or(0);
                if !read_exact_alive(&mut r, size + 2, s)? {
                    return Ok(());
                }
                if size == 0 {
                    break;
                }
            }
        } else if !read_exact_alive(&mut r, length, s)? {
            return Ok(());
        }
        // Health checks are not the proxied load the in-flight peak and the
        // last head describe (a check in the same instant as a request
        // would count, or overwrite the head a test is about to read).
        let counted = path != "/health";
        if counted {
            *s.last_head.lock().unwrap_or_else(|e| e.into_inner()) = head;
            let now = s.in_flight.fetch_add(1, SeqCst) + 1;
            s.max_in_flight.fetch_max(now, SeqCst);
        }
        let delay = s.delay_ms.load(SeqCst);
        if delay > 0 {
            std::thread::sleep(Duration::from_millis(delay));
        }
        if counted {
            s.in_flight.fetch_sub(1, SeqCst);
        }
        if !s.alive.load(SeqCst) {
            return Ok(());
        }
        let body = format!("origin {}: {path}\n", s.index);
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: text/plain\r\nx-origin: {}\r\n\r\n{body}",
            body.len(),
            s.index
        );
        w.write_all(resp.as_bytes())?;
        s.served.fetch_add(1, SeqCst);
        if close {
            return Ok(());
        }
    }
}
