//! The router binary with real sockets, shared by the integration tests:
//! origins, a config, the real `ketama-router` process, raw HTTP requests.
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ketama::{Layout, Node, Ring, RingBuilder};
use ketama_router::origin::Origin;

pub mod caches;
pub mod chaos;
pub mod diff;
pub mod differential;
pub mod dns;
pub mod echo;
pub mod etcd_race;
pub mod fleet;
pub mod grpc;
pub mod h2gen;
pub mod h2raw;
pub mod haproxy;
pub mod hook;
pub mod mutate;
pub mod page;
pub mod plan;
pub mod recorder;
pub mod scripted;
pub mod tls;

/// A port free now for peers other than the router (nginx, HAProxy),
/// which cannot say where they listen; routers listen on [`any_port`]
/// instead. Below the kernel's ephemeral range, so no outgoing
/// connection's local end takes it before the peer binds it.
pub fn free_port() -> u16 {
    // One source for the whole test process (etcd members' ports too): a
    // port is handed out once, so two tests running side by side never
    // draw the same one between its check and its bind (a peer of one
    // test's caches once landed on another test's stub: a 599).
    ketama_fleet::testing::free_port().expect("a free loopback port in 20000-32000")
}

/// Loopback, port 0: a router told to listen here binds a free port of
/// the kernel's choosing and names it in its `listening` log line, so no
/// test waits on a port another may hold.
pub fn any_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// An address that refuses connections: a socket bound to it (so no one
/// else gets the port) but not listening. Keep the socket as long as the
/// address must refuse.
pub fn refusing_addr() -> (socket2::Socket, SocketAddr) {
    use socket2::{Domain, Socket, Type};
    let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
    s.bind(&any_port().into()).unwrap();
    let addr = s.local_addr().unwrap().as_socket().unwrap();
    (s, addr)
}

/// A new directory `name` in `parent` that only its owner may enter (mode
/// 0700), as a router's upgrade socket needs.
pub fn private_dir(parent: &Path, name: &str) -> std::path::PathBuf {
    use std::os::unix::fs::DirBuilderExt;
    let d = parent.join(name);
    std::fs::DirBuilder::new().mode(0o700).create(&d).unwrap();
    d
}

/// The listeners a router's log names so far (`listening` lines: config
/// key to the address bound).
pub fn listening(log: &Path) -> HashMap<String, SocketAddr> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .filter(|l| l.contains(" listening "))
        .filter_map(|l| {
            let key = l.split("listener=\"").nth(1)?.split('"').next()?;
            let addr = l.split(" addr=").nth(1)?.split_whitespace().next()?;
            Some((key.to_string(), addr.parse().ok()?))
        })
        .collect()
}

pub struct RouterProc {
    pub child: Child,
    pub proxy: SocketAddr,
    pub admin: SocketAddr,
    /// Its standard error, where it logs.
    pub log: std::path::PathBuf,
}

