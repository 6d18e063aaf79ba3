//! Live gRPC peers (Python's grpcio, the gRPC C core) for the router's
//! tests, through `tests/grpc/peer.py`: servers on loopback ports the
//! kernel picks, and one client call per scenario, its outcome as JSON
//! (see the script's docs).

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use serde_json::Value;

use super::tls::Issued;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/grpc/peer.py")
}

/// gRPC servers, stopped when dropped (or with [`Servers::stop`]).
pub struct Servers {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Their ports, in order.
    pub ports: Vec<u16>,
}

impl Servers {
    /// `n` servers, plaintext or with `tls`'s certificate.
    pub fn start(n: usize, tls: Option<&Issued>) -> Servers {
        let mut cmd = Command::new("python3");
        cmd.arg(script()).args(["servers", &n.to_string()]);
        if let Some(t) = tls {
            cmd.arg("--tls").arg(&t.cert).arg(&t.key);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 with grpcio (scripts/setup.sh installs it)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
            panic!("peer.py servers said {line:?}: {e} (is grpcio installed?)")
        });
        let ports = v["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap() as u16)
            .collect();
        let stdin = child.stdin.take();
        Servers {
            child,
            stdin,
            ports,
        }
    }

    /// The servers' addresses as gRPC's own target names them
    /// (`ipv4:127.0.0.1:P1,...`).
    pub fn target(&self) -> String {
        let list: Vec<String> = self
            .ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!("ipv4:{}", list.join(","))
    }

    /// Stops them all, now.
    pub fn stop(&mut self) {
        drop(self.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How a client reaches the router: plaintext (h2c), or TLS with this CA
/// and name.
#[derive(Clone, Copy)]
pub enum Via<'a> {
    H2c,
    Tls(&'a Path, &'a str),
}

/// One call of `scenario` through `target` with metadata `x-key: key`;
/// its outcome.
pub fn call(target: SocketAddr, via: Via<'_>, key: &str, scenario: &str, args: &[&str]) -> Value {
    let mut cmd = Command::new("python3");
    cmd.arg(script())
        .args(["call", &target.to_string(), scenario])
        .args(args)
        .args(["--key", key]);
    if let Via::Tls(ca, name) = via {
        cmd.arg("--ca").arg(ca).args(["--name", name]);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "peer.py call {scenario} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim())
        .unwrap_or_else(|e| panic!("peer.py call {scenario} said {text:?}: {e}"))
}
