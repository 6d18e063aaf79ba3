//! The admin page at size, measured (not a timed test: `--ignored`):
//!
//! ```text
//! cargo test --release -p ketama-router --test ui_scale -- --ignored --nocapture
//! ```
//!
//! - 50 backends with traffic and one stopped: the screenshot in
//!   docs/admin-page.md (`docs/admin-page-50.png`);
//! - 10,000 backends: what `/ui/data` weighs and how long it takes (20
//!   fetches: median and max), and how long the page takes to draw in
//!   headless Chromium (its own `performance.now()` around the drawing);
//!   and what a `/metrics` scrape takes at that size.

mod common;

use std::net::SocketAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use ketama_router::origin::Origin;

#[test]
#[ignore]
fn screenshot_at_50_backends() {
    let origins: Vec<Origin> = (0..50).map(|i| Origin::start(i).unwrap()).collect();
    let addrs: Vec<SocketAddr> = origins.iter().map(|o| o.addr()).collect();
    let (r, _d) = router_over(&addrs, "", "");
    origins[7].kill();
    let proxy = r.proxy;
    // Traffic while the page draws (a second of it before, then on).
    let load = std::thread::spawn(move || {
        let end = Instant::now() + Duration::from_secs(8);
        let mut i = 0u64;
        while Instant::now() < end {
            let _ = request(proxy, "GET", &format!("/file/{i}"), &[], "");
            i += 1;
        }
    });
    std::thread::sleep(Duration::from_secs(1));
    let out = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/admin-page-50.png");
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/ui_render_time.py"
    );
    let url = format!("http://{}/ui#token=sekret", r.admin);
    let done = Command::new("python3")
        .args([script, &url, "6", out])
        .status()
        .unwrap();
    assert!(done.success());
    load.join().unwrap();
    println!("wrote {out}");
}

#[test]
#[ignore]
fn the_page_at_10000_backends() {
    let addrs: Vec<SocketAddr> = (0..10_000)
        .map(|i| {
            format!("10.{}.{}.{}:8080", i / 65536, i / 256 % 256, i % 256)
                .parse()
                .unwrap()
        })
        .collect();
    let (r, _dir, _) = router_from(|proxy, admin, _| {
        config_with(&addrs, proxy, admin, "", "").replace(
            "[health]\ninterval_ms = 200\ntimeout_ms = 200",
            "[health]\nenabled = false",
        )
    });
    let mut times = Vec::new();
    let mut size = 0;
    for _ in 0..21 {
        let t = Instant::now();
        let resp = admin_call(&r, "GET", "/ui/data", "");
        times.push(t.elapsed());
        assert_eq!(resp.status, 200);
        size = resp.body.len();
    }
    // The first computes the state's shares (once per state).
    let first = times.remove(0);
    times.sort();
    println!(
        "/ui/data at 10,000 backends: {size} bytes; first {:.1} ms, then median {:.1} ms, max {:.1} ms",
        first.as_secs_f64() * 1e3,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3
    );
    assert!(size < 2 << 20, "{size} bytes");
    // Timed by curl (the test's own reader is slower than the scrape).
    let mut scrapes = Vec::new();
    for _ in 0..10 {
        let out = Command::new("curl")
            .args(["-s", "-o", "/dev/null", "-w", "%{time_total}"])
            .args(["-H", "Authorization: Bearer sekret"])
            .arg(format!("http://{}/metrics", r.admin))
            .output()
            .unwrap();
        let secs: f64 = String::from_utf8_lossy(&out.stdout).parse().unwrap();
        scrapes.push(Duration::from_secs_f64(secs));
    }
    let m = admin_call(&r, "GET", "/metrics", "");
    let samples = m.body.lines().filter(|l| !l.starts_with('#')).count();
    scrapes.sort();
    println!(
        "/metrics at 10,000 backends: {samples} samples, median {:.1} ms, max {:.1} ms",
        scrapes[5].as_secs_f64() * 1e3,
        scrapes[9].as_secs_f64() * 1e3
    );
    // Real time (Chromium's virtual time would stop the page's clock):
    // the page's own figures after 7 s, three refreshes in.
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/ui_render_time.py"
    );
    let out = Command::new("python3")
        .args([script, &format!("http://{}/ui#token=sekret", r.admin), "7"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    println!(
        "page: {} bytes fetched in {} ms, drawn in {} ms, {} table rows in the DOM",
        v["fetchBytes"], v["fetchMs"], v["renderMs"], v["rows"]
    );
}
