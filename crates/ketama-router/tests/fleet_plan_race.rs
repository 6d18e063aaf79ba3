//! A controller's transaction that loses its race, end to end: a real
//! etcd, routers, nginx caches, and `ketama fleet plan run` talking to
//! etcd through a proxy that writes the rollout by hand just before the
//! controller's rollback is sent. The rollback's transaction is refused
//! (the rollout's revision moved); the controller must keep the state
//! etcd holds, see the hand-written rollout at its next round and pause,
//! saying so, and still obey `abort`. (Before one transition function
//! kept the state only once written, it held "rolled back" in memory
//! while etcd said "running", and waited forever.)

mod common;

use std::time::{Duration, Instant};

use common::etcd_race::RaceProxy;
use common::plan::*;
use ketama_fleet::testing::EtcdServer;
use ketama_fleet::Keys;

#[test]
fn a_rollback_that_loses_its_race_pauses_the_plan_and_abort_still_ends_it() {
    let etcd = EtcdServer::start().unwrap();
    let f = Fleet::start(vec![etcd.url()], true);
    let hand = br#"{"global_bp":0,"scopes":{"val1":2500}}"#.to_vec();
    // The first transaction writing the rollout is the plan's first step;
    // the second, its rollback.
    let proxy = RaceProxy::start(
        &etcd.url(),
        f.client(),
        &Keys::new(PREFIX).rollout(),
        2,
        hand,
    );
    let plan = f.plan_file(
        "[[stage]]\nscopes = [\"val1\"]\nsteps_bp = [5000, 10000]\nhold = \"1500ms\"\n[guards]\ninterval = \"300ms\"\nwarmup = \"300ms\"\nbaseline = \"900ms\"\nmin_requests = 20\nmax_origin_rps = 1\nfailures_to_rollback = 1\non_failure = \"rollback\"\n",
    );
    let mut run = std::process::Command::new(ketama());
    run.args(["fleet", "plan", "run", plan.to_str().unwrap()])
        .args(["--etcd", &proxy.url, "--prefix", PREFIX]);
    let run = spawn(run);
    let s = wait_state(&f, Duration::from_secs(20), |s| {
        s.status().name() != "running"
    });
    assert!(proxy.raced(), "the rollback was never sent: {s:?}");
    assert_eq!(s.status().name(), "paused", "{s:?}");
    assert!(
        s.reason().unwrap_or("").contains("written by hand"),
        "{s:?}"
    );
    assert_eq!(s.step(), Some(0), "{s:?}");
    // The fleet keeps the hand-written shares.
    assert_eq!(
        f.rollout(),
        serde_json::json!({"global_bp": 0, "scopes": {"val1": 2500}})
    );
    // The controller still listens.
    let started = Instant::now();
    let o = f.cli(&["plan", "abort"]).output().unwrap();
    assert!(o.status.success(), "{}", output_text(&o));
    let out = run.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", output_text(&out));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(f.state().unwrap().status().name(), "aborted");
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(log.contains("check stage 1 step 1: fail"), "{log}");
    assert!(
        log.contains("not written (the rollout changed after revision"),
        "{log}"
    );
    f.stop();
}
