//! Routers steered by a real three-member etcd cluster (Debian's
//! etcd-server, each member on its own loopback ports and data directory),
//! every router given all three endpoints: the leader killed, then quorum
//! lost, then the members restored; a member whose disk is lost replaced;
//! all under steady requests that must all be answered.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::fleet::*;
use common::*;
use ketama_fleet::testing::EtcdCluster;
use ketama_fleet::Keys;
use ketama_router::origin::Origin;

/// Requests on every router, one client thread each, until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    failed: Arc<AtomicU64>,
    done: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(addrs: &[std::net::SocketAddr]) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let failed = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicU64::new(0));
        let threads = addrs
            .iter()
            .map(|&addr| {
                let (stop, failed, done) = (stop.clone(), failed.clone(), done.clone());
                std::thread::spawn(move || {
                    let mut i = 0;
                    while !stop.load(Relaxed) {
                        if !matches!(request(addr, "GET", &format!("/c/{i}"), &[], ""), Ok(r) if r.status == 200) {
                            failed.fetch_add(1, Relaxed);
                        }
                        done.fetch_add(1, Relaxed);
                        i += 1;
                    }
                })
            })
            .collect();
        Load {
            stop,
            failed,
            done,
            threads,
        }
    }

    /// Stops the clients: (requests, failed).
    fn stop(self) -> (u64, u64) {
        self.stop.store(true, Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        (self.done.load(Relaxed), self.failed.load(Relaxed))
    }
}

/// Writes the rollout through any member that takes it, retrying while
/// the cluster elects a leader (at most 15 s); returns the revision and
/// when the write was taken.
fn write_rollout(etcd: &EtcdCluster, keys: &Keys, bp: u32) -> (i64, Instant) {
    let c = etcd.client();
    let body = format!("{{\"global_bp\": {bp}, \"scopes\": {{}}}}");
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        match c.put(&keys.rollout(), body.as_bytes(), None) {
            Ok(rev) => return (rev, Instant::now()),
            Err(e) if Instant::now() > deadline => panic!("the cluster took no write in 15 s: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

#[test]
fn routers_ride_through_leader_loss_and_quorum_loss() {
    let mut etcd = EtcdCluster::start(3).unwrap();
    let urls = etcd.urls();
    let origins: Vec<Origin> = (0..3).map(|i| Origin::start(i).unwrap()).collect();
    let refs: Vec<&Origin> = origins.iter().collect();
    let keys = Keys::new(PREFIX);
    let rev = etcd
        .client()
        .put(&keys.config(), shared(&refs, &[1, 1, 1]).as_bytes(), None)
        .unwrap();
    let routers: Vec<FleetRouter> = ["ams", "sin"]
        .iter()
        .map(|s| fleet_router(&urls, s))
        .collect();
    for f in &routers {
        wait_for(Duration::from_secs(10), || revision(&f.r, "config") == rev);
        let at = control(&f.r)["endpoint"].as_str().unwrap_or("").to_string();
        assert!(
            urls.contains(&at),
            "/status names {at:?}, not one of {urls:?}"
        );
    }
    let load = Load::start(&routers.iter().map(|f| f.r.proxy).collect::<Vec<_>>());

    // The leader killed: a rollout written through the two left reaches
    // every router, and none stays on the dead member.
    let leader = etcd.leader().expect("a leader");
    etcd.kill(leader);
    let (rev2, _) = write_rollout(&etcd, &keys, 2500);
    for f in &routers {
        wait_for(Duration::from_secs(10), || {
            revision(&f.r, "rollout") == rev2
        });
    }

    // Quorum lost (two of three down): routers keep serving what they
    // applied and say since when they are cut off.
    let second = (0..3).find(|&i| i != leader).unwrap();
    etcd.kill(second);
    for f in &routers {
        wait_for(Duration::from_secs(20), || {
            let c = control(&f.r);
            c["connected"] == false && c["disconnected_since"].is_string()
        });
        assert_eq!(revision(&f.r, "rollout"), rev2);
    }

    // Members restored: the first write the cluster takes reaches every
    // router within retry_max_ms (300) + 1 s, without a restart.
    etcd.restart(leader).unwrap();
    etcd.restart(second).unwrap();
    let (rev3, taken) = write_rollout(&etcd, &keys, 5000);
    for f in &routers {
        wait_for(Duration::from_secs(10), || {
            revision(&f.r, "rollout") == rev3 && control(&f.r)["connected"] == true
        });
    }
    let converged = taken.elapsed();
    assert!(
        converged <= Duration::from_millis(1300),
        "routers converged {converged:?} after the cluster took writes again"
    );

    let (done, failed) = load.stop();
    assert!(done > 100, "too few requests to mean anything: {done}");
    assert_eq!(
        failed, 0,
        "requests failed while etcd lost its leader and its quorum"
    );
    for f in &routers {
        let at = control(&f.r)["endpoint"].as_str().unwrap_or("").to_string();
        assert!(urls.contains(&at), "{at}");
    }
    eprintln!("{done} requests, 0 failed; converged {converged:?} after the cluster took writes");
}

/// Aborts the test process (with what it was doing) if it is still
/// running after `limit`: a hang inside etcd's membership calls once
/// outlived every deadline in CI. The routers die with the process
/// (`router_command`'s parent-death signal). Disarmed on drop.
struct Watchdog(Option<std::sync::mpsc::Sender<()>>);

impl Watchdog {
    fn arm(limit: Duration, what: &'static str) -> Watchdog {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(limit) {
                eprintln!("{what}: still running after {limit:?}, aborting");
                std::process::abort();
            }
        });
        Watchdog(Some(tx))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.0.take();
    }
}

