//! `ketama fleet plan` end to end: a real etcd, two routers in two scopes
//! steered through it, nginx caches in front of one nginx origin as their
//! backends, traffic through both routers, and the `ketama` binary (built
//! by `cargo test --workspace`) running the plan's controller.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use common::plan::*;
use common::*;
use ketama_fleet::testing::{EtcdCluster, EtcdServer};

/// `ketama fleet plan run PLAN --prometheus URL`, to its end.
fn run_on(f: &Fleet, plan: &std::path::Path, prometheus: &str) -> std::process::Output {
    f.cli(&[
        "plan",
        "run",
        plan.to_str().unwrap(),
        "--prometheus",
        prometheus,
    ])
    .output()
    .unwrap()
}

/// `ketama fleet plan status --json`.
fn plan_status_json(f: &Fleet) -> serde_json::Value {
    let out = f.cli(&["plan", "status", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The steps a controller's log says it applied, in order.
fn applied(log: &str) -> Vec<&str> {
    log.lines()
        .filter_map(|l| l.split_once(' ').map(|(_, r)| r))
        .filter(|l| l.starts_with("stage "))
        .collect()
}

/// The two-stage plan ended with exit 0, each of its three steps applied
/// once, in order, and the rollout at its last step.
fn completed_every_step(f: &Fleet, out: &std::process::Output) {
    assert_eq!(out.status.code(), Some(0), "{}", output_text(out));
    let log = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        applied(&log),
        [
            "stage 1 step 1: val1 at 5000 bp",
            "stage 1 step 2: val1 at 10000 bp",
            "stage 2 step 1: ams at 10000 bp"
        ],
        "{log}"
    );
    assert_eq!(
        f.rollout(),
        serde_json::json!({"global_bp": 0, "scopes": {"ams": 10000, "val1": 10000}})
    );
}

const GUARDS: &str =
    "[guards]\ninterval = \"300ms\"\nwarmup = \"300ms\"\nbaseline = \"900ms\"\nmin_requests = 20\n";

fn two_stages(hold: &str) -> String {
    format!("[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [5000, 10000]\nhold = \"{hold}\"\n\n[[stage]]\nscopes = [\"ams\"]\nsteps_bp = [10000]\nhold = \"{hold}\"\n\n")
}

#[test]
fn a_plan_whose_guards_hold_steps_to_the_end() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start(vec![etcd.url()], false);
    let plan = f.plan_file(&format!(
        "{}{GUARDS}max_hit_ratio_drop = 0.5\nmax_error_ratio = 0.05\nfailures_to_rollback = 2\n",
        two_stages("1500ms")
    ));
    let out = f
        .cli(&["plan", "run", plan.to_str().unwrap()])
        .output()
        .unwrap();
    completed_every_step(&f, &out);
    let state = f.state().unwrap();
    assert_eq!(state.status().name(), "completed");
    assert!(
        state
            .checks()
            .iter()
            .any(|c| c.verdict.name() == "pass" && c.figures.hit_ratio.is_some()),
        "{:?}",
        state.checks()
    );
    // Both routers applied the last rollout, and show the plan's end.
    for r in &f.routers {
        wait_for(Duration::from_secs(5), || {
            status_json(r)["rollout"]["in_force_bp"] == 10000
        });
        wait_for(Duration::from_secs(5), || {
            status_json(r)["control"]["plan"]["status"] == "completed"
        });
    }
    let dom = common::page::rendered(&format!("http://{}/ui#token=sekret", f.routers[0].admin));
    let at = dom.find("id=\"plan\"").expect("the plan on the page");
    assert!(
        dom[at..].starts_with("id=\"plan\">completed, stage 2, step 1; last check pass"),
        "{}",
        &dom[at..at + 200]
    );
    let status = f.cli(&["plan", "status"]).output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(
        text.starts_with("plan completed") && text.contains("val1") && text.contains("2/2"),
        "{text}"
    );
    f.stop();
}

#[test]
fn a_plan_over_its_origin_guard_rolls_back() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start(vec![etcd.url()], true);
    let plan = f.plan_file(&format!(
        "{}{GUARDS}max_origin_rps = 1\nfailures_to_rollback = 2\non_failure = \"rollback\"\n",
        two_stages("1500ms")
    ));
    let started = Instant::now();
    let out = f
        .cli(&["plan", "run", plan.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert!(
        stderr.contains("origin requests/s") && stderr.contains("max_origin_rps 1"),
        "{stderr}"
    );
    // Within failures_to_rollback checks of the first step (plus the
    // baseline): well before the first step's hold ended.
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        f.rollout(),
        serde_json::json!({"global_bp": 0, "scopes": {}})
    );
    let state = f.state().unwrap();
    assert_eq!(state.status().name(), "rolled_back");
    assert_eq!(
        state
            .checks()
            .iter()
            .filter(|c| c.verdict.name() == "fail")
            .count(),
        2,
        "{:?}",
        state.checks()
    );
    // Status shows the shares the plan went back to, as the fleet has them.
    let s = plan_status_json(&f);
    assert_eq!(s["status"], "rolled_back");
    assert_eq!(
        (s["stage"].as_u64(), s["step"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(s["stages"][0]["plan_bp"], 0, "{s}");
    assert_eq!(s["stages"][0]["fleet_bp"], 0, "{s}");
    assert_eq!(s["mismatch"], serde_json::Value::Null, "{s}");
    assert_eq!(
        s["checks"][0]["stage"], 1,
        "stages 1-based in --json too: {s}"
    );
    f.stop();
}

#[test]
fn a_hand_written_rollout_pauses_the_plan_and_abort_ends_it() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start(vec![etcd.url()], false);
    let plan = f.plan_file(&format!(
        "{}{GUARDS}max_error_ratio = 0.05\n",
        two_stages("60s")
    ));
    let run = spawn(f.cli(&["plan", "run", plan.to_str().unwrap()]));
    wait_state(&f, Duration::from_secs(10), |s| s.step() == Some(0));
    let manual = f.cli(&["rollout", "--global-bp", "100"]).output().unwrap();
    assert!(manual.status.success(), "{}", output_text(&manual));
    let s = wait_state(&f, Duration::from_secs(5), |s| {
        s.status().name() == "paused"
    });
    assert!(s.reason().unwrap_or("").contains("by hand"), "{s:?}");
    // Never overwritten while paused.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(f.rollout()["global_bp"], 100);
    let abort = f.cli(&["plan", "abort"]).output().unwrap();
    assert!(abort.status.success(), "{}", output_text(&abort));
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", output_text(&out));
    assert_eq!(f.state().unwrap().status().name(), "aborted");
    // Aborted where it was: the plan wrote val1 at 5000, the fleet has the
    // hand-written global 100, and status says so.
    let s = plan_status_json(&f);
    let m = s["mismatch"].as_str().unwrap_or("");
    assert!(
        m.contains("global 100 bp (the plan wrote 0)")
            && m.contains("val1 100 bp (the plan wrote 5000)"),
        "{s}"
    );
    f.stop();
}

#[test]
fn an_etcd_leader_lost_mid_plan_skips_and_repeats_no_step() {
    let mut etcd = EtcdCluster::start(3).unwrap();
    let f = Fleet::start(etcd.urls(), false);
    let plan = f.plan_file(&format!(
        "{}{GUARDS}max_error_ratio = 0.05\n",
        two_stages("2000ms")
    ));
    let run = spawn(f.cli(&["plan", "run", plan.to_str().unwrap()]));
    wait_state(&f, Duration::from_secs(10), |s| s.step() == Some(0));
    let leader = etcd.leader().expect("a leader");
    etcd.kill(leader);
    let out = run.wait_with_output().unwrap();
    completed_every_step(&f, &out);
    f.stop();
}

#[test]
fn plans_the_fleet_cannot_run_are_refused_naming_the_line() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start(vec![etcd.url()], false);
    for (text, says) in [
        (
            "[[stage]]\nscopes = [\"lhr\"]\nsteps_bp = [100]\nhold = \"10s\"\n[guards]\nmax_error_ratio = 0.1\ninterval = \"1s\"\nwarmup = \"1s\"\n",
            "plan.toml:2: stage 1: no router of scope \"lhr\"",
        ),
        (
            "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [1000, 500]\nhold = \"10s\"\n[guards]\nmax_error_ratio = 0.1\n",
            "plan.toml:3: stage 1: steps go up only",
        ),
        (
            "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [100]\nhold = \"1s\"\n[guards]\ninterval = \"1s\"\nwarmup = \"1s\"\nmax_error_ratio = 0.1\n",
            "plan.toml:4: stage 1: hold 1s is shorter than warmup plus two intervals",
        ),
        (
            "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [100]\nhold = \"10s\"\n[guards]\ninterval = \"100ms\"\nwarmup = \"1s\"\nmax_error_ratio = 0.1\n",
            "plan.toml:6: guards.interval (100 ms) is shorter than the routers' report interval (200 ms)",
        ),
        (
            "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [100]\nhold = \"10s\"\n[guards]\ninterval = \"1s\"\nwarmup = \"1s\"\n",
            "[guards] has no guard",
        ),
    ] {
        let p = f.dir.path().join("plan.toml");
        std::fs::write(&p, text).unwrap();
        let out = Command::new(ketama())
            .current_dir(f.dir.path())
            .args(["fleet", "plan", "run", "plan.toml", "--etcd", &f.urls.join(","), "--prefix", PREFIX])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{says:?} not in {err}");
        assert!(f.state().is_none(), "a refused plan was stored");
    }
    f.stop();
}

/// The walk-through of docs/migrations.md, from a real run: three routers
/// (val1, ams, sin) with nginx caches, a three-stage plan, `plan status`
/// after each stage and the chart at the end, written to
/// `$KETAMA_WALKTHROUGH_DIR` (`KETAMA_WALKTHROUGH_DIR=docs/plan-walkthrough
/// cargo test -p ketama-router --test fleet_plan -- --ignored walkthrough`).
#[test]
#[ignore]
fn walkthrough() {
    let out_dir =
        PathBuf::from(std::env::var("KETAMA_WALKTHROUGH_DIR").expect("KETAMA_WALKTHROUGH_DIR"));
    std::fs::create_dir_all(&out_dir).unwrap();
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start_with(
        vec![etcd.url()],
        &["val1", "ams", "sin"],
        Load {
            bust: false,
            keys: 3000,
            quiet: &[],
        },
    );
    let hook = common::hook::Hook::start();
    let text = "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [1000, 10000]\nhold = \"6s\"\n\n[[stage]]\nscopes = [\"ams\"]\nsteps_bp = [2500, 10000]\nhold = \"6s\"\napprove = true            # a gate: waits for `ketama fleet plan approve`\n\n[[stage]]\nscopes = [\"*\"]\nsteps_bp = [10000]\nhold = \"6s\"\n\n[guards]\ncompare = \"concurrent\"    # moved against unmoved keys, new ring against old, in each interval\ninterval = \"500ms\"\nwarmup = \"1s\"\nmin_requests = 100\nmax_hit_ratio_drop = 0.3\nmax_error_ratio = 0.01\nfailures_to_rollback = 3\non_failure = \"rollback\"\n\n[notify]\nwebhook = \"http://127.0.0.1:PORT/hook\"\n";
    std::fs::write(out_dir.join("plan.toml"), text).unwrap();
    let plan = f.plan_file(&text.replace("http://127.0.0.1:PORT/hook", &hook.url));
    let run = spawn(f.cli(&["plan", "run", plan.to_str().unwrap()]));
    let mut seen = Vec::new();
    let mut statuses = String::new();
    let capture = |statuses: &mut String| {
        let o = f.cli(&["plan", "status"]).output().unwrap();
        statuses.push_str(&format!(
            "$ ketama fleet plan status --etcd ... --prefix {PREFIX}\n{}\n",
            String::from_utf8_lossy(&o.stdout)
        ));
    };
    loop {
        let Some(s) = f.state() else {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        };
        if s.gate().is_some() {
            // The operator looks, then opens the gate.
            capture(&mut statuses);
            let o = f.cli(&["plan", "approve"]).output().unwrap();
            assert!(o.status.success(), "{}", output_text(&o));
            statuses.push_str(&format!(
                "$ ketama fleet plan approve --etcd ... --prefix {PREFIX}\n{}\n",
                String::from_utf8_lossy(&o.stdout)
            ));
            continue;
        }
        if s.status().name() != "running" {
            capture(&mut statuses);
            break;
        }
        let k = (s.stage(), s.step());
        if s.step().is_some() && !seen.contains(&k) {
            // A few checks into the step, as an operator would look.
            std::thread::sleep(Duration::from_millis(2500));
            capture(&mut statuses);
            seen.push(k);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    std::fs::write(out_dir.join("status.txt"), statuses).unwrap();
    std::fs::write(out_dir.join("controller.log"), &out.stderr).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !hook
        .events()
        .last()
        .is_some_and(|e| e.starts_with("completed"))
    {
        assert!(Instant::now() < deadline, "{:?}", hook.events());
        std::thread::sleep(Duration::from_millis(20));
    }
    let messages: String = hook
        .seen
        .lock()
        .unwrap()
        .iter()
        .map(|m| format!("{m}\n"))
        .collect();
    std::fs::write(out_dir.join("webhook.jsonl"), messages).unwrap();
    let chart = out_dir.join("plan.svg");
    let o = f
        .cli(&["plan", "status", "--chart", chart.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    f.stop();
}

#[test]
fn a_plan_judged_on_prometheus_rolls_back_on_its_origin_guard() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start(vec![etcd.url()], true);
    // The ams router's target is mislabelled: Prometheus has no series of
    // scope "ams", so a plan that moves it is refused, naming the line.
    let prom = prometheus(&[(f.routers[0].admin, "val1"), (f.routers[1].admin, "AMS")]);
    let plan = f.plan_file(
        "[[stage]]\nscopes = [\"val1\", \"ams\"]\nsteps_bp = [5000]\nhold = \"4s\"\n[guards]\ninterval = \"1s\"\nwarmup = \"1s\"\nbaseline = \"2s\"\nmin_requests = 20\nmax_origin_rps = 1\n",
    );
    let out = run_on(&f, &plan, &prom.url);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("plan.toml:2: stage 1: Prometheus at") && err.contains("scope=\"ams\""),
        "{err}"
    );
    // A check window shorter than two scrapes (250 ms each) would hold at
    // most one sample: every check inconclusive. Refused, naming the line.
    let short = f.plan_file(
        "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [5000]\nhold = \"4s\"\n[guards]\ninterval = \"400ms\"\nwarmup = \"1s\"\nbaseline = \"2s\"\nmax_origin_rps = 1\n",
    );
    let out = run_on(&f, &short, &prom.url);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("plan.toml:6: guards.interval (400 ms) is shorter than two of Prometheus' scrape intervals (250 ms"),
        "{err}"
    );
    let plan = f.plan_file(
        "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [5000, 10000]\nhold = \"4s\"\n[guards]\ninterval = \"1s\"\nwarmup = \"1s\"\nbaseline = \"2s\"\nmin_requests = 20\nmax_origin_rps = 1\nfailures_to_rollback = 2\n",
    );
    let out = run_on(&f, &plan, &prom.url);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("baseline from Prometheus over the last 2000 ms"),
        "{log}"
    );
    assert!(log.contains("above max_origin_rps 1"), "{log}");
    let state = f.state().unwrap();
    assert_eq!(state.status().name(), "rolled_back");
    let fails: Vec<_> = state
        .checks()
        .iter()
        .filter(|c| c.verdict.name() == "fail")
        .collect();
    assert_eq!(fails.len(), 2, "{:?}", state.checks());
    // One request in five is a new key: Prometheus saw origin traffic.
    assert!(
        fails
            .iter()
            .all(|c| c.figures.origin_rps > 1.0 && c.figures.requests > 20),
        "{fails:?}"
    );
    assert_eq!(
        f.rollout(),
        serde_json::json!({"global_bp": 0, "scopes": {}})
    );
    f.stop();
}
