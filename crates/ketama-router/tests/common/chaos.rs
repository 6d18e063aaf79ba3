//! An origin that can be made to fail on demand, as real ones do: gone
//! (its listener closed, its connections shut), stalled (it reads the
//! request and never answers), lying (non-HTTP bytes instead of a
//! response) or reset mid-body (the head and half the body, then a TCP
//! RST). Every answer it gives in earnest is [`BODY_LEN`] bytes that name
//! its port and the request target, so a client can check that a body is
//! whole and came from the backend the router named.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The length of every whole answer's body.
pub const BODY_LEN: usize = 4096;

/// What the origin does with the next request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Answers 200 with the whole body.
    Normal = 0,
    /// Refuses connections; open ones are shut.
    Down = 1,
    /// Reads requests and never answers.
    Stall = 2,
    /// Answers bytes that are not HTTP, then closes.
    Garbage = 3,
    /// Sends the head and half the body, then resets the connection.
    Reset = 4,
}

impl Mode {
    fn from_u8(v: u8) -> Mode {
        [
            Mode::Normal,
            Mode::Down,
            Mode::Stall,
            Mode::Garbage,
            Mode::Reset,
        ][v as usize]
    }

    /// Its name in reports.
    pub fn name(self) -> &'static str {
        ["normal", "down", "stall", "garbage", "reset"][self as usize]
    }
}

/// The body a whole answer to `target` from the origin on `port` has.
pub fn body_for(port: u16, target: &str) -> Vec<u8> {
    let mut b = format!("chaos {port} {target}\n").into_bytes();
    b.resize(BODY_LEN.max(b.len()), b'x');
    b
}

struct Shared {
    addr: SocketAddr,
    mode: AtomicU8,
    next_conn: AtomicU64,
    conns: Mutex<HashMap<u64, TcpStream>>,
}

/// A running chaos origin (see the module docs); it lives as long as the
/// test process.
#[derive(Clone)]
pub struct ChaosOrigin {
    shared: Arc<Shared>,
}

impl ChaosOrigin {
    /// Starts one on a free loopback port, answering normally.
    pub fn start() -> ChaosOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let shared = Arc::new(Shared {
            addr: listener.local_addr().unwrap(),
            mode: AtomicU8::new(Mode::Normal as u8),
            next_conn: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        });
        let s = shared.clone();
        std::thread::spawn(move || accept_loop(listener, s));
        ChaosOrigin { shared }
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.shared.addr
    }

    /// What it does now.
    pub fn mode(&self) -> Mode {
        Mode::from_u8(self.shared.mode.load(SeqCst))
    }

    /// Changes what it does; going down closes the listener (connects are
    /// refused until it comes back on the same port) and shuts every open
    /// connection.
    pub fn set(&self, mode: Mode) {
        self.shared.mode.store(mode as u8, SeqCst);
        if mode == Mode::Down {
            // Wakes the accept loop so it sees the change and lets go.
            let _ = TcpStream::connect_timeout(&self.shared.addr, Duration::from_secs(1));
            for c in self.shared.conns.lock().unwrap().values() {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
    }
}

fn accept_loop(mut listener: TcpListener, s: Arc<Shared>) {
    loop {
        let Ok((c, _)) = listener.accept() else {
            continue;
        };
        if Mode::from_u8(s.mode.load(SeqCst)) == Mode::Down {
            drop(c);
            drop(listener);
            while Mode::from_u8(s.mode.load(SeqCst)) == Mode::Down {
                std::thread::sleep(Duration::from_millis(2));
            }
            listener = rebind(s.addr);
            continue;
        }
        let id = s.next_conn.fetch_add(1, SeqCst);
        if let Ok(clone) = c.try_clone() {
            s.conns.lock().unwrap().insert(id, clone);
        }
        let s = s.clone();
        std::thread::spawn(move || {
            let _ = serve(c, &s);
            s.conns.lock().unwrap().remove(&id);
        });
    }
}

/// The same port again (std sets SO_REUSEADDR, so closed connections in
/// TIME_WAIT do not hold it).
fn rebind(addr: SocketAddr) -> TcpListener {
    for _ in 0..500 {
        if let Ok(l) = TcpListener::bind(addr) {
            return l;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("chaos origin could not bind {addr} again");
}

fn serve(c: TcpStream, s: &Shared) -> std::io::Result<()> {
    let mut r = BufReader::new(c.try_clone()?);
    let mut w = c;
    loop {
        let Some(target) = read_request(&mut r)? else {
            return Ok(());
        };
        match Mode::from_u8(s.mode.load(SeqCst)) {
            Mode::Normal => {
                let body = body_for(s.addr.port(), &target);
                let mut resp = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len())
                    .into_bytes();
                resp.extend_from_slice(&body);
                w.write_all(&resp)?;
            }
            Mode::Down => return Ok(()),
            Mode::Stall => {
                // Holds the connection, answering nothing, until the peer
                // gives up.
                let mut sink = [0u8; 4096];
                while r.read(&mut sink)? > 0 {}
                return Ok(());
            }
            Mode::Garbage => {
                w.write_all(b"SSH-2.0-OpenSSH_9.2\r\n\x00\x07\x13garbage \xff\xfe\r\n\r\n")?;
                return Ok(());
            }
            Mode::Reset => {
                let body = body_for(s.addr.port(), &target);
                let mut resp = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len())
                    .into_bytes();
                resp.extend_from_slice(&body[..body.len() / 2]);
                w.write_all(&resp)?;
                w.flush()?;
                // Lets the half answer leave before the RST overtakes it.
                std::thread::sleep(Duration::from_millis(5));
                socket2::SockRef::from(&w).set_linger(Some(Duration::ZERO))?;
                return Ok(());
            }
        }
    }
}

/// Reads one request head and its Content-Length body: the target, or
/// `None` at the end of the connection.
fn read_request(r: &mut impl BufRead) -> std::io::Result<Option<String>> {
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let target = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)? == 0 {
            return Ok(None);
        }
        if h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.trim().eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            }
            if k.trim().eq_ignore_ascii_case("transfer-encoding") {
                chunked = v.trim().eq_ignore_ascii_case("chunked");
            }
        }
    }
    if chunked {
        return Ok(skip_chunked(r)?.then_some(target));
    }
    let mut body = vec![0u8; length];
    r.read_exact(&mut body)?;
    Ok(Some(target))
}

/// Reads a chunked body and its trailer section (strictly: a stray
/// last-chunk after it would be read as the next request); whether it
/// ended well.
fn skip_chunked(r: &mut impl BufRead) -> std::io::Result<bool> {
    loop {
        let mut size = String::new();
        if r.read_line(&mut size)? == 0 {
            return Ok(false);
        }
        let Ok(n) = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16) else {
            return Ok(false);
        };
        if n == 0 {
            loop {
                let mut t = String::new();
                if r.read_line(&mut t)? == 0 {
                    return Ok(false);
                }
                if t.trim().is_empty() {
                    return Ok(true);
                }
            }
        }
        let mut data = vec![0u8; n + 2];
        r.read_exact(&mut data)?;
    }
}
