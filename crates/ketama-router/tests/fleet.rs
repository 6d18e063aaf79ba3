//! A fleet of real router processes steered through a real etcd (Debian's
//! etcd-server, started here on loopback ports): config and rollout pushed
//! once reach every router, faults of etcd never fail a request, a router
//! cut off catches up, a restart without etcd serves from the cache file,
//! an invalid config is refused everywhere.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::fleet::*;
use common::*;
use ketama_config::Plan;
use ketama_fleet::testing::EtcdServer;
use ketama_fleet::Keys;
use ketama_router::origin::Origin;

fn put(etcd: &EtcdServer, key: &str, value: &str) -> i64 {
    etcd.client().put(key, value.as_bytes(), None).unwrap()
}

/// The library's answer for a key under this config, rollout and scope:
/// (ring name, backend address).
fn expected(config: &str, rollout: &str, scope: &str, key: &str) -> (String, String) {
    let v = ketama_config::check_shared(config, "expected").unwrap();
    let plan = Plan::build(&v, &[]).unwrap();
    plan.table
        .migration()
        .unwrap()
        .set_rollout(ketama_config::parse_rollout(rollout.as_bytes()).unwrap());
    let mut route = plan.table.route(key.as_bytes(), None, Some(scope)).unwrap();
    let first = plan.table.next(&mut route).unwrap().unwrap();
    (
        route.version().name().to_string(),
        plan.backends[first].server.clone(),
    )
}

#[test]
fn config_and_rollout_reach_every_router() {
    let etcd = EtcdServer::start().unwrap();
    let origins: Vec<Origin> = (0..4).map(|i| Origin::start(i).unwrap()).collect();
    let refs: Vec<&Origin> = origins.iter().collect();
    let config = shared(&refs, &[1, 2, 1, 3]);
    let keys = Keys::new(PREFIX);
    let config_rev = put(&etcd, &keys.config(), &config);
    let routers: Vec<FleetRouter> = ["ams", "sin", "iad"]
        .iter()
        .map(|s| fleet_router(&[etcd.url()], s))
        .collect();
    for f in &routers {
        wait_for(Duration::from_secs(10), || {
            let c = control(&f.r);
            c["connected"] == true && c["config_revision"] == config_rev
        });
    }

    // One rollout, pushed once, applied by all three; then 20 more, timed
    // from the write to the last router's /status showing it.
    let mut lags = Vec::new();
    let mut rollout = String::new();
    for i in 0..21 {
        rollout = format!(
            "{{\"global_bp\": {}, \"scopes\": {{\"ams\": 5000}}}}",
            i % 2
        );
        let t = Instant::now();
        let rev = put(&etcd, &keys.rollout(), &rollout);
        for f in &routers {
            wait_for(Duration::from_secs(1), || revision(&f.r, "rollout") == rev);
        }
        lags.push(t.elapsed());
    }
    lags.sort();
    eprintln!(
        "rollout write -> last of 3 routers applied: median {:?}, max {:?} (21 writes)",
        lags[lags.len() / 2],
        lags[lags.len() - 1]
    );

    // The same URLs: every router as the library routes them for its
    // scope; sin and iad (both 0 bp) alike.
    for url in urls(1000) {
        let mut answers = Vec::new();
        for (f, scope) in routers.iter().zip(["ams", "sin", "iad"]) {
            let resp = get(&f.r, &url);
            assert_eq!(resp.status, 200, "{url} via {scope}: {}", resp.body);
            let got = (
                resp.headers["x-ketama-ring"].clone(),
                resp.headers["x-ketama-backend"].clone(),
            );
            assert_eq!(
                got,
                expected(&config, &rollout, scope, &url),
                "{url} via {scope}"
            );
            answers.push(got);
        }
        assert_eq!(answers[1], answers[2], "{url}: sin and iad differ");
    }

    // Registered, with scope and revisions; local rollouts refused.
    let regs = ketama_fleet::registrations(&etcd.client(), &keys).unwrap();
    let mut scopes: Vec<_> = regs.iter().filter_map(|r| r.scope.clone()).collect();
    scopes.sort();
    assert_eq!(scopes, ["ams", "iad", "sin"]);
    assert!(regs.iter().all(|r| r.config_revision == config_rev));
    let resp = request(
        routers[0].r.admin,
        "PUT",
        "/rollout",
        &[("authorization", "Bearer sekret")],
        "{\"global_bp\": 10000}",
    )
    .unwrap();
    assert_eq!(resp.status, 409, "{}", resp.body);
    assert!(resp.body.contains(&keys.rollout()), "{}", resp.body);

    // A config change keeps the rollout set through the key.
    let config2 = shared(&refs, &[1, 2, 1, 1]);
    let rev2 = put(&etcd, &keys.config(), &config2);
    for f in &routers {
        wait_for(Duration::from_secs(5), || revision(&f.r, "config") == rev2);
    }
    for url in urls(200) {
        let resp = get(&routers[0].r, &url);
        let got = (
            resp.headers["x-ketama-ring"].clone(),
            resp.headers["x-ketama-backend"].clone(),
        );
        assert_eq!(
            got,
            expected(&config2, &rollout, "ams", &url),
            "{url} after a config change"
        );
    }
    drop(routers);
}

