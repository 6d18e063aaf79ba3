//! The admin API never waits for a change in progress: `/status`,
//! `/ui/data` and `/metrics` read what the routing cell published, never
//! the lock its writers hold through a reload's ring build.

mod common;

use std::time::{Duration, Instant};

use common::*;

/// 2,000 backends of weight 100 at `point_multiple` points a weight unit:
/// 32 million points at 160, a ring build of a quarter of a second or
/// more. No backend is contacted (health checks off, no request proxied).
fn config(proxy: std::net::SocketAddr, admin: std::net::SocketAddr, point_multiple: u32) -> String {
    let mut s = format!(
        "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[ring]\nlayout = \"compact\"\npoint_multiple = {point_multiple}\n\n[health]\nenabled = false\n"
    );
    for i in 0..2000u32 {
        let ip = format!("127.0.{}.{}", 1 + i / 250, 1 + i % 250);
        s.push_str(&format!(
            "\n[[backends]]\naddress = \"{ip}:80\"\nweight = 100\n"
        ));
    }
    s
}

fn timed(r: &RouterProc, path: &str) -> Duration {
    let start = Instant::now();
    let resp = admin_call(r, "GET", path, "");
    assert_eq!(resp.status, 200, "{}", resp.body);
    start.elapsed()
}

#[test]
fn status_and_metrics_answer_as_fast_during_reloads_of_a_large_ring() {
    let (r, _dir, path) = router_from(|proxy, admin, _| config(proxy, admin, 160));
    // 32 million less the points nginx's scheme drops on collisions.
    let points = status_json(&r)["rings"]["only"]["points"].as_u64().unwrap();
    assert!(points > 31_000_000, "{points} points");
    // Warm up, then the time of a sequential /status with nothing else
    // going on.
    for _ in 0..5 {
        timed(&r, "/status");
    }
    let alone = (0..20)
        .map(|_| timed(&r, "/status").max(timed(&r, "/metrics")))
        .max()
        .unwrap();
    // Three reloads, each a full build (the point multiple changes).
    let reloads = {
        let admin = r.admin;
        let path = path.clone();
        std::thread::spawn(move || {
            let mut took = Vec::new();
            for pm in [159, 160, 159] {
                std::fs::write(&path, config(r_proxy(&path), admin, pm)).unwrap();
                let start = Instant::now();
                let resp = request(
                    admin,
                    "POST",
                    "/reload",
                    &[("authorization", "Bearer sekret")],
                    "",
                )
                .unwrap();
                assert_eq!(resp.status, 200, "{}", resp.body);
                took.push(start.elapsed());
            }
            took
        })
    };
    let (mut during, mut worst) = (0, Duration::ZERO);
    while !reloads.is_finished() {
        worst = worst.max(timed(&r, "/status"));
        worst = worst.max(timed(&r, "/metrics"));
        during += 1;
    }
    let took = reloads.join().unwrap();
    let limit = alone * 2 + Duration::from_millis(50);
    assert!(
        worst <= limit,
        "/status or /metrics took {worst:?} during reloads of {took:?}, {alone:?} alone (limit {limit:?})"
    );
    // The requests did overlap the builds.
    let building: Duration = took.iter().sum();
    assert!(
        during >= 3 && building > Duration::from_millis(300),
        "{during} requests during {took:?}"
    );
    assert_eq!(status_json(&r)["rings"]["only"]["point_multiple"], 159);
    // The admin page's data for the new state: its keyspace shares (half a
    // second of work) are computed off the admin runtime, and answered.
    assert_eq!(admin_call(&r, "GET", "/ui/data", "").status, 200);
}

/// The proxy address in the config at `path` (kept across rewrites).
fn r_proxy(path: &std::path::Path) -> std::net::SocketAddr {
    let text = std::fs::read_to_string(path).unwrap();
    let line = text.lines().find(|l| l.starts_with("listen = [")).unwrap();
    line.trim_start_matches("listen = [\"")
        .trim_end_matches("\"]")
        .parse()
        .unwrap()
}
