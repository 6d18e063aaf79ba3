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

/// A loopback port free now and below the kernel's ephemeral range
/// (32768 and up by default), so no connection's local end takes it
/// before etcd binds it: a port the kernel picked and let go once went to
/// an outgoing connection in that gap, and the member died at start with
/// "address already in use".
///
/// A port is handed out once per process: two members of one cluster
/// once drew the same port (the draws were not atomic across the test
/// threads), one of them died at start, and the cluster ran on two
/// members until a chaos test killed one more.
pub fn free_port() -> std::io::Result<u16> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: AtomicU64 = AtomicU64::new(0);
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id()) << 32;
    let _ = STATE.compare_exchange(0, seed | 1, Ordering::Relaxed, Ordering::Relaxed);
    let next = |mut x: u64| {
        // xorshift: enough spread that parallel test processes rarely
        // try one port.
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..1000 {
        let x = match STATE.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |x| Some(next(x))) {
            Ok(prev) | Err(prev) => next(prev),
        };
        let port = 20_000 + (x % 12_000) as u16;
        let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
        if given.contains(&port) {
            continue;
        }
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.push(port);
            return Ok(port);
        }
    }
    Err(std::io::Error::other(
        "no free loopback port in 20000..32000 after 1000 tries",
    ))
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
        let member = Member {
            name: "ketama-test".into(),
            dir: self.dir.clone(),
            client_port: self.client_port,
            peer_port: self.peer_port,
        };
        let initial = format!("ketama-test={}", member.peer_url());
        self.child = Some(member.spawn(&initial, "new")?);
        wait_until_it_answers(&self.client(), &self.dir)
    }
}

/// One etcd member's name, directory and ports.
#[derive(Clone, Debug)]
struct Member {
    name: String,
    dir: PathBuf,
    client_port: u16,
    peer_port: u16,
}

impl Member {
    fn client_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    fn peer_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.peer_port)
    }

    /// Runs `etcd` for this member (`KETAMA_ETCD` names another binary),
    /// its log in its directory.
    fn spawn(&self, initial_cluster: &str, state: &str) -> std::io::Result<Child> {
        let bin = std::env::var("KETAMA_ETCD").unwrap_or_else(|_| "etcd".into());
        std::fs::create_dir_all(&self.dir)?;
        let (client, peer) = (self.client_url(), self.peer_url());
        Command::new(&bin)
            .args(["--name", &self.name, "--data-dir"])
            .arg(self.dir.join("data"))
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", initial_cluster])
            .args(["--initial-cluster-state", state])
            .args(["--initial-cluster-token", "ketama-test"])
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
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
            })
    }
}