/// A TCP relay the test can cut: while off, it refuses (accepts and
/// drops) and breaks the connections it carries.
///
/// A cut closes every carried connection before it returns: with each
/// pump left to notice a cut on its own (at its next read timeout), a pump
/// starved of CPU kept a router's watch alive past the cut, and the router
/// applied a change it was meant to be cut off from (1 run in 40 beside
/// four busy loops). Accepting and cutting take one lock, so a connection
/// accepted as the relay is cut is either refused or closed with the rest.
struct Relay {
    addr: SocketAddr,
    /// Whether it relays, and the sockets it carries.
    state: Arc<Mutex<(bool, Vec<TcpStream>)>>,
}

impl Relay {
    fn start(to: SocketAddr) -> Relay {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let state = Arc::new(Mutex::new((true, Vec::new())));
        let state2 = state.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(c) = c else { continue };
                let mut st = state2.lock().unwrap();
                if !st.0 {
                    continue;
                }
                let Ok(up) = TcpStream::connect(to) else {
                    continue;
                };
                st.1.push(c.try_clone().unwrap());
                st.1.push(up.try_clone().unwrap());
                drop(st);
                for (a, b) in [(c.try_clone().unwrap(), up.try_clone().unwrap()), (up, c)] {
                    std::thread::spawn(move || pump(a, b));
                }
            }
        });
        Relay { addr, state }
    }

    fn cut(&self) {
        let mut st = self.state.lock().unwrap();
        st.0 = false;
        for s in st.1.drain(..) {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }

    fn mend(&self) {
        self.state.lock().unwrap().0 = true;
    }
}

/// Copies `a` to `b` until `a` ends (then `b`'s writing side ends too) or
/// either fails (then both end: a reset reaches the other side as one).
fn pump(mut a: TcpStream, mut b: TcpStream) {
    let mut buf = [0u8; 16384];
    loop {
        match a.read(&mut buf) {
            Ok(0) => {
                let _ = b.shutdown(std::net::Shutdown::Write);
                return;
            }
            Ok(n) => {
                if b.write_all(&buf[..n]).is_err() {
                    let _ = a.shutdown(std::net::Shutdown::Both);
                    return;
                }
            }
            Err(_) => {
                let _ = b.shutdown(std::net::Shutdown::Both);
                return;
            }
        }
    }
}