impl Drop for RouterProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl RouterProc {
    /// A router spawned with its standard error in `log`, once it named
    /// its proxy's and admin API's listeners there (20 s at most).
    pub fn wait(mut child: Child, log: &Path) -> RouterProc {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let l = listening(log);
            if let (Some(proxy), Some(admin)) = (l.get("server.listen[0]"), l.get("admin.listen")) {
                return RouterProc {
                    child,
                    proxy: *proxy,
                    admin: *admin,
                    log: log.to_path_buf(),
                };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "the router exited ({status}) before it listened: {}",
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
            assert!(Instant::now() < deadline, "router did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Where the listener of config key `key` (`tls.listen[0]`) listens,
    /// once the log names it (10 s at most).
    pub fn listener(&self, key: &str) -> SocketAddr {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(a) = listening(&self.log).get(key) {
                return *a;
            }
            assert!(Instant::now() < deadline, "no listener {key} in the log");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The log filter of test routers: `KETAMA_TEST_RUST_LOG` (`info` shows
/// what a router did, for a failure) or warnings, plus the `listening`
/// lines the tests read the addresses from.
pub fn test_log_filter() -> String {
    let base = std::env::var("KETAMA_TEST_RUST_LOG").unwrap_or_else(|_| "warn".into());
    format!("{base},ketama_router::listen=info")
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

/// The router binary, to be killed if the thread that starts it dies: a
/// test process killed mid-run (a harness timeout, ^C) must not leave
/// routers holding ports and CPU behind it, as `Drop` never runs then.
/// `setpriv --pdeathsig` (util-linux, essential in Debian) sets the
/// parent-death signal and execs the router in the same process, so
/// `Child::kill` and `Child::id` still mean the router. The signal follows
/// the spawning *thread*: start a router on the thread that keeps it.
pub fn router_command() -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        "--pdeathsig",
        "KILL",
        "--",
        env!("CARGO_BIN_EXE_ketama-router"),
    ]);
    c
}

pub fn start_router(config_path: &Path) -> RouterProc {
    start_router_with(config_path, &[], None)
}

/// Starts the router binary with extra arguments, its stderr written to
/// `log` (default: the config's path with `.log`), and waits until it
/// names its listeners there.
pub fn start_router_with(config_path: &Path, args: &[&str], log: Option<&Path>) -> RouterProc {
    let log = log.map_or_else(|| config_path.with_extension("log"), Path::to_path_buf);
    let child = router_command()
        .args(["--config", config_path.to_str().unwrap()])
        .args(args)
        .env("RUST_LOG", test_log_filter())
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
        .spawn()
        .unwrap();
    RouterProc::wait(child, &log)
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
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    std::fs::write(&path, config(&refs, weights, any_port(), any_port(), extra)).unwrap();
    let r = start_router(&path);
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

/// A config over these backends: `server` lines go into `[server]`,
/// `extra` after the `[health]` section (checks every 200 ms).
pub fn config_with(
    backends: &[SocketAddr],
    proxy: SocketAddr,
    admin: SocketAddr,
    server: &str,
    extra: &str,
) -> String {
    let mut s = format!(
        "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\n{server}\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[ring]\nlayout = \"compact\"\n\n[health]\ninterval_ms = 200\ntimeout_ms = 200\n{extra}\n"
    );
    for b in backends {
        s.push_str(&format!("\n[[backends]]\naddress = \"{b}\"\n"));
    }
    s
}

/// A router started from the config `text(proxy, admin, dir)` returns,
/// written as `dir/router.toml` in a new temp dir (which must live as long
/// as the router), its stderr in `dir/router.log`.
pub fn router_from(
    text: impl FnOnce(SocketAddr, SocketAddr, &Path) -> String,
) -> (RouterProc, tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    std::fs::write(&path, text(any_port(), any_port(), dir.path())).unwrap();
    let log = dir.path().join("router.log");
    let r = start_router_with(&path, &[], Some(&log));
    (r, dir, path)
}

/// A router over these backends with this config (see [`config_with`]),
/// its stderr in `dir/router.log`.
pub fn router_over(
    backends: &[SocketAddr],
    server: &str,
    extra: &str,
) -> (RouterProc, tempfile::TempDir) {
    let (r, dir, _) =
        router_from(|proxy, admin, _| config_with(backends, proxy, admin, server, extra));
    (r, dir)
}

/// Sends raw bytes on a new connection and reads until the router closes
/// it (or 10 s pass): the status of the first response, if any, and the
/// whole answer.
pub fn raw(addr: SocketAddr, bytes: &[u8]) -> (Option<u16>, String) {
    let mut c = TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = c.write_all(bytes);
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text
        .strip_prefix("HTTP/1.1 ")
        .and_then(|t| t.get(..3))
        .and_then(|s| s.parse().ok());
    (status, text)
}

/// The JSON lines of an access log written so far (none before it exists).
pub fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `GET /metrics` from the admin API.
pub fn metrics_text(r: &RouterProc) -> String {
    request(
        r.admin,
        "GET",
        "/metrics",
        &[("authorization", "Bearer sekret")],
        "",
    )
    .unwrap()
    .body
}

/// The value of one sample line of `/metrics` (0 when absent).
pub fn sample(metrics: &str, name_and_labels: &str) -> f64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// One admin API request with the tests' token.
pub fn admin_call(r: &RouterProc, method: &str, path: &str, body: &str) -> Resp {
    request(
        r.admin,
        method,
        path,
        &[("authorization", "Bearer sekret")],
        body,
    )
    .unwrap()
}

/// CPU seconds a process has used (user + system).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}