/// Waits (30 s at most) until `client` can read.
fn wait_until_it_answers(client: &Client, dir: &std::path::Path) -> std::io::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while client.get("/").is_err() {
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(dir.join("etcd.log")).unwrap_or_default();
            return Err(std::io::Error::other(format!(
                "etcd did not answer within 30 s: {log}"
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// A real three-member (or larger) etcd cluster on loopback, each member
/// with its own ports and data directory; killed and removed on drop.
pub struct EtcdCluster {
    members: Vec<Member>,
    children: Vec<Option<Child>>,
    root: PathBuf,
}

impl EtcdCluster {
    /// Starts `n` members as one new cluster and waits until it takes
    /// reads (it has elected a leader).
    pub fn start(n: usize) -> std::io::Result<Self> {
        let root = std::env::temp_dir().join(format!(
            "ketama-etcd-cluster-{}-{}",
            std::process::id(),
            free_port()?
        ));
        let mut members = Vec::with_capacity(n);
        for i in 0..n {
            members.push(Member {
                name: format!("m{i}"),
                dir: root.join(format!("m{i}")),
                client_port: free_port()?,
                peer_port: free_port()?,
            });
        }
        let mut c = EtcdCluster {
            children: Vec::new(),
            members,
            root,
        };
        let initial = c.initial_cluster();
        for m in &c.members {
            c.children.push(Some(m.spawn(&initial, "new")?));
        }
        wait_until_it_answers(&c.client(), &c.root.join("m0"))?;
        // A quorum answers before every member is up: wait for each, so a
        // member that died at start fails here and not as a mystery later.
        let client = c.client();
        for (m, child) in c.members.iter().zip(&mut c.children) {
            let deadline = Instant::now() + Duration::from_secs(30);
            while !client
                .member_status(&m.client_url())
                .is_ok_and(|s| s.leader.is_some())
            {
                if Instant::now() > deadline {
                    let log = std::fs::read_to_string(m.dir.join("etcd.log")).unwrap_or_default();
                    return Err(std::io::Error::other(format!(
                        "etcd member {} did not join in 30 s: {log}",
                        m.name
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            // Its URL answering is not proof that it runs: another process
            // on its port would answer too.
            if let Some(Ok(Some(status))) = child.as_mut().map(Child::try_wait) {
                let log = std::fs::read_to_string(m.dir.join("etcd.log")).unwrap_or_default();
                return Err(std::io::Error::other(format!(
                    "etcd member {} exited at start ({status}): {log}",
                    m.name
                )));
            }
        }
        Ok(c)
    }

    fn initial_cluster(&self) -> String {
        self.members
            .iter()
            .map(|m| format!("{}={}", m.name, m.peer_url()))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The process ids of the members running now (for CPU and memory
    /// figures).
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().flatten().map(Child::id).collect()
    }

    /// Every member's client URL, in order.
    pub fn urls(&self) -> Vec<String> {
        self.members.iter().map(Member::client_url).collect()
    }

    /// A client given every member's URL.
    pub fn client(&self) -> Client {
        Client::new(&Options {
            endpoints: self.urls(),
            timeout: Duration::from_secs(2),
            watch_idle: Duration::from_secs(30),
            ..Default::default()
        })
        .expect("a plain http client")
    }

    /// The index of the member that is leader now, if one is.
    pub fn leader(&self) -> Option<usize> {
        let c = self.client();
        (0..self.members.len()).find(|&i| {
            self.children[i].is_some()
                && c.member_status(&self.members[i].client_url())
                    .is_ok_and(|s| s.is_leader())
        })
    }

    /// Kills member `i` (SIGKILL).
    pub fn kill(&mut self, i: usize) {
        if let Some(mut c) = self.children[i].take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts member `i` again on its ports and data.
    pub fn restart(&mut self, i: usize) -> std::io::Result<()> {
        self.kill(i);
        let initial = self.initial_cluster();
        self.children[i] = Some(self.members[i].spawn(&initial, "existing")?);
        Ok(())
    }

    /// Member `i` lost its disk: killed, removed from the cluster, its
    /// data directory wiped, added back as a new member and started empty
    /// (`--initial-cluster-state existing`), as an operator replaces a
    /// member; returns once it answers with a leader. Needs the others'
    /// quorum.
    pub fn wipe_and_rejoin(&mut self, i: usize) -> std::io::Result<()> {
        self.kill(i);
        let live = (0..self.members.len())
            .find(|&j| j != i && self.children[j].is_some())
            .ok_or_else(|| std::io::Error::other("no live member to ask"))?;
        let api = |path: &str, body: &str| -> std::io::Result<serde_json::Value> {
            let url = format!("{}{path}", self.members[live].client_url());
            let text = ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(5))
                .build()
                .post(&url)
                .send_string(body)
                .map_err(|e| std::io::Error::other(format!("{url}: {e}")))?
                .into_string()?;
            serde_json::from_str(&text).map_err(std::io::Error::other)
        };
        let peer = self.members[i].peer_url();
        // Listed by its peer URL: a member added but not started yet has
        // no name.
        let listed = || -> std::io::Result<Option<String>> {
            let list = api("/v3/cluster/member/list", "{}")?;
            Ok(list["members"]
                .as_array()
                .and_then(|ms| {
                    ms.iter().find(|m| {
                        m["peerURLs"]
                            .as_array()
                            .is_some_and(|us| us.iter().any(|u| u == peer.as_str()))
                    })
                })
                .and_then(|m| m["ID"].as_str().map(str::to_string)))
        };
        let name = self.members[i].name.clone();
        let log = |j: usize| {
            std::fs::read_to_string(self.members[j].dir.join("etcd.log")).unwrap_or_default()
        };
        // A removal proposed while the others elect a new leader (the
        // member killed may have led) can time out, and one that timed
        // out may still be applied: the member list decides, not the
        // answer.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match listed() {
                Ok(None) => break,
                Ok(Some(id)) => {
                    let _ = api(
                        "/v3/cluster/member/remove",
                        &format!("{{\"ID\": \"{id}\"}}"),
                    );
                }
                Err(_) => {}
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!(
                    "{name} was not removed in 30 s; the member asked logged: {}",
                    log(live)
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_dir_all(self.members[i].dir.join("data"));
        // etcd refuses a new member (503, "unhealthy cluster") until the
        // leader has seen the others active for a while after the removal.
        let deadline = Instant::now() + Duration::from_secs(30);
        while let Err(e) = api(
            "/v3/cluster/member/add",
            &format!("{{\"peerURLs\": [\"{peer}\"]}}"),
        ) {
            if listed().is_ok_and(|id| id.is_some()) {
                break;
            }
            if Instant::now() > deadline {
                return Err(e);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let initial = self.initial_cluster();
        self.children[i] = Some(self.members[i].spawn(&initial, "existing")?);
        let url = self.members[i].client_url();
        let c = self.client();
        let deadline = Instant::now() + Duration::from_secs(30);
        while !c.member_status(&url).is_ok_and(|s| s.leader.is_some()) {
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(self.members[i].dir.join("etcd.log"))
                    .unwrap_or_default();
                return Err(std::io::Error::other(format!(
                    "{name} did not rejoin in 30 s: {log}"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        for i in 0..self.members.len() {
            self.kill(i);
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

impl Drop for EtcdServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
