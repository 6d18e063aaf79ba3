//! The router binary with real sockets, shared by the integration tests:
//! origins, a config, the real `ketama-router` process, raw HTTP requests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ketama::{Layout, Node, Ring, RingBuilder};
use ketama_router::origin::Origin;

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct RouterProc {
    pub child: Child,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
}

impl Drop for RouterProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn config(
    origins: &[&Origin],
    weights: &[u32],
    proxy: SocketAddr,
    admin: SocketAddr,
    extra: &str,
) -> String {
    let mut s = format!(
        "[server]\nlisten = [\"{proxy}\"]\nretries = 2\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[ring]\nlayout = \"compact\"\n\n[health]\ninterval_ms = 200\ntimeout_ms = 200\n{extra}\n"
    );
    for (o, w) in origins.iter().zip(weights) {
        s.push_str(&format!(
            "\n[[backends]]\naddress = \"{}\"\nweight = {w}\n",
            o.addr()
        ));
    }
    s
}

pub fn start_router(config_path: &Path, proxy: SocketAddr, admin: SocketAddr) -> RouterProc {
    let child = Command::new(env!("CARGO_BIN_EXE_ketama-router"))
        .args(["--config", config_path.to_str().unwrap()])
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(proxy).is_err() || TcpStream::connect(admin).is_err() {
        assert!(Instant::now() < deadline, "router did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    RouterProc {
        child,
        proxy,
        admin,
    }
}

pub struct Resp {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

/// One request on a fresh connection.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Resp> {
    let mut c = TcpStream::connect(addr)?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        req.push_str("Host: test\r\n");
    }
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    c.write_all(req.as_bytes())?;
    parse_response(&mut c)
}

pub fn parse_response(c: &mut TcpStream) -> std::io::Result<Resp> {
    let mut raw = Vec::new();
    c.read_to_end(&mut raw)?;
    let text = String::from_utf8_lossy(&raw).to_string();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status line in {text:?}")))?;
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Ok(Resp {
        status,
        headers,
        body: body.to_string(),
    })
}

/// `n` origins and a router over them (weights, extra config), in a temp
/// dir that must live as long as the router.
pub fn setup(weights: &[u32], extra: &str) -> (Vec<Origin>, RouterProc, tempfile::TempDir) {
    let origins: Vec<Origin> = (0..weights.len())
        .map(|i| Origin::start(i).unwrap())
        .collect();
    let refs: Vec<&Origin> = origins.iter().collect();
    let proxy: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    std::fs::write(&path, config(&refs, weights, proxy, admin, extra)).unwrap();
    let r = start_router(&path, proxy, admin);
    (origins, r, dir)
}

pub fn get(r: &RouterProc, path: &str) -> Resp {
    request(r.proxy, "GET", path, &[], "").unwrap()
}

pub fn library_ring(origins: &[&Origin], weights: &[u32]) -> Ring {
    let nodes = origins
        .iter()
        .zip(weights)
        .map(|(o, w)| Node::new(o.addr().to_string(), *w))
        .collect();
    RingBuilder::new()
        .layout(Layout::Compact)
        .build(nodes)
        .unwrap()
}

pub fn urls(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("/assets/{i}/img.jpg?v={}", i % 7))
        .collect()
}

/// Polls `ok` every 20 ms until it holds; panics after `limit`.
pub fn wait_for(limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "condition not reached within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `GET /status` from the admin API (token `sekret`), parsed.
pub fn status_json(r: &RouterProc) -> serde_json::Value {
    let resp = request(
        r.admin,
        "GET",
        "/status",
        &[("authorization", "Bearer sekret")],
        "",
    )
    .unwrap();
    assert_eq!(resp.status, 200, "{}", resp.body);
    serde_json::from_str(&resp.body).unwrap()
}

/// A free loopback address (bound, then released).
pub fn free_addr() -> SocketAddr {
    format!("127.0.0.1:{}", free_port()).parse().unwrap()
}

/// `GET path` with these headers (a `Host` among them replaces the default).
pub fn request_with_host(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Resp {
    request(addr, "GET", path, headers, "").unwrap()
}
