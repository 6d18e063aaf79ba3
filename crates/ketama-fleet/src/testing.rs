//! A real etcd server on loopback ports with its own data directory, for
//! tests and examples: Debian's `etcd-server` (`etcd` on the PATH, or the
//! binary named by `KETAMA_ETCD`). Killed, and its directory removed, on
//! drop.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::etcd::{Client, Options};

/// A running etcd.
pub struct EtcdServer {
    child: Option<Child>,
    dir: PathBuf,
    client_port: u16,
    peer_port: u16,
}

fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl EtcdServer {
    /// Starts etcd on two free loopback ports and waits until it answers.
    pub fn start() -> std::io::Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "ketama-etcd-{}-{}",
            std::process::id(),
            free_port()?
        ));
        std::fs::create_dir_all(&dir)?;
        let mut s = EtcdServer {
            child: None,
            dir,
            client_port: free_port()?,
            peer_port: free_port()?,
        };
        s.restart()?;
        Ok(s)
    }

    /// The client URL (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    /// A client of this server.
    pub fn client(&self) -> Client {
        Client::new(&Options {
            endpoints: vec![self.url()],
            timeout: Duration::from_secs(2),
            watch_idle: Duration::from_secs(30),
            ..Default::default()
        })
        .expect("a plain http client")
    }

    /// Kills the server (SIGKILL: no goodbye to its clients).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same ports and data (after [`kill`](Self::kill)),
    /// and waits until it answers.
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.kill();
        let bin = std::env::var("KETAMA_ETCD").unwrap_or_else(|_| "etcd".into());
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let child = Command::new(&bin)
            .args(["--name", "ketama-test", "--data-dir"])
            .arg(self.dir.join("data"))
            .args(["--listen-client-urls", &self.url()])
            .args(["--advertise-client-urls", &self.url()])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &format!("ketama-test={peer}")])
            .args(["--log-level", "error", "--logger", "zap"])
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(
                self.dir.join("etcd.log"),
            )?))
            .spawn()
            .map_err(|e| {
                std::io::Error::new(
                    e.kind(),
                    format!(
                        "cannot run {bin} ({e}): apt-get install etcd-server, or set KETAMA_ETCD"
                    ),
                )
            })?;
        self.child = Some(child);
        let client = self.client();
        let deadline = Instant::now() + Duration::from_secs(30);
        while client.get("/").is_err() {
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.dir.join("etcd.log")).unwrap_or_default();
                return Err(std::io::Error::other(format!(
                    "etcd did not answer within 30 s: {log}"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
