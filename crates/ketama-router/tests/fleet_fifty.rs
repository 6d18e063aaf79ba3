//! Fifty routers, one etcd cluster: a benchmark, not a test (ignored;
//! `scripts/fleetbench.sh` runs it with release routers). Fifty routers
//! (one thread each, scopes across ten data-centre names, the default
//! lease and backoff, health checks every 5 s) steered by a three-member
//! etcd cluster before four origins take 100 rollout and 20 config
//! changes. It measures the time from each write to the last router
//! showing it in `/status`, the CPU of etcd and of all routers while idle
//! and while changing, their RSS, and whether any request through a
//! sample of routers saw the wrong ring for its scope once a change had
//! applied (each rollout puts every scope wholly on one ring, so the ring
//! a request must see is known without the library).

mod common;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use common::fleet::{control, PREFIX};
use common::*;
use ketama_fleet::testing::EtcdCluster;
use ketama_fleet::Keys;
use ketama_router::origin::Origin;
use rand::{Rng, SeedableRng};

const ROUTERS: usize = 50;
const SCOPES: usize = 10;

fn shared(origins: &[Origin], weights: &[u32]) -> String {
    let mut s = String::from(
        "[ring]\nlayout = \"compact\"\n\n[health]\ninterval_ms = 5000\ntimeout_ms = 500\n\n[migration]\nglobal_bp = 0\n[migration.ring]\nlayout = \"compact\"\npoint_multiple = 40\n",
    );
    for (o, w) in origins.iter().zip(weights) {
        s.push_str(&format!(
            "\n[[backends]]\naddress = \"{}\"\nweight = {w}\n",
            o.addr()
        ));
    }
    s
}

/// A router's own file: its ports, its scope, the cluster, and `[control]`
/// defaults (lease 10 s, backoff 100 ms to 5 s).
fn local(urls: &[String], n: usize, dir: &std::path::Path) -> (RouterProc, tempfile::TempDir) {
    let (proxy, admin) = (any_port(), any_port());
    let d = tempfile::tempdir_in(dir).unwrap();
    let path = d.path().join("router.toml");
    let text = format!(
        "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[control]\netcd = {urls:?}\nprefix = \"{PREFIX}\"\nscope = \"dc{}\"\nid = \"r{n}\"\ncache_file = \"{}\"\n",
        n % SCOPES,
        d.path().join("cache.json").display()
    );
    std::fs::write(&path, text).unwrap();
    (start_router(&path), d)
}

/// CPU seconds (user + system) a process has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, r)| r)
        .split_whitespace()
        .collect();
    let ticks: u64 = fields
        .get(11..13)
        .map_or(0, |f| f.iter().filter_map(|v| v.parse::<u64>().ok()).sum());
    ticks as f64 / 100.0
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// Per thread name, over every thread of `pids`: nanoseconds on a CPU
/// (`schedstat`, exact where clock ticks are 10 ms) and voluntary context
/// switches (wakeups).
fn by_thread(pids: &[u32]) -> std::collections::BTreeMap<String, (u64, u64)> {
    let mut out = std::collections::BTreeMap::new();
    for pid in pids {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let read = |f: &str| std::fs::read_to_string(t.path().join(f)).unwrap_or_default();
            let ns = read("schedstat")
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok());
            let switches = read("status")
                .lines()
                .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse().ok());
            let e = out.entry(read("comm").trim().to_string()).or_insert((0, 0));
            e.0 += ns.unwrap_or(0);
            e.1 += switches.unwrap_or(0);
        }
    }
    out
}

fn total_cpu(pids: &[u32]) -> f64 {
    pids.iter().map(|&p| cpu_seconds(p)).sum()
}

/// Polls every router's `/status` round robin until each shows `rev` in
/// `field`: the time from `since` to each router's first sighting.
fn arrivals(routers: &[RouterProc], field: &str, rev: i64, since: Instant) -> Vec<Duration> {
    let mut seen: Vec<Option<Duration>> = vec![None; routers.len()];
    let deadline = since + Duration::from_secs(30);
    while seen.iter().any(Option::is_none) {
        assert!(
            Instant::now() < deadline,
            "{field} {rev} did not reach every router in 30 s"
        );
        for (i, r) in routers.iter().enumerate() {
            if seen[i].is_none() && control(r)[field].as_i64() == Some(rev) {
                seen[i] = Some(since.elapsed());
            }
        }
    }
    seen.into_iter().flatten().collect()
}

