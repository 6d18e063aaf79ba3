//! A live HAProxy 2.6 and a router over the same origins, configured
//! alike: weights, explicit ids and a disabled server.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{free_addr, router_from, wait_for, RouterProc};

/// (weight, id, disabled) of each origin, in configuration order.
pub const SERVERS: [(u32, Option<u32>, bool); 7] = [
    (1, None, false),
    (3, Some(9), false),
    (2, None, false),
    (1, None, true),
    (5, Some(2), false),
    (1, None, false),
    (12, None, false),
];

pub struct Haproxy {
    child: Child,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// HAProxy in `mode http` (`h2`: its listener speaks HTTP/2 with prior
/// knowledge) with `balance BALANCE` and `hash-type HASH_TYPE` over
/// `origins` as [`SERVERS`] says; `frontend` is added to its frontend.
pub fn haproxy(origins: &[SocketAddr], hash_type: &str, balance: &str, h2: bool) -> Haproxy {
    haproxy_with(
        origins,
        "http",
        hash_type,
        balance,
        if h2 { " proto h2" } else { "" },
        "",
    )
}

/// HAProxy in `mode` with these lines; `bind` follows the listener's
/// address, `frontend` goes in the frontend.
pub fn haproxy_with(
    origins: &[SocketAddr],
    mode: &str,
    hash_type: &str,
    balance: &str,
    bind: &str,
    frontend: &str,
) -> Haproxy {
    let addr = free_addr();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = format!(
        "defaults\n  mode {mode}\n  timeout connect 2s\n  timeout client 10s\n  timeout server 10s\nfrontend fe\n  bind {addr}{bind}\n{frontend}  default_backend b\nbackend b\n  balance {balance}\n  hash-type {hash_type}\n"
    );
    for (i, (o, (w, id, disabled))) in origins.iter().zip(SERVERS).enumerate() {
        cfg += &format!("  server s{i} {o} weight {w}");
        if let Some(id) = id {
            cfg += &format!(" id {id}");
        }
        if disabled {
            cfg += " disabled";
        }
        cfg.push('\n');
    }
    let path = dir.path().join("haproxy.cfg");
    std::fs::write(&path, cfg).unwrap();
    let child = Command::new("haproxy")
        .arg("-f")
        .arg(&path)
        .arg("-db")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("haproxy must be installed (scripts/setup.sh)");
    wait_for(Duration::from_secs(15), || TcpStream::connect(addr).is_ok());
    Haproxy {
        child,
        addr,
        _dir: dir,
    }
}

/// The router over `origins` as [`SERVERS`] says, with `[ring] compat`
/// and `[key] balance` (`h2`: `[server] h2c`).
pub fn router(
    origins: &[SocketAddr],
    compat: &str,
    balance: &str,
    h2: bool,
) -> (RouterProc, tempfile::TempDir) {
    let (r, dir, _) = router_from(|proxy, admin, _| {
        let mut s = format!(
            "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\nh2c = {h2}\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[ring]\ncompat = \"{compat}\"\nlayout = \"compact\"\n\n[key]\nbalance = \"{balance}\"\n\n[health]\nenabled = false\n"
        );
        for (o, (w, id, disabled)) in origins.iter().zip(SERVERS) {
            s += &format!("\n[[backends]]\naddress = \"{o}\"\nweight = {w}\ndown = {disabled}\n");
            if let Some(id) = id {
                s += &format!("id = {id}\n");
            }
        }
        s
    });
    (r, dir)
}

/// The origin port that answered a request sent on `c`, or the status
/// line if not 200; and the answer's head.
pub fn answer_on(mut c: TcpStream, req: &[u8]) -> (String, String) {
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(req).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    if !text.starts_with("HTTP/1.1 200") {
        return (
            text.lines().next().unwrap_or("closed").to_string(),
            head.to_string(),
        );
    }
    (
        body.split(' ').nth(1).unwrap_or("?").to_string(),
        head.to_string(),
    )
}

/// The origin port that answered a request, or the status line if not
/// 200.
pub fn answer(addr: SocketAddr, req: &[u8]) -> String {
    answer_on(TcpStream::connect(addr).unwrap(), req).0
}
