//! The plan tests' fleet: a real etcd, routers in scopes steered through
//! it, nginx caches in front of one nginx origin as their backends, load
//! through every router, the `ketama` binary, and a Prometheus server
//! scraping the routers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::caches::{cache, origin};
use super::tls::Nginx;
use super::*;
use ketama_fleet::etcd::Client;
use ketama_fleet::plan::PlanState;
use ketama_fleet::Keys;

pub const PREFIX: &str = "/ketama/plan/";

/// The `ketama` binary next to this test's (built by `cargo test
/// --workspace`, which builds every package's binaries before any test
/// runs).
pub fn ketama() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let bin = exe.parent().unwrap().parent().unwrap().join("ketama");
    assert!(
        bin.exists(),
        "{} is missing: `cargo build -p ketama-cli` (cargo test --workspace builds it)",
        bin.display()
    );
    bin
}

/// The fleet: etcd URLs, the caches and origin, two routers (scopes
/// `val1` and `ams`) reporting every 200 ms, and load through both.
pub struct Fleet {
    pub urls: Vec<String>,
    _nginx: Vec<Nginx>,
    pub routers: Vec<RouterProc>,
    _dirs: Vec<tempfile::TempDir>,
    pub dir: tempfile::TempDir,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    load: Vec<std::thread::JoinHandle<u64>>,
}

impl Fleet {
    /// `bust`: one request in five is for a key never asked before (an
    /// origin contact every time).
    pub fn start(urls: Vec<String>, bust: bool) -> Fleet {
        Fleet::start_with(
            urls,
            &["val1", "ams"],
            Load {
                bust,
                keys: 150,
                quiet: &[],
            },
        )
    }

    pub fn start_with(urls: Vec<String>, scopes: &[&str], how: Load) -> Fleet {
        let dir = tempfile::tempdir().unwrap();
        let o = origin(dir.path());
        let caches: Vec<Nginx> = (0..2).map(|i| cache(dir.path(), i, o.addr, true)).collect();
        let client = etcd_client(&urls);
        let keys = Keys::new(PREFIX);
        let mut shared = String::from(
            "[ring]\nlayout = \"compact\"\n\n[health]\nenabled = false\n\n[migration]\nglobal_bp = 0\n[migration.ring]\nlayout = \"compact\"\npoint_multiple = 40\n",
        );
        for c in &caches {
            shared.push_str(&format!("\n[[backends]]\naddress = \"{}\"\n", c.addr));
        }
        client.put(&keys.config(), shared.as_bytes(), None).unwrap();
        let mut routers = Vec::new();
        let mut dirs = Vec::new();
        for scope in scopes {
            let d = tempfile::tempdir().unwrap();
            let path = d.path().join("router.toml");
            std::fs::write(
                &path,
                format!(
                    "[server]\nlisten = [\"127.0.0.1:0\"]\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"127.0.0.1:0\"\ntoken = \"sekret\"\n\n[control]\netcd = {urls:?}\nprefix = \"{PREFIX}\"\nscope = \"{scope}\"\nid = \"{scope}\"\nlease_ttl_s = 3\nretry_min_ms = 20\nretry_max_ms = 300\ntimeout_ms = 1000\nreport_interval_ms = 200\n"
                ),
            )
            .unwrap();
            routers.push(start_router_with(
                &path,
                &[],
                Some(&d.path().join("router.log")),
            ));
            dirs.push(d);
        }
        let (stop, sent) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicU64::new(0)),
        );
        let load = routers
            .iter()
            .zip(scopes)
            .filter(|(_, s)| !how.quiet.contains(s))
            .map(|(r, _)| {
                let (proxy, stop, sent) = (r.proxy, stop.clone(), sent.clone());
                std::thread::spawn(move || load(proxy, &stop, &sent, how))
            })
            .collect();
        let mut nginx = caches;
        nginx.push(o);
        let f = Fleet {
            urls,
            _nginx: nginx,
            routers,
            _dirs: dirs,
            dir,
            stop,
            sent,
            load,
        };
        // Both routers registered with a report, and traffic flowing.
        wait_for(Duration::from_secs(15), || {
            ketama_fleet::registrations(&client, &keys)
                .is_ok_and(|rs| rs.len() == scopes.len() && rs.iter().all(|r| r.report.is_some()))
                && f.sent.load(Relaxed) > 200
        });
        f
    }

    /// The caches' addresses (as the routers' backends name them), then
    /// the origin's.
    pub fn nginx_addrs(&self) -> Vec<SocketAddr> {
        self._nginx.iter().map(|n| n.addr).collect()
    }

    pub fn client(&self) -> Client {
        etcd_client(&self.urls)
    }

    pub fn plan_file(&self, text: &str) -> PathBuf {
        let p = self.dir.path().join("plan.toml");
        std::fs::write(&p, text).unwrap();
        p
    }

    pub fn cli(&self, args: &[&str]) -> Command {
        let mut c = Command::new(ketama());
        c.args(["fleet"]).args(args);
        c.args(["--etcd", &self.urls.join(","), "--prefix", PREFIX]);
        c
    }

    pub fn state(&self) -> Option<PlanState> {
        ketama_fleet::plan::controller::read_plan(&self.client(), &Keys::new(PREFIX))
            .ok()
            .and_then(|(_, s)| s)
    }

    pub fn rollout(&self) -> serde_json::Value {
        let (kv, _) = self.client().get(&Keys::new(PREFIX).rollout()).unwrap();
        kv.map_or(serde_json::Value::Null, |kv| {
            serde_json::from_slice(&kv.value).unwrap()
        })
    }

    /// Stops the load; every request answered 200.
    pub fn stop(self) {
        self.stop.store(true, Relaxed);
        for l in self.load {
            assert_eq!(l.join().unwrap(), 0, "requests failed during the plan");
        }
    }
}