#[test]
fn etcd_faults_never_fail_a_request() {
    let mut etcd = EtcdServer::start().unwrap();
    let origins: Vec<Origin> = (0..3).map(|i| Origin::start(i).unwrap()).collect();
    let refs: Vec<&Origin> = origins.iter().collect();
    let keys = Keys::new(PREFIX);
    let rev = put(&etcd, &keys.config(), &shared(&refs, &[1, 1, 1]));
    let etcd_addr: SocketAddr = etcd.url().trim_start_matches("http://").parse().unwrap();
    let relay = Relay::start(etcd_addr);
    let a = fleet_router(&[etcd.url()], "ams");
    let b = fleet_router(&[format!("http://{}", relay.addr)], "sin");
    for f in [&a, &b] {
        wait_for(Duration::from_secs(10), || revision(&f.r, "config") == rev);
    }

    // Clients on both routers the whole time.
    let stop = Arc::new(AtomicBool::new(false));
    let failed = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = [a.r.proxy, b.r.proxy]
        .into_iter()
        .map(|addr| {
            let (stop, failed, done) = (stop.clone(), failed.clone(), done.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Relaxed) {
                    match request(addr, "GET", &format!("/load/{i}"), &[], "") {
                        Ok(r) if r.status == 200 => {}
                        _ => {
                            failed.fetch_add(1, Relaxed);
                        }
                    }
                    done.fetch_add(1, Relaxed);
                    i += 1;
                }
            })
        })
        .collect();

    // etcd killed: both keep serving and say so.
    etcd.kill();
    let killed = Instant::now();
    for (name, f) in [("a", &a), ("b", &b)] {
        loop {
            let c = control(&f.r);
            if c["connected"] == false && c["disconnected_since"].is_string() {
                break;
            }
            if killed.elapsed() > Duration::from_secs(10) {
                panic!(
                    "router {name} still says {c} {:?} after etcd was killed",
                    killed.elapsed()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let metrics = metrics_text(&a.r);
    assert_eq!(sample(&metrics, "ketama_control_connected"), 0.0);
    etcd.restart().unwrap();
    for f in [&a, &b] {
        wait_for(Duration::from_secs(10), || {
            control(&f.r)["connected"] == true
        });
    }

    // A change made while b is cut off reaches a at once and b when it
    // comes back.
    relay.cut();
    wait_for(Duration::from_secs(10), || {
        control(&b.r)["connected"] == false
    });
    let rev2 = put(&etcd, &keys.config(), &shared(&refs, &[1, 1, 2]));
    wait_for(Duration::from_secs(5), || revision(&a.r, "config") == rev2);
    assert_eq!(
        revision(&b.r, "config"),
        rev,
        "b applied a change it could not see"
    );
    relay.mend();
    wait_for(Duration::from_secs(10), || revision(&b.r, "config") == rev2);

    stop.store(true, Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    assert!(
        done.load(Relaxed) > 100,
        "too few requests to mean anything"
    );
    assert_eq!(
        failed.load(Relaxed),
        0,
        "requests failed while etcd was faulty"
    );
}

#[test]
fn restarts_from_the_cache_while_etcd_is_down() {
    let mut etcd = EtcdServer::start().unwrap();
    let origins: Vec<Origin> = (0..3).map(|i| Origin::start(i).unwrap()).collect();
    let refs: Vec<&Origin> = origins.iter().collect();
    let keys = Keys::new(PREFIX);
    let config = shared(&refs, &[2, 1, 1]);
    let rev = put(&etcd, &keys.config(), &config);
    let rollout = "{\"global_bp\": 2500}";
    let rollout_rev = put(&etcd, &keys.rollout(), rollout);
    let f = fleet_router(&[etcd.url()], "ams");
    // Applied, and then written to the cache file (just after /status
    // shows the revision).
    let cache = f.dir.path().join("cache.json");
    wait_for(Duration::from_secs(10), || {
        revision(&f.r, "config") == rev
            && revision(&f.r, "rollout") == rollout_rev
            && std::fs::read_to_string(&cache).is_ok_and(|t| t.contains("2500"))
    });
    let FleetRouter { r, dir, path } = f;
    drop(r);
    etcd.kill();

    // The same file, etcd down: it starts from the cache.
    assert!(
        dir.path().join("cache.json").exists(),
        "no cache file written"
    );
    let r = start_router_with(&path, &[], Some(&dir.path().join("again.log")));
    let c = control(&r);
    assert_eq!(c["source"], "cache file", "{c}");
    assert_eq!(c["config_revision"], rev);
    assert_eq!(c["connected"], false);
    for url in urls(200) {
        let resp = get(&r, &url);
        assert_eq!(resp.status, 200);
        let got = (
            resp.headers["x-ketama-ring"].clone(),
            resp.headers["x-ketama-backend"].clone(),
        );
        assert_eq!(
            got,
            expected(&config, rollout, "ams", &url),
            "{url} from the cache"
        );
    }
    drop(r);

    // No cache, no backends of its own, etcd down: it refuses to start,
    // saying why.
    let empty = tempfile::tempdir().unwrap();
    let lonely = empty.path().join("router.toml");
    std::fs::write(
        &lonely,
        local_file(
            &[etcd.url()],
            any_port(),
            any_port(),
            "ams",
            &empty.path().join("none.json"),
        ),
    )
    .unwrap();
    let out = router_command()
        .args(["--config", lonely.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no routing config") && err.contains("cache"),
        "{err}"
    );
}

#[test]
fn an_invalid_config_is_refused_by_every_router() {
    let etcd = EtcdServer::start().unwrap();
    let origins: Vec<Origin> = (0..2).map(|i| Origin::start(i).unwrap()).collect();
    let refs: Vec<&Origin> = origins.iter().collect();
    let keys = Keys::new(PREFIX);
    let rev = put(&etcd, &keys.config(), &shared(&refs, &[1, 1]));
    let routers: Vec<FleetRouter> = ["ams", "sin"]
        .iter()
        .map(|s| fleet_router(&[etcd.url()], s))
        .collect();
    for f in &routers {
        wait_for(Duration::from_secs(10), || revision(&f.r, "config") == rev);
    }
    // Written straight to the key, past `ketama fleet push`'s check.
    let bad = "[[backends]]\naddress = \"not an address\"\n";
    let bad_rev = put(&etcd, &keys.config(), bad);
    for f in &routers {
        wait_for(Duration::from_secs(5), || {
            control(&f.r)["rejected"]["revision"] == bad_rev
        });
        let c = control(&f.r);
        assert_eq!(c["config_revision"], rev, "{c}");
        assert!(
            c["rejected"]["error"]
                .as_str()
                .unwrap()
                .contains("backends[0].address"),
            "{c}"
        );
        for url in urls(50) {
            assert_eq!(get(&f.r, &url).status, 200);
        }
        assert!(sample(&metrics_text(&f.r), "ketama_control_rejected_total") >= 1.0);
    }
    // Each router writes its registration after it applied (or refused)
    // the batch, so etcd's copy can lag `/status`'s by that write: polled
    // (read once, it failed 1 run in 40 beside four busy loops).
    wait_for(Duration::from_secs(10), || {
        let regs = ketama_fleet::registrations(&etcd.client(), &keys).unwrap();
        regs.len() == routers.len()
            && regs
                .iter()
                .all(|r| r.rejected.as_ref().is_some_and(|x| x.revision == bad_rev))
    });
}
