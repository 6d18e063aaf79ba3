//! The soak's routers: each a release `ketama-router` with a plain and a
//! TLS listener, its own cache file and log, and its graceful binary
//! upgrade (a new process takes the listeners, the old one drains).

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::common::fleet::local_file;
use crate::common::tls::Issued;
use crate::common::*;

/// Each router's own `[server]` limits, beyond the fleet tests' file: a
/// stalled backend costs 800 ms, one failure takes a backend out for 2 s;
/// plain listeners take h2c too (the HTTP/2 client's).
/// A grace period of 1 s (the default), not the fleet tests' 0: at 0 the
/// upgraded process's runtimes stop at once when its accept loop ends,
/// and a request on a connection it had just accepted is cut without an
/// answer (the 30-minute run of 2026-12-04, seed 12564398140815829341).
const SERVER: &str = "h2c = true\ngrace_period_seconds = 1\nretries = 2\nconnect_timeout_ms = 300\nread_timeout_ms = 800\nmax_fails = 1\nfail_timeout_ms = 2000\n";

/// One router of the soak.
pub struct Router {
    /// The process serving now (after an upgrade, the new one).
    pub r: RouterProc,
    /// Its TLS listener.
    pub tls: std::net::SocketAddr,
    /// The log of each process it has been, oldest first.
    pub logs: Vec<PathBuf>,
    /// How many graceful upgrades it went through.
    pub upgrades: usize,
    config: PathBuf,
    sock: PathBuf,
    dir: tempfile::TempDir,
}

impl Router {
    /// Starts one in scope `scope`, steered by etcd at `urls`, serving
    /// `cert` on its TLS listener.
    pub fn start(urls: &[String], scope: &str, cert: &Issued) -> Router {
        let (proxy, admin, tls) = (any_port(), any_port(), any_port());
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("router.toml");
        let sock = private_dir(dir.path(), "run").join("upgrade.sock");
        let cache = dir.path().join("cache.json");
        let server = format!("{SERVER}upgrade_sock = \"{}\"\n", sock.display());
        let mut text = local_file(urls, proxy, admin, scope, &cache).replacen(
            "grace_period_seconds = 0\n",
            &server,
            1,
        );
        text.push_str(&format!(
            "\n[tls]\nlisten = [\"{tls}\"]\n[[tls.certificates]]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
            cert.cert.display(),
            cert.key.display()
        ));
        std::fs::write(&config, text).unwrap();
        let log = dir.path().join("router-0.log");
        let r = start_router_with(&config, &[], Some(&log));
        let tls = r.listener("tls.listen[0]");
        Router {
            r,
            tls,
            logs: vec![log],
            upgrades: 0,
            config,
            sock,
            dir,
        }
    }

    /// The `not_after` of the certificate its `/status` says it serves.
    pub fn serving_until(&self) -> serde_json::Value {
        status_json(&self.r)["tls"]["certificates"][0]["not_after"].clone()
    }

    /// Sends the serving process signal `name` (`HUP`, `QUIT`).
    pub fn signal(&self, name: &str) {
        let ok = std::process::Command::new("kill")
            .args([format!("-{name}"), self.r.child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok, "SIG{name} not delivered");
    }

    /// A graceful binary upgrade, as docs/router.md tells an operator to
    /// do one: a new process with `--upgrade` and the same config waits on
    /// the upgrade socket, the old one gets SIGQUIT, hands the listeners
    /// over, drains and exits. Returns how long until the old one was gone
    /// and the new one answered `/status`.
    pub fn upgrade(&mut self) -> Duration {
        let at = Instant::now();
        let log = self
            .dir
            .path()
            .join(format!("router-{}.log", self.logs.len()));
        let new = router_command()
            .args(["--config", self.config.to_str().unwrap(), "--upgrade"])
            .env("RUST_LOG", test_log_filter())
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(&log).unwrap()))
            .spawn()
            .unwrap();
        self.logs.push(log.clone());
        // The new process unlinks the socket once it has the listeners.
        wait_for(Duration::from_secs(20), || self.sock.exists());
        self.signal("QUIT");
        let mut old = std::mem::replace(&mut self.r.child, new);
        self.r.log = log;
        wait_for(Duration::from_secs(30), || {
            old.try_wait().unwrap().is_some()
        });
        let new_pid = u64::from(self.r.child.id());
        wait_for(Duration::from_secs(10), || {
            status_json(&self.r)["pid"].as_u64() == Some(new_pid)
        });
        self.upgrades += 1;
        at.elapsed()
    }
}