#[test]
fn a_member_that_lost_its_disk_is_replaced_and_routers_follow() {
    let _watchdog = Watchdog::arm(Duration::from_secs(150), "the member replacement test");
    let mut etcd = EtcdCluster::start(3).unwrap();
    let urls = etcd.urls();
    let origins: Vec<Origin> = (0..2).map(|i| Origin::start(i).unwrap()).collect();
    let refs: Vec<&Origin> = origins.iter().collect();
    let keys = Keys::new(PREFIX);
    let rev = etcd
        .client()
        .put(&keys.config(), shared(&refs, &[1, 1]).as_bytes(), None)
        .unwrap();
    let f = fleet_router(&urls, "ams");
    wait_for(Duration::from_secs(10), || revision(&f.r, "config") == rev);
    let (rev1, _) = write_rollout(&etcd, &keys, 2500);
    wait_for(Duration::from_secs(10), || {
        revision(&f.r, "rollout") == rev1
    });
    let load = Load::start(&[f.r.proxy]);

    // The member the router reads from loses its disk: it is removed,
    // wiped, added back empty and catches up from the other two.
    let on = control(&f.r)["endpoint"].as_str().unwrap_or("").to_string();
    let wiped = urls.iter().position(|u| *u == on).unwrap_or(0);
    let replacing = Instant::now();
    etcd.wipe_and_rejoin(wiped).unwrap();
    let replaced = replacing.elapsed();
    let alone = ketama_fleet::etcd::Client::new(&ketama_fleet::etcd::Options {
        endpoints: vec![urls[wiped].clone()],
        timeout: Duration::from_secs(2),
        ..Default::default()
    })
    .unwrap();
    wait_for(Duration::from_secs(10), || {
        alone
            .get(&keys.rollout())
            .is_ok_and(|(kv, _)| kv.is_some_and(|kv| kv.mod_revision == rev1))
    });
    // The next change reaches the router, wherever its client went.
    let (rev2, _) = write_rollout(&etcd, &keys, 7500);
    wait_for(Duration::from_secs(10), || {
        revision(&f.r, "rollout") == rev2
    });
    let (done, failed) = load.stop();
    assert!(done > 50, "too few requests to mean anything: {done}");
    assert_eq!(failed, 0, "requests failed while a member was replaced");
    eprintln!("member {wiped} replaced in {replaced:?}; {done} requests, 0 failed");
}