pub fn etcd_client(urls: &[String]) -> Client {
    Client::new(&ketama_fleet::etcd::Options {
        endpoints: urls.to_vec(),
        timeout: Duration::from_secs(2),
        ..Default::default()
    })
    .unwrap()
}

/// What the load asks for.
#[derive(Clone, Copy)]
pub struct Load {
    /// One request in five for a key never asked before.
    pub bust: bool,
    /// Keys, the low ones asked most (a square-law skew).
    pub keys: u64,
    /// Scopes whose router gets no requests at all.
    pub quiet: &'static [&'static str],
}

/// Requests (see [`Load`]) until told to stop; returns how many failed.
pub fn load(proxy: SocketAddr, stop: &AtomicBool, sent: &AtomicU64, how: Load) -> u64 {
    let mut failed = 0;
    let mut i = 0u64;
    let mut x = proxy.port() as u64 | 1;
    while !stop.load(Relaxed) {
        i += 1;
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        let path = if how.bust && i % 5 == 0 {
            format!("/new/{proxy}/{i}")
        } else {
            format!("/obj/{}", (u * u * how.keys as f64) as u64)
        };
        match request(proxy, "GET", &path, &[], "") {
            Ok(r) if r.status == 200 => {}
            _ => failed += 1,
        }
        sent.fetch_add(1, Relaxed);
    }
    failed
}

pub fn output_text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A Prometheus server scraping the routers' `/metrics` every 250 ms,
/// each target labelled with its router's scope.
pub struct PromServer {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for PromServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn prometheus(targets: &[(SocketAddr, &str)]) -> PromServer {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = String::from(
        "global:\n  scrape_interval: 250ms\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: routers\n    authorization:\n      credentials: sekret\n    static_configs:\n",
    );
    for (addr, scope) in targets {
        cfg.push_str(&format!(
            "      - targets: [\"{addr}\"]\n        labels: {{scope: {scope}}}\n"
        ));
    }
    std::fs::write(dir.path().join("prometheus.yml"), cfg).unwrap();
    let port = free_port();
    let child = Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            dir.path().join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::from(
            std::fs::File::create(dir.path().join("prometheus.log")).unwrap(),
        ))
        .spawn()
        .expect("prometheus (Debian's prometheus package: run scripts/setup.sh)");
    let url = format!("http://127.0.0.1:{port}");
    let p = ketama_fleet::plan::prometheus::Prometheus::new(&url, Duration::from_secs(2));
    // Up, and holding two seconds of every target's counters.
    wait_for(Duration::from_secs(30), || {
        p.query("count by (scope) (increase(ketama_ring_responses_total[2s]) > 0)")
            .is_ok_and(|v| v.len() == targets.len())
    });
    PromServer {
        child,
        url,
        _dir: dir,
    }
}

/// Waits for the plan's state to satisfy `ok`.
pub fn wait_state(f: &Fleet, limit: Duration, ok: impl Fn(&PlanState) -> bool) -> PlanState {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(s) = f.state().filter(|s| ok(s)) {
            return s;
        }
        assert!(
            Instant::now() < deadline,
            "state not reached: {:?}",
            f.state()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn spawn(mut c: Command) -> Child {
    c.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}
