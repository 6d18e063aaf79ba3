//! What an operator must be able to trust in `ketama fleet plan`, end to
//! end with a real etcd, routers, nginx caches and the `ketama` binary:
//! `resume` after a hand-written rollout resumes the first time; a
//! controller killed with SIGKILL is taken over by one `plan run` that
//! waits out its lease, while `status` says the controller is gone; a
//! gate waits for `approve`, `promote` ends a hold, and a webhook hears
//! every change in order; a scope without requests cannot keep a plan
//! waiting forever.

mod common;

use std::time::{Duration, Instant};

use common::hook::Hook;
use common::plan::*;
use ketama_fleet::testing::EtcdServer;

const GUARDS: &str =
    "[guards]\ninterval = \"300ms\"\nwarmup = \"300ms\"\nbaseline = \"900ms\"\nmin_requests = 20\n";

fn status_json(f: &Fleet) -> serde_json::Value {
    let out = f.cli(&["plan", "status", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn status_text(f: &Fleet) -> String {
    let out = f.cli(&["plan", "status"]).output().unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn ok(f: &Fleet, args: &[&str]) -> String {
    let out = f.cli(args).output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", output_text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn resume_after_a_hand_written_rollout_resumes_the_first_time() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start(vec![etcd.url()], false);
    let plan = f.plan_file(&format!(
        "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [5000, 10000]\nhold = \"60s\"\n\n{GUARDS}max_error_ratio = 0.05\n"
    ));
    let mut run = spawn(f.cli(&["plan", "run", plan.to_str().unwrap()]));
    wait_state(&f, Duration::from_secs(10), |s| s.step() == Some(0));
    ok(&f, &["rollout", "--global-bp", "100"]);
    wait_state(&f, Duration::from_secs(5), |s| {
        s.status().name() == "paused"
    });
    // One resume: the plan runs, its step written again over the hand-made
    // rollout, and it stays running.
    let said = ok(&f, &["plan", "resume"]);
    assert!(said.starts_with("plan running"), "{said}");
    assert_eq!(
        f.rollout(),
        serde_json::json!({"global_bp": 0, "scopes": {"val1": 5000}})
    );
    let until = Instant::now() + Duration::from_secs(1);
    while Instant::now() < until {
        assert_eq!(f.state().unwrap().status().name(), "running");
        std::thread::sleep(Duration::from_millis(50));
    }
    let s = status_json(&f);
    assert_eq!(s["mismatch"], serde_json::Value::Null, "{s}");
    assert_eq!(
        (s["stage"].as_u64(), s["step"].as_u64()),
        (Some(1), Some(1))
    );
    run.kill().unwrap();
    let _ = run.wait();
    f.stop();
}

#[test]
fn a_killed_controller_is_taken_over_by_one_run_that_waits_out_its_lease() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start(vec![etcd.url()], false);
    let plan = f.plan_file(&format!(
        "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [5000, 10000]\nhold = \"2500ms\"\n\n[[stage]]\nscopes = [\"ams\"]\nsteps_bp = [10000]\nhold = \"2500ms\"\n\n{GUARDS}max_error_ratio = 0.05\n"
    ));
    let mut first = spawn(f.cli(&["plan", "run", plan.to_str().unwrap()]));
    let before = wait_state(&f, Duration::from_secs(10), |s| s.step() == Some(1));
    let alive = status_json(&f);
    assert!(
        alive["controller"]["lease_ttl_s"].as_i64() > Some(0),
        "{alive}"
    );
    first.kill().unwrap(); // SIGKILL: no chance to let go
    let _ = first.wait();
    // While its lease runs (10 s), status still names it; once it
    // expired, status says no controller holds the plan.
    let deadline = Instant::now() + Duration::from_secs(20);
    let gone = loop {
        let s = status_json(&f);
        if s["orphaned"] == true {
            break s;
        }
        assert!(Instant::now() < deadline, "{s}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(gone["controller"], serde_json::Value::Null, "{gone}");
    assert!(
        status_text(&f).contains("no controller holds the plan"),
        "{}",
        status_text(&f)
    );
    // A second controller killed right after taking the plan leaves a live
    // lease behind: one `plan run` waits it out and finishes the plan.
    let mut second = spawn(f.cli(&["plan", "run"]));
    let deadline = Instant::now() + Duration::from_secs(10);
    while status_json(&f)["controller"].is_null() {
        assert!(
            Instant::now() < deadline,
            "the second controller never took the lock"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    second.kill().unwrap();
    let _ = second.wait();
    // Where the second left the plan: it may have moved on from where the
    // first was killed (the hold passed while the lease ran out), and with
    // both killed nothing moves it now. The takeover resumes there.
    let left = f.state().expect("the plan's state");
    assert!(
        (left.stage(), left.step()) >= (before.stage(), before.step()),
        "{left:?} is behind {before:?}"
    );
    let out = f.cli(&["plan", "run"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("waiting up to"), "{log}");
    assert!(
        log.contains(&format!(
            "at stage {}, step {}",
            left.stage() + 1,
            left.step().map_or(0, |s| s + 1)
        )),
        "taken over elsewhere than {left:?}: {log}"
    );
    // The log's times are RFC 3339 UTC.
    let first_line = log.lines().next().unwrap_or("");
    assert!(
        first_line.len() > 24
            && first_line.as_bytes()[10] == b'T'
            && first_line[..24].ends_with('Z'),
        "{first_line}"
    );
    assert_eq!(f.rollout()["scopes"]["ams"], 10000);
    // Completed, then the fleet reset by hand: status names the difference.
    ok(&f, &["rollout", "--global-bp", "0"]);
    let s = status_json(&f);
    assert_eq!(s["status"], "completed");
    assert_eq!(s["plan_rollout"]["scopes"]["val1"], 10000, "{s}");
    assert_eq!(s["stages"][0]["fleet_bp"], 0, "{s}");
    let m = s["mismatch"].as_str().unwrap_or("");
    assert!(m.contains("val1 0 bp (the plan wrote 10000)"), "{s}");
    assert!(status_text(&f).contains("rollout MISMATCH"));
    f.stop();
}

#[test]
fn a_gate_waits_for_approve_promote_ends_holds_and_the_webhook_hears_it_all() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start(vec![etcd.url()], false);
    let hook = Hook::start();
    let plan = f.plan_file(&format!(
        "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [5000, 10000]\nhold = \"60s\"\n\n[[stage]]\nscopes = [\"ams\"]\nsteps_bp = [10000]\nhold = \"60s\"\napprove = true\n\n{GUARDS}max_error_ratio = 0.05\n\n[notify]\nwebhook = \"{}\"\n",
        hook.url
    ));
    let started = Instant::now();
    let run = spawn(f.cli(&["plan", "run", plan.to_str().unwrap()]));
    wait_state(&f, Duration::from_secs(10), |s| s.step() == Some(0));
    ok(&f, &["plan", "promote"]);
    wait_state(&f, Duration::from_secs(10), |s| s.step() == Some(1));
    ok(&f, &["plan", "promote"]);
    let s = wait_state(&f, Duration::from_secs(10), |s| s.gate().is_some());
    assert_eq!((s.status().name(), s.gate()), ("paused", Some(1)));
    assert!(status_text(&f).contains("gate: stage 2 waits"));
    // The gate is opened by approve only.
    let resume = f.cli(&["plan", "resume"]).output().unwrap();
    assert_eq!(resume.status.code(), Some(1), "{}", output_text(&resume));
    assert!(output_text(&resume).contains("approve"));
    assert_eq!(f.rollout()["scopes"].get("ams"), None);
    let said = ok(&f, &["plan", "approve"]);
    assert!(said.starts_with("plan running"), "{said}");
    assert_eq!(f.rollout()["scopes"]["ams"], 10000);
    ok(&f, &["plan", "promote"]);
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    // Every hold was 60 s: promote ended three of them.
    assert!(
        started.elapsed() < Duration::from_secs(40),
        "{:?}",
        started.elapsed()
    );
    let want = [
        "started 1.0",
        "step 1.1",
        "promoted 1.1",
        "step 1.2",
        "promoted 1.2",
        "gate 1.2",
        "step 2.1",
        "approved 2.1",
        "promoted 2.1",
        "completed 2.1",
    ];
    // Sent from their own thread: wait for the last one.
    let deadline = Instant::now() + Duration::from_secs(5);
    while hook.events().len() < want.len() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(hook.events(), want);
    let last = hook.seen.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last["status"], "completed");
    assert_eq!(last["rollout"]["scopes"]["ams"], 10000, "{last}");
    f.stop();
}

#[test]
fn a_scope_without_requests_ends_the_plan_at_max_inconclusive() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start_with(
        vec![etcd.url()],
        &["val1", "idle"],
        Load {
            bust: false,
            keys: 150,
            quiet: &["idle"],
        },
    );
    let plan = f.plan_file(&format!(
        "[[stage]]\nscopes = [\"idle\"]\nsteps_bp = [10000]\nhold = \"60s\"\n\n{GUARDS}max_error_ratio = 0.05\nmax_inconclusive = 3\nfailures_to_rollback = 1\n"
    ));
    let out = f
        .cli(&["plan", "run", plan.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    // Three refusals logged, the third ending the plan.
    let refused = log
        .lines()
        .filter(|l| {
            l.starts_with("20") && l.contains("baseline refused: stage 1 (idle) had 0 requests")
        })
        .count();
    assert_eq!(refused, 3, "{log}");
    assert!(log.contains("3 baselines refused in a row"), "{log}");
    assert_eq!(
        f.rollout(),
        serde_json::json!({"global_bp": 0, "scopes": {}})
    );
    let s = status_json(&f);
    assert_eq!(s["status"], "rolled_back");
    assert_eq!(s["mismatch"], serde_json::Value::Null, "{s}");
    f.stop();
}

#[test]
fn a_concurrent_comparison_judges_both_rings_in_the_same_interval() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start(vec![etcd.url()], false);
    // No baseline window: the first step comes at once, and each check
    // compares moved keys with unmoved keys, the new ring with the old.
    let plan = f.plan_file(
        "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [5000, 10000]\nhold = \"1500ms\"\n\n[guards]\ncompare = \"concurrent\"\ninterval = \"300ms\"\nwarmup = \"300ms\"\nbaseline = \"60s\"\nmin_requests = 20\nmax_hit_ratio_drop = 0.9\nmax_error_ratio = 0.05\n",
    );
    let started = Instant::now();
    let out = f
        .cli(&["plan", "run", plan.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    // The 60 s baseline was never waited for (two 1.5 s holds otherwise).
    assert!(
        started.elapsed() < Duration::from_secs(55),
        "{:?}\n{}",
        started.elapsed(),
        output_text(&out)
    );
    let state = f.state().unwrap();
    assert_eq!(state.baseline(), None);
    let judged = state.checks().iter().filter(|c| {
        c.verdict.name() == "pass"
            && c.figures.unmoved_hit_ratio.is_some()
            && c.figures.moved_hit_ratio.is_some()
    });
    assert!(judged.count() >= 2, "{:?}", state.checks());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("moved ") && log.contains("unmoved "), "{log}");
    f.stop();
}

#[test]
fn the_operators_own_guards_are_checked_and_refused_where_they_cannot_be() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start(vec![etcd.url()], false);
    let prom = prometheus(&[(f.routers[0].admin, "val1"), (f.routers[1].admin, "ams")]);
    let stage = "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [5000, 10000]\nhold = \"4s\"\n\n[guards]\ninterval = \"1s\"\nwarmup = \"1s\"\nbaseline = \"2s\"\nmin_requests = 20\nfailures_to_rollback = 2\n\n";
    let guard = |query: &str| {
        format!("{stage}[[guards.metric]]\nname = \"requests/s\"\nquery = '{query}'\nmax = 1\n\n[[guards.metric]]\nname = \"some requests\"\nfigure = \"requests\"\nmin = 1\n\n[[guards.metric]]\nname = \"p99\"\nfigure = \"latency_p99\"\nmax = 60\n")
    };
    let run = |text: &str, prometheus: bool| {
        let plan = f.plan_file(text);
        let mut args = vec!["plan", "run", plan.to_str().unwrap()];
        if prometheus {
            args.extend(["--prometheus", prom.url.as_str()]);
        }
        f.cli(&args).output().unwrap()
    };
    let ok_query = "sum(rate(ketama_requests_total[2s]))";
    // A query without Prometheus, and a window under two scrapes (250 ms
    // each): refused, naming the metric's line.
    let out = run(&guard(ok_query), false);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert!(
        output_text(&out).contains(
            "plan.toml:13: guards.metric \"requests/s\": a query needs a Prometheus server"
        ),
        "{}",
        output_text(&out)
    );
    let out = run(&guard("sum(rate(ketama_requests_total[400ms]))"), true);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("window of 400 ms is shorter than two scrape intervals"),
        "{}",
        output_text(&out)
    );
    // The traffic is well above 1 request/s: two failed checks roll back.
    let out = run(&guard(ok_query), true);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("above its max 1"),
        "{}",
        output_text(&out)
    );
    let state = f.state().unwrap();
    let failed: Vec<_> = state
        .checks()
        .iter()
        .filter(|c| c.verdict.name() == "fail")
        .collect();
    assert_eq!(failed.len(), 2, "{:?}", state.checks());
    for c in failed {
        assert!(c.figures.metrics["requests/s"] > 1.0, "{c:?}");
        assert!(c.figures.metrics["some requests"] >= 20.0, "{c:?}");
        // Read from the latency buckets the routers report: a loopback
        // cache answers within milliseconds.
        let p99 = c.figures.metrics["p99"];
        assert!(p99 > 0.0 && p99 < 0.5, "{c:?}");
    }
    assert_eq!(
        f.rollout(),
        serde_json::json!({"global_bp": 0, "scopes": {}})
    );
    f.stop();
}

/// The objects a 10% step moves to cache 0 (on the fleet's rings: nginx's
/// 160 points a weight unit, the new ring 40), as nginx names their files
/// in that cache's store: the MD5 of its cache key, `http://ORIGIN/URI`
/// (each file's `KEY:` line says so).
fn moved_to_cache0(f: &Fleet, keys: u64) -> Vec<std::path::PathBuf> {
    use ketama::{Node, Ring, RingBuilder};
    let addrs = f.nginx_addrs();
    let (caches, origin) = (&addrs[..2], addrs[2]);
    let nodes: Vec<Node> = caches.iter().map(|a| Node::new(a.to_string(), 1)).collect();
    let old = Ring::new(nodes.clone()).unwrap();
    let new = RingBuilder::new().point_multiple(40).build(nodes).unwrap();
    let moved: Vec<String> = (0..keys)
        .map(|k| format!("/obj/{k}"))
        .filter(|k| {
            let (o, n) = (
                old.node(k.as_bytes()).unwrap(),
                new.node(k.as_bytes()).unwrap(),
            );
            ketama::migration::rollout_bucket(k.as_bytes()) < 1000
                && o.server() != n.server()
                && n.server() == caches[0].to_string()
        })
        .map(|k| format!("http://{origin}{k}"))
        .collect();
    // nginx's file name for a key: its MD5 in hex (no `levels`).
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import hashlib,sys\nfor l in sys.argv[1:]: print(hashlib.md5(l.encode()).hexdigest())",
        ])
        .args(&moved)
        .output()
        .unwrap();
    let store = f.dir.path().join("cache0");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|h| store.join(h))
        .collect()
}

#[test]
fn a_concurrent_comparison_rolls_back_when_a_new_owner_stays_cold() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start_with(
        vec![etcd.url()],
        &["val1", "ams"],
        Load {
            bust: false,
            keys: 1500,
            quiet: &[],
        },
    );
    let files = moved_to_cache0(&f, 1500);
    assert!(files.len() > 5, "{} moved objects", files.len());
    // The objects the step moves to cache 0 deleted from it every 300 ms:
    // their new owner stays cold, which unmoved keys (and the same keys'
    // old owner) do not show. Caches emptied whole would show on moved and
    // unmoved keys alike.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let cold = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for p in &files {
                    let _ = std::fs::remove_file(p);
                }
                std::thread::sleep(Duration::from_millis(300));
            }
        })
    };
    let plan = f.plan_file(
        "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [1000]\nhold = \"20s\"\n\n[guards]\ncompare = \"concurrent\"\ninterval = \"1s\"\nwarmup = \"2s\"\nmin_requests = 50\nmax_hit_ratio_drop = 0.1\nfailures_to_rollback = 2\n",
    );
    let out = f
        .cli(&["plan", "run", plan.to_str().unwrap()])
        .output()
        .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    cold.join().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("below unmoved keys'"),
        "{}",
        output_text(&out)
    );
    assert_eq!(
        f.rollout(),
        serde_json::json!({"global_bp": 0, "scopes": {}})
    );
    f.stop();
}
