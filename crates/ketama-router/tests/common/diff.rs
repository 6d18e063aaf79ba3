//! The router against nginx, the peer it promises to route like: nginx
//! 1.22 with `hash $request_uri consistent` and the router in front of the
//! same origins, each sent the same raw bytes.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use super::echo::echo_origin;
use super::tls::Nginx;
use super::RouterProc;

/// nginx and the router over the same origins.
pub struct Pair {
    pub nginx: Nginx,
    pub router: RouterProc,
    pub origins: Vec<SocketAddr>,
    pub _dir: tempfile::TempDir,
}

/// Four echo origins, nginx and the router with its defaults (health
/// checks off).
pub fn pair() -> Pair {
    let origins: Vec<SocketAddr> = (0..4).map(|_| echo_origin()).collect();
    pair_over(origins, "", "", "")
}

/// nginx and a router over `origins`: `router_server` added to the
/// router's `[server]`, `nginx_http` to nginx's `http` block and
/// `nginx_location` to its `location /`.
pub fn pair_over(
    origins: Vec<SocketAddr>,
    router_server: &str,
    nginx_http: &str,
    nginx_location: &str,
) -> Pair {
    let servers: String = origins.iter().map(|o| format!("server {o}; ")).collect();
    let nginx = Nginx::start(|addr| {
        format!(
            "{nginx_http}
  upstream o {{ hash $request_uri consistent; {servers}}}
  server {{ listen {addr}; location / {{ proxy_pass http://o; proxy_http_version 1.1; proxy_set_header Connection \"\"; {nginx_location} }} }}"
        )
    });
    let (router, dir) = super::router_over(&origins, router_server, "enabled = false");
    Pair {
        nginx,
        router,
        origins,
        _dir: dir,
    }
}

/// The responses in `out`: per response, its status and, for a 200, the
/// body (the echo origin's port and the request line it got).
pub fn parse_answers(out: &[u8]) -> Vec<(u16, String)> {
    let mut seen = Vec::new();
    let mut rest = out;
    while let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") {
        let head = String::from_utf8_lossy(&rest[..end]).to_string();
        let status = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        let len: usize = head
            .lines()
            .find_map(|l| {
                let (n, v) = l.split_once(':')?;
                n.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        let body_end = (end + 4 + len).min(rest.len());
        let body = String::from_utf8_lossy(&rest[end + 4..body_end]).to_string();
        seen.push((status, if status == 200 { body } else { String::new() }));
        rest = &rest[body_end..];
    }
    seen
}

/// What a client saw sending `bytes` on a new connection and reading
/// until the server closed it.
pub fn answers(addr: SocketAddr, bytes: &[u8]) -> Vec<(u16, String)> {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = c.write_all(bytes);
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    parse_answers(&out)
}

/// The same answers from both, and at least one.
pub fn compare(p: &Pair, bytes: &[u8]) -> Result<(), String> {
    let (n, r) = (answers(p.nginx.addr, bytes), answers(p.router.proxy, bytes));
    if n == r && !n.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{}\n  nginx:  {n:?}\n  router: {r:?}",
            bytes.escape_ascii()
        ))
    }
}