fn quantile(xs: &mut [f64], q: f64) -> f64 {
    xs.sort_by(|a, b| a.total_cmp(b));
    xs[((xs.len() - 1) as f64 * q).round() as usize]
}

#[test]
#[ignore = "a benchmark: scripts/fleetbench.sh"]
fn fifty_routers_one_cluster() {
    let etcd = EtcdCluster::start(3).unwrap();
    let urls = etcd.urls();
    let origins: Vec<Origin> = (0..4).map(|i| Origin::start(i).unwrap()).collect();
    let keys = Keys::new(PREFIX);
    let c = etcd.client();
    let rev = c
        .put(
            &keys.config(),
            shared(&origins, &[1, 1, 1, 1]).as_bytes(),
            None,
        )
        .unwrap();
    let root = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let (routers, _dirs): (Vec<RouterProc>, Vec<tempfile::TempDir>) =
        (0..ROUTERS).map(|n| local(&urls, n, root.path())).unzip();
    arrivals(&routers, "config_revision", rev, Instant::now());
    let start_s = started.elapsed().as_secs_f64();
    let pids: Vec<u32> = routers.iter().map(|r| r.child.id()).collect();
    let etcd_pids = etcd.pids();

    // Idle: nothing written for 30 s (leases kept alive, health checks),
    // once the starts have settled.
    std::thread::sleep(Duration::from_secs(15));
    let (r0, e0, t0) = (total_cpu(&pids), total_cpu(&etcd_pids), Instant::now());
    let threads0 = by_thread(&pids);
    std::thread::sleep(Duration::from_secs(30));
    let idle_s = t0.elapsed().as_secs_f64();
    let threads1 = by_thread(&pids);
    let mut idle_threads: Vec<(String, f64, f64)> = threads1
        .iter()
        .map(|(name, &(ns, sw))| {
            let (ns0, sw0) = threads0.get(name).copied().unwrap_or((0, 0));
            let per = idle_s * ROUTERS as f64;
            (
                name.clone(),
                ns.saturating_sub(ns0) as f64 / 1e9 / idle_s,
                sw.saturating_sub(sw0) as f64 / per,
            )
        })
        .collect();
    idle_threads.sort_by(|a, b| b.1.total_cmp(&a.1));
    let idle_exact: f64 = idle_threads.iter().map(|t| t.1).sum();
    let idle_routers = (total_cpu(&pids) - r0) / idle_s;
    let idle_etcd = (total_cpu(&etcd_pids) - e0) / idle_s;
    let rss_idle: f64 = pids.iter().map(|&p| rss_mib(p)).sum();

    // Changing: 100 rollouts (every scope wholly on one ring) and 20
    // configs (weights changed), interleaved.
    let mut rng = rand::rngs::StdRng::seed_from_u64(26);
    let (mut lags_rollout, mut lags_config) = (Vec::new(), Vec::new());
    let (mut checked, mut wrong) = (0usize, 0usize);
    let (r1, e1, t1) = (total_cpu(&pids), total_cpu(&etcd_pids), Instant::now());
    for k in 0..120 {
        if k % 6 == 5 {
            let weights: Vec<u32> = (0..4).map(|_| rng.random_range(1..5)).collect();
            let at = Instant::now();
            let rev = c
                .put(&keys.config(), shared(&origins, &weights).as_bytes(), None)
                .unwrap();
            let last = arrivals(&routers, "config_revision", rev, at);
            lags_config.push(last.iter().max().unwrap().as_secs_f64() * 1e3);
            continue;
        }
        let new: Vec<bool> = (0..SCOPES).map(|_| rng.random_bool(0.5)).collect();
        let scopes: Vec<String> = new
            .iter()
            .enumerate()
            .map(|(s, &n)| format!("\"dc{s}\": {}", if n { 10_000 } else { 0 }))
            .collect();
        let body = format!(
            "{{\"global_bp\": {}, \"scopes\": {{{}}}}}",
            rng.random_range(0..=10_000),
            scopes.join(", ")
        );
        let at = Instant::now();
        let rev = c.put(&keys.rollout(), body.as_bytes(), None).unwrap();
        let last = arrivals(&routers, "rollout_revision", rev, at);
        lags_rollout.push(last.iter().max().unwrap().as_secs_f64() * 1e3);
        // A light load through a sample of routers, once applied.
        for n in (k % 5..ROUTERS).step_by(5) {
            for j in 0..4 {
                let resp =
                    request(routers[n].proxy, "GET", &format!("/f/{k}/{j}"), &[], "").unwrap();
                let want = if new[n % SCOPES] { "new" } else { "old" };
                checked += 1;
                if resp.status != 200
                    || resp.headers.get("x-ketama-ring").map(String::as_str) != Some(want)
                {
                    wrong += 1;
                }
            }
        }
    }
    let busy_s = t1.elapsed().as_secs_f64();
    let busy_routers = (total_cpu(&pids) - r1) / busy_s;
    let busy_etcd = (total_cpu(&etcd_pids) - e1) / busy_s;
    let rss_busy: f64 = pids.iter().map(|&p| rss_mib(p)).sum();

    // The resolution of the arrival times: one polling pass over all.
    let pass = Instant::now();
    for r in &routers {
        let _ = control(r);
    }
    let pass_ms = pass.elapsed().as_secs_f64() * 1e3;
    let mut all: Vec<f64> = lags_rollout.iter().chain(&lags_config).cloned().collect();
    let max = all.iter().cloned().fold(0.0, f64::max);
    let mut t = String::new();
    let _ = writeln!(t, "fifty routers: {ROUTERS} routers ({SCOPES} scopes), 3 etcd members, 4 origins; all {ROUTERS} applied the first config {start_s:.1} s after the first was started\n");
    let _ = writeln!(t, "| measure | value |\n|---|---|");
    let _ = writeln!(t, "| one polling pass over all {ROUTERS} `/status` (the figures' resolution) | {pass_ms:.0} ms |");
    let _ = writeln!(
        t,
        "| write to last router, all 120 changes | p50 {:.0} ms, p99 {:.0} ms, max {max:.0} ms |",
        quantile(&mut all, 0.5),
        quantile(&mut all, 0.99)
    );
    let _ = writeln!(
        t,
        "| write to last router, 100 rollouts | p50 {:.0} ms, p99 {:.0} ms |",
        quantile(&mut lags_rollout, 0.5),
        quantile(&mut lags_rollout, 0.99)
    );
    let _ = writeln!(
        t,
        "| write to last router, 20 configs | p50 {:.0} ms, p99 {:.0} ms |",
        quantile(&mut lags_config, 0.5),
        quantile(&mut lags_config, 0.99)
    );
    let _ = writeln!(
        t,
        "| CPU of all {ROUTERS} routers, idle ({idle_s:.0} s) | {:.2}% of a core ({:.3}% each) |",
        idle_routers * 100.0,
        idle_routers * 100.0 / ROUTERS as f64
    );
    let _ = writeln!(
        t,
        "| the same from `schedstat` (ns on a CPU) | {:.2}% of a core |",
        idle_exact * 100.0
    );
    let parts: Vec<String> = idle_threads
        .iter()
        .filter(|t| t.1 > 0.0)
        .take(6)
        .map(|(n, cpu, w)| format!("{n} {:.2}% ({w:.1} wakeups/s a router)", cpu * 100.0))
        .collect();
    let _ = writeln!(
        t,
        "| idle CPU by thread, all routers | {} |",
        parts.join(", ")
    );
    let _ = writeln!(
        t,
        "| CPU of etcd (3 members), idle | {:.2}% of a core |",
        idle_etcd * 100.0
    );
    let _ = writeln!(
        t,
        "| CPU of all routers while changing ({busy_s:.0} s) | {:.1}% of a core |",
        busy_routers * 100.0
    );
    let _ = writeln!(
        t,
        "| CPU of etcd while changing | {:.1}% of a core |",
        busy_etcd * 100.0
    );
    let _ = writeln!(t, "| RSS of all routers, idle / after the changes | {rss_idle:.0} MiB / {rss_busy:.0} MiB ({:.1} MiB each) |", rss_busy / ROUTERS as f64);
    let _ = writeln!(t, "| requests through a sample of routers after each rollout applied | {checked}, {wrong} saw the wrong ring |");
    eprintln!("{t}");
    if let Ok(path) = std::env::var("KETAMA_FLEET_REPORT") {
        std::fs::write(path, &t).unwrap();
    }
    assert_eq!(wrong, 0, "requests saw the wrong ring for their scope");
}
