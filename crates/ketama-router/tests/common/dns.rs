//! A real DNS server for the discovery tests and the soak: Debian's
//! dnsmasq on a loopback port, serving SRV records
//! `_cache._tcp.service.consul` and each target's address. It re-reads its
//! records only on restart; `--local-ttl` sets their TTL.

use std::net::UdpSocket;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const SRV: &str = "_cache._tcp.service.consul";

/// A dnsmasq serving SRV records `_cache._tcp.service.consul` ->
/// `cache-N.node.dc1.consul:PORT` and each target's address.
pub struct Dns {
    pub port: u16,
    child: Option<Child>,
    ttl: u32,
    /// More dnsmasq arguments (extra records, forwarders).
    extra: Vec<String>,
}

/// (target number, address, port) of each SRV record.
pub type Records = Vec<(usize, &'static str, u16)>;

/// A port for a DNS server that is free for UDP and TCP now and, being
/// below the kernel's ephemeral range (32768 and up by default), is never
/// handed to a connection's local end meanwhile: dnsmasq binds both, and a
/// test that restarts it on the same port must find the port free again
/// (an ephemeral port could be held by some keep-alive connection for
/// minutes).
pub fn free_udp_port() -> u16 {
    use rand::Rng;
    let mut rng = rand::rng();
    loop {
        let port = rng.random_range(20_000..32_000);
        let free = UdpSocket::bind(("127.0.0.1", port)).is_ok()
            && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok();
        if free {
            return port;
        }
    }
}

impl Dns {
    /// Starts dnsmasq on a free port. A port free for UDP may be taken for
    /// TCP (by another test's connection), and dnsmasq binds both: if it
    /// exits at start, another port is tried.
    pub fn start(records: &Records, ttl: u32) -> Dns {
        Self::start_with(records, ttl, Vec::new())
    }

    /// A server on `port` that is not started yet ([`Dns::serve`] starts
    /// it): for a source that must first find nothing there.
    pub fn on(port: u16, ttl: u32) -> Dns {
        Dns {
            port,
            child: None,
            ttl,
            extra: Vec::new(),
        }
    }

    /// [`Dns::start`] with more dnsmasq arguments.
    pub fn start_with(records: &Records, ttl: u32, extra: Vec<String>) -> Dns {
        let mut d = Dns {
            port: free_udp_port(),
            child: None,
            ttl,
            extra,
        };
        for _ in 0..5 {
            if d.try_serve(records) {
                return d;
            }
            d.port = free_udp_port();
        }
        panic!("dnsmasq did not start on any of 5 ports");
    }

    /// Restarts dnsmasq on its port with these records. The port can be
    /// briefly taken between the stop and the start (a connection's
    /// ephemeral end, another test's socket), so a failed bind is retried
    /// for a few seconds.
    pub fn serve(&mut self, records: &Records) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.try_serve(records) {
            assert!(
                Instant::now() < deadline,
                "dnsmasq did not restart on port {} within 5 s",
                self.port
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Starts dnsmasq and waits until it answers; false if it exited.
    fn try_serve(&mut self, records: &Records) -> bool {
        self.kill();
        let mut args = vec![
            "--keep-in-foreground".to_string(),
            "--conf-file=/dev/null".into(),
            "--no-resolv".into(),
            "--no-hosts".into(),
            format!("--port={}", self.port),
            "--listen-address=127.0.0.1".into(),
            "--bind-interfaces".into(),
            "--pid-file=".into(),
            "--user=root".into(),
            "--local=/consul/".into(),
            format!("--local-ttl={}", self.ttl),
            // Answers over 512 bytes are truncated: the router reads them
            // in full over TCP.
            "--edns-packet-max=512".into(),
        ];
        args.extend(self.extra.iter().cloned());
        for (n, addr, port) in records {
            args.push(format!(
                "--srv-host={SRV},cache-{n}.node.dc1.consul,{port},0,10"
            ));
            args.push(format!("--host-record=cache-{n}.node.dc1.consul,{addr}"));
        }
        let child = Command::new("dnsmasq")
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dnsmasq (Debian: dnsmasq-base; scripts/setup.sh installs it)");
        self.child = Some(child);
        let port = self.port;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !answers(port) {
            let exited = self
                .child
                .as_mut()
                .is_some_and(|c| matches!(c.try_wait(), Ok(Some(_))));
            if exited {
                self.child = None;
                return false;
            }
            assert!(
                Instant::now() < deadline,
                "dnsmasq on port {port} did not answer within 10 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        true
    }

    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn signal(&self, sig: &str) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        Command::new("kill").args([sig, &pid]).status().unwrap();
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        if self.child.is_some() {
            self.signal("-CONT");
        }
        self.kill();
    }
}

/// Whether a DNS server answers on the port (a query for the SRV name).
pub fn answers(port: u16) -> bool {
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    s.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut q = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in SRV.split('.') {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 33, 0, 1]);
    s.send_to(&q, ("127.0.0.1", port)).is_ok() && s.recv(&mut [0u8; 2048]).is_ok()
}
