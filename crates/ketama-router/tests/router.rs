//! The router binary with real sockets: real origin servers started by the
//! test, the real `ketama-router` process, requests over loopback.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ketama::{Layout, Node, Ring, RingBuilder};

/// An origin that answers `origin I: PATH` with header `x-origin: I`, and
/// can be killed: it stops accepting and closes its connections.
struct Origin {
    addr: SocketAddr,
    alive: Arc<AtomicBool>,
}

impl Origin {
    fn start(i: usize) -> Origin {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        l.set_nonblocking(true).unwrap();
        let alive = Arc::new(AtomicBool::new(true));
        let a = alive.clone();
        std::thread::spawn(move || {
            while a.load(Ordering::SeqCst) {
                match l.accept() {
                    Ok((c, _)) => {
                        let a = a.clone();
                        std::thread::spawn(move || serve(c, i, a));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            // The listener drops here: connects are refused from now on.
        });
        Origin { addr, alive }
    }

    fn kill(&self) {
        self.alive.store(false, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn serve(c: TcpStream, i: usize, alive: Arc<AtomicBool>) {
    c.set_nonblocking(false).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut w = c;
    loop {
        let mut line = String::new();
        loop {
            if !alive.load(Ordering::SeqCst) {
                return;
            }
            match r.read_line(&mut line) {
                Ok(0) => return,
                Ok(_) => break,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    continue
                }
                Err(_) => return,
            }
        }
        let path = line.split_whitespace().nth(1).unwrap_or("/").to_string();
        loop {
            let mut h = String::new();
            match r.read_line(&mut h) {
                Ok(0) => return,
                Ok(_) if h == "\r\n" => break,
                Ok(_) => {}
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => return,
            }
        }
        if !alive.load(Ordering::SeqCst) {
            return;
        }
        let body = format!("origin {i}: {path}\n");
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nx-origin: {i}\r\n\r\n{body}",
            body.len()
        );
        if w.write_all(resp.as_bytes()).is_err() {
            return;
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct RouterProc {
    child: Child,
    proxy: SocketAddr,
    admin: SocketAddr,
}

impl Drop for RouterProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(
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
            o.addr
        ));
    }
    s
}

fn start_router(config_path: &Path, proxy: SocketAddr, admin: SocketAddr) -> RouterProc {
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

struct Resp {
    status: u16,
    headers: HashMap<String, String>,
    body: String,
}

/// One request on a fresh connection.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> std::io::Result<Resp> {
    let mut c = TcpStream::connect(addr)?;
    c.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    c.write_all(req.as_bytes())?;
    parse_response(&mut c)
}

fn parse_response(c: &mut TcpStream) -> std::io::Result<Resp> {
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
fn setup(weights: &[u32], extra: &str) -> (Vec<Origin>, RouterProc, tempfile::TempDir) {
    let origins: Vec<Origin> = (0..weights.len()).map(Origin::start).collect();
    let refs: Vec<&Origin> = origins.iter().collect();
    let proxy: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    std::fs::write(&path, config(&refs, weights, proxy, admin, extra)).unwrap();
    let r = start_router(&path, proxy, admin);
    (origins, r, dir)
}

fn get(r: &RouterProc, path: &str) -> Resp {
    request(r.proxy, "GET", path, &[], "").unwrap()
}

fn library_ring(origins: &[&Origin], weights: &[u32]) -> Ring {
    let nodes = origins
        .iter()
        .zip(weights)
        .map(|(o, w)| Node::new(o.addr.to_string(), *w))
        .collect();
    RingBuilder::new()
        .layout(Layout::Compact)
        .build(nodes)
        .unwrap()
}

fn urls(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("/assets/{i}/img.jpg?v={}", i % 7))
        .collect()
}

#[test]
fn routes_like_the_library_for_1000_urls() {
    let weights = [1, 2, 3, 1, 2];
    let (origins, r, _dir) = setup(&weights, "");
    let refs: Vec<&Origin> = origins.iter().collect();
    let ring = library_ring(&refs, &weights);
    for u in urls(1000) {
        let resp = get(&r, &u);
        assert_eq!(resp.status, 200, "{u}: {}", resp.body);
        let want = ring.node(u.as_bytes()).unwrap().server();
        assert_eq!(resp.headers["x-ketama-backend"], want, "{u}");
        assert_eq!(resp.headers["x-ketama-ring"], "only");
        let i = origins
            .iter()
            .position(|o| o.addr.to_string() == want)
            .unwrap();
        assert_eq!(resp.body, format!("origin {i}: {u}\n"));
    }
}

#[test]
fn a_killed_backend_fails_over_and_no_other_key_moves() {
    let weights = [1, 1, 1, 1, 1];
    let (origins, r, _dir) = setup(&weights, "");
    let refs: Vec<&Origin> = origins.iter().collect();
    let ring = library_ring(&refs, &weights);
    let us = urls(300);
    let before: Vec<String> = us
        .iter()
        .map(|u| get(&r, u).headers["x-ketama-backend"].clone())
        .collect();
    let dead = origins[2].addr.to_string();
    assert!(before.contains(&dead), "the killed backend owned some keys");
    origins[2].kill();
    // Right away (connect failures fail over) and after the health checks
    // have marked it down (it is skipped): the same answers.
    for round in 0..2 {
        for (u, b) in us.iter().zip(&before) {
            let resp = get(&r, u);
            assert_eq!(resp.status, 200, "round {round} {u}: {}", resp.body);
            let got = &resp.headers["x-ketama-backend"];
            if *b == dead {
                let next = ring
                    .failover(u.as_bytes())
                    .map(|n| n.server())
                    .find(|s| *s != dead)
                    .unwrap();
                assert_eq!(got, next, "{u} fails over to the next in ring order");
            } else {
                assert_eq!(got, b, "{u} must not move");
            }
        }
        std::thread::sleep(Duration::from_millis(700));
    }
    let status = request(
        r.admin,
        "GET",
        "/status",
        &[("authorization", "Bearer sekret")],
        "",
    )
    .unwrap();
    assert!(
        status.body.contains(&format!(
            "\"healthy\":false,\"labels\":[],\"server\":\"{dead}\""
        )),
        "{}",
        status.body
    );
}

#[test]
fn every_backend_down_is_a_502_with_a_clear_body() {
    let (origins, r, _dir) = setup(&[1, 1], "");
    assert_eq!(get(&r, "/x").status, 200);
    for o in &origins {
        o.kill();
    }
    let resp = get(&r, "/x");
    assert_eq!(resp.status, 502);
    assert!(
        resp.body.contains("no backend could serve this request"),
        "{}",
        resp.body
    );
}

#[test]
fn reload_under_concurrent_load_fails_no_request() {
    let (origins, r, dir) = setup(&[1, 1, 1, 1], "");
    let refs: Vec<&Origin> = origins.iter().collect();
    let (proxy, admin) = (r.proxy, r.admin);
    let path = dir.path().join("router.toml");
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let clients: Vec<_> = (0..3)
        .map(|t| {
            let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    match request(proxy, "GET", &format!("/load/{t}/{i}"), &[], "") {
                        Ok(resp) if resp.status == 200 => ok.fetch_add(1, Ordering::SeqCst),
                        _ => failed.fetch_add(1, Ordering::SeqCst),
                    };
                    i += 1;
                }
            })
        })
        .collect();
    let auth = [("authorization", "Bearer sekret")];
    for k in 0..10u32 {
        // Alternate point multiples and weights, through the admin API and SIGHUP.
        let extra = format!(
            "\n[ring]\nlayout = \"{}\"\npoint_multiple = {}\n",
            ["wide", "compact"][k as usize % 2],
            40 + k * 10
        );
        let text = config(&refs, &[1, 1 + k % 3, 1, 2], proxy, admin, "")
            .replace("\n[ring]\nlayout = \"compact\"\n", &extra);
        std::fs::write(&path, text).unwrap();
        if k % 2 == 0 {
            let resp = request(admin, "POST", "/reload", &auth, "").unwrap();
            assert_eq!(resp.status, 200, "{}", resp.body);
        } else {
            Command::new("kill")
                .args(["-HUP", &r.child.id().to_string()])
                .status()
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(150));
    }
    // A broken config is rejected and the running one keeps serving.
    std::fs::write(&path, "[server]\nlisten = 5\n").unwrap();
    let resp = request(admin, "POST", "/reload", &auth, "").unwrap();
    assert_eq!(resp.status, 400);
    assert!(resp.body.contains("router.toml"), "{}", resp.body);
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    assert_eq!(
        failed.load(Ordering::SeqCst),
        0,
        "{} ok",
        ok.load(Ordering::SeqCst)
    );
    assert!(ok.load(Ordering::SeqCst) > 100);
    let status = request(admin, "GET", "/status", &auth, "").unwrap();
    assert!(status.body.contains("\"rejected\":1"), "{}", status.body);
}

#[test]
fn admin_needs_the_token_and_sets_the_rollout() {
    let migration = "\n[migration]\nring = { compat = \"nginx\", layout = \"compact\", point_multiple = 16 }\nglobal_bp = 0\nscope = \"ams\"\n";
    let (_origins, r, _dir) = setup(&[1, 1, 1], migration);
    let admin = r.admin;
    for (path, method) in [
        ("/status", "GET"),
        ("/metrics", "GET"),
        ("/reload", "POST"),
        ("/rollout", "PUT"),
    ] {
        assert_eq!(
            request(admin, method, path, &[], "").unwrap().status,
            401,
            "{method} {path}"
        );
        assert_eq!(
            request(
                admin,
                method,
                path,
                &[("authorization", "Bearer wrong")],
                ""
            )
            .unwrap()
            .status,
            401
        );
    }
    let auth = [("authorization", "Bearer sekret")];
    assert_eq!(get(&r, "/a").headers["x-ketama-ring"], "old");
    let resp = request(
        admin,
        "PUT",
        "/rollout",
        &auth,
        r#"{"global_bp": 0, "scopes": {"ams": 10000}}"#,
    )
    .unwrap();
    assert_eq!(resp.status, 200, "{}", resp.body);
    for u in urls(50) {
        assert_eq!(get(&r, &u).headers["x-ketama-ring"], "new");
    }
    let bad = request(admin, "PUT", "/rollout", &auth, r#"{"global_bp": 20000}"#).unwrap();
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("10000"), "{}", bad.body);
    let metrics = request(admin, "GET", "/metrics", &auth, "").unwrap();
    assert!(
        metrics.body.contains("ketama_rollout_bp 10000"),
        "{}",
        metrics.body
    );
    assert!(
        metrics
            .body
            .contains("ketama_lookups_total{ring=\"new\"} 50"),
        "{}",
        metrics.body
    );
    assert!(
        metrics.body.contains("ketama_requests_total{backend="),
        "{}",
        metrics.body
    );
    assert!(metrics.body.contains("process_resident_memory_bytes"));
    assert_eq!(
        request(admin, "GET", "/nope", &auth, "").unwrap().status,
        404
    );
}

#[test]
fn malformed_requests_and_oversized_headers_get_a_4xx_and_the_router_keeps_serving() {
    let (_origins, r, _dir) = setup(&[1, 1], "");
    let proxy = r.proxy;
    let raw = |bytes: &[u8]| -> Option<u16> {
        let mut c = TcpStream::connect(proxy).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = c.write_all(bytes);
        parse_response(&mut c).ok().map(|r| r.status)
    };
    for bad in [
        b"GARBAGE\r\n\r\n".to_vec(),
        b"GET / HTTP/9.9\r\nHost: x\r\n\r\n".to_vec(),
        b"GET / HTTP/1.1\r\nHost x\r\n\r\n".to_vec(),
        // Over the router's limit (32 KiB by default): 431.
        format!(
            "GET / HTTP/1.1\r\nHost: x\r\nx-big: {}\r\n\r\n",
            "a".repeat(200_000)
        )
        .into_bytes(),
        // Over Pingora's own limit (1 MiB): 400.
        format!(
            "GET / HTTP/1.1\r\nHost: x\r\nx-big: {}\r\n\r\n",
            "a".repeat(2_000_000)
        )
        .into_bytes(),
        // Many headers.
        format!(
            "GET / HTTP/1.1\r\nHost: x\r\n{}\r\n",
            "x-h: 1\r\n".repeat(5000)
        )
        .into_bytes(),
    ] {
        let status = raw(&bad);
        assert!(
            matches!(status, Some(400..=499)),
            "{:?} -> {status:?}",
            String::from_utf8_lossy(&bad[..bad.len().min(40)])
        );
        assert_eq!(get(&r, "/still/serving").status, 200);
    }
}
