//! Bounded loads through real sockets: one hot URL on slow backends under
//! concurrent load spills in ring order, no backend holds more than its
//! bound, and the URL comes back to its own backend once the load drops.

mod common;

use std::sync::{Arc, Barrier};
use std::time::Duration;

use common::*;
use ketama_router::origin::Origin;

const HOT: &str = "/video/viral.mp4";

fn balanced_router(origins: &[Origin], factor: u32) -> (RouterProc, tempfile::TempDir) {
    let (r, dir, _) = router_from(|proxy, admin, _| {
        let mut cfg = format!(
            "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[ring]\nlayout = \"compact\"\n\n[health]\ninterval_ms = 60000\ntimeout_ms = 2000\n\n[balance]\nfactor = {factor}\n"
        );
        for o in origins {
            cfg.push_str(&format!("\n[[backends]]\naddress = \"{}\"\n", o.addr()));
        }
        cfg
    });
    (r, dir)
}

#[test]
fn a_hot_url_spills_in_ring_order_within_the_bound_and_comes_back() {
    let origins: Vec<Origin> = (0..5).map(|i| Origin::start(i).unwrap()).collect();
    let (r, _dir) = balanced_router(&origins, 125);
    let refs: Vec<&Origin> = origins.iter().collect();
    let ring = library_ring(&refs, &[1; 5]);
    let order: Vec<String> = ring
        .replicas(HOT.as_bytes(), 5)
        .iter()
        .map(|n| n.server().to_string())
        .collect();
    let origin_of = |server: &str| {
        origins
            .iter()
            .position(|o| o.addr().to_string() == server)
            .unwrap()
    };

    // Unloaded: the plain ring's answer, no spill.
    let first = get(&r, HOT);
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.headers["x-ketama-backend"], order[0]);
    assert!(!first.headers.contains_key("x-ketama-spill"));

    // Slow backends and 40 concurrent requests for one URL.
    for o in &origins {
        o.set_delay(Duration::from_millis(1500));
        o.reset_max_in_flight();
    }
    const CLIENTS: usize = 40;
    let barrier = Arc::new(Barrier::new(CLIENTS + 1));
    let proxy = r.proxy;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let b = barrier.clone();
            std::thread::spawn(move || {
                b.wait();
                request(proxy, "GET", HOT, &[], "").unwrap()
            })
        })
        .collect();
    barrier.wait();
    // While they are in flight, /status shows every backend within its
    // bound (polled until the burst is placed).
    // The snapshot is read counter by counter, so it adds up only once
    // every request is placed (none ends for 1.5 s).
    wait_for(Duration::from_secs(10), || {
        let s = status_json(&r);
        for b in s["backends"].as_array().unwrap() {
            // Placed under the bound of their time: at most ceil(1.25 x 40 / 5).
            assert!(b["in_flight"].as_u64().unwrap() <= 10, "{b}");
        }
        s["balance"]["in_flight"].as_u64().unwrap() as usize == CLIENTS
    });
    // Every request placed: one more snapshot, taken when nothing moves.
    let peak = status_json(&r);
    let backends = peak["backends"].as_array().unwrap();
    let sum: u64 = backends
        .iter()
        .map(|b| b["in_flight"].as_u64().unwrap())
        .sum();
    assert_eq!(sum as usize, CLIENTS, "{peak}");
    for b in backends {
        // The bound shown is the next request's: ceil(1.25 x (40 + 1) / 5).
        assert_eq!(b["bound"], 11, "{peak}");
    }
    let own_status = backends
        .iter()
        .find(|b| b["server"] == order[0].as_str())
        .unwrap();
    assert_eq!(own_status["in_flight"], 10, "{peak}");
    let responses: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let mut served = [0usize; 5];
    for resp in &responses {
        assert_eq!(resp.status, 200, "{}", resp.body);
        let backend = &resp.headers["x-ketama-backend"];
        let spills: usize = resp
            .headers
            .get("x-ketama-spill")
            .map_or(0, |s| s.parse().unwrap());
        // A request that passed N full backends went to the (N+1)th of the
        // URL's failover order.
        assert_eq!(backend, &order[spills], "spill {spills}");
        served[spills] += 1;
    }
    assert!(served[1] > 0, "nothing spilled: {served:?}");
    // Ring order: a backend is used only once every one before it was full.
    let used = served.iter().rposition(|&n| n > 0).unwrap();
    assert!(served[..used].iter().all(|&n| n > 0), "{served:?}");
    // No backend held more than the bound at the peak: ceil(1.25 x 40 / 5).
    let bound = (125 * CLIENTS).div_ceil(100 * 5);
    for o in &origins {
        assert!(
            o.max_in_flight() <= bound,
            "{} held {}",
            o.addr(),
            o.max_in_flight()
        );
    }
    assert!(
        origins[origin_of(&order[0])].max_in_flight() == bound,
        "the own backend filled up"
    );
    let m = metrics_text(&r);
    let spilled = sample(
        &m,
        &format!("ketama_spills_total{{backend=\"{}\"}}", order[0]),
    );
    assert!(spilled > 0.0, "{m}");

    // Load gone: the URL is back on its own backend, nothing spilled.
    for o in &origins {
        o.set_delay(Duration::ZERO);
    }
    wait_for(Duration::from_secs(5), || {
        status_json(&r)["balance"]["in_flight"] == 0
    });
    for _ in 0..5 {
        let resp = get(&r, HOT);
        assert_eq!(resp.headers["x-ketama-backend"], order[0]);
        assert!(!resp.headers.contains_key("x-ketama-spill"));
    }
}

#[test]
fn without_a_factor_a_hot_url_stays_on_its_backend() {
    let origins: Vec<Origin> = (0..5).map(|i| Origin::start(i).unwrap()).collect();
    let refs: Vec<&Origin> = origins.iter().collect();
    let (_, r, _dir) = {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("router.toml");
        std::fs::write(&path, config(&refs, &[1; 5], any_port(), any_port(), "")).unwrap();
        ((), start_router(&path), dir)
    };
    let own = library_ring(&refs, &[1; 5])
        .node(HOT.as_bytes())
        .unwrap()
        .server()
        .to_string();
    for o in &origins {
        o.set_delay(Duration::from_millis(200));
    }
    let proxy = r.proxy;
    let clients: Vec<_> = (0..20)
        .map(|_| std::thread::spawn(move || request(proxy, "GET", HOT, &[], "").unwrap()))
        .collect();
    for c in clients {
        let resp = c.join().unwrap();
        assert_eq!(resp.headers["x-ketama-backend"], own);
        assert!(!resp.headers.contains_key("x-ketama-spill"));
    }
    assert!(status_json(&r)["balance"].is_null());
}
