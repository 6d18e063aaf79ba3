//! `ketama fleet` against a real three-member etcd cluster: the leader
//! killed while a rollout is being written (the write lands whole or fails
//! with a clear error, never half), and `fleet status` saying the cluster
//! has no quorum when two of three are down.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ketama_fleet::testing::EtcdCluster;
use ketama_fleet::Keys;

const PREFIX: &str = "/ketama/cluster/";

fn fleet(etcd: &EtcdCluster, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ketama"));
    c.arg("fleet")
        .args(args)
        .args([
            "--etcd",
            &etcd.urls().join(","),
            "--prefix",
            PREFIX,
            "--timeout-ms",
            "1500",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// The rollout's share as etcd holds it now (read once a leader is back).
fn stored_bp(etcd: &EtcdCluster) -> Option<u64> {
    let c = etcd.client();
    let deadline = Instant::now() + Duration::from_secs(15);
    let kv = loop {
        match c.get(&Keys::new(PREFIX).rollout()) {
            Ok((kv, _)) => break kv,
            Err(e) if Instant::now() > deadline => panic!("no read in 15 s: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    };
    let v: serde_json::Value = serde_json::from_slice(&kv?.value).expect("a whole rollout");
    v["global_bp"].as_u64()
}

fn wait_for_leader(etcd: &EtcdCluster) -> usize {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        if let Some(l) = etcd.leader() {
            return l;
        }
        assert!(Instant::now() < deadline, "no leader in 15 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_leader_killed_mid_rollout_leaves_it_whole_and_a_lost_quorum_is_named() {
    let mut etcd = EtcdCluster::start(3).unwrap();
    let (mut last_ok, mut failures) = (None, 0);
    for round in 1..=3u64 {
        let leader = wait_for_leader(&etcd);
        let bp = (round * 1000).to_string();
        // The write starts, then the leader dies under it.
        let push = fleet(&etcd, &["rollout", "--global-bp", &bp])
            .spawn()
            .unwrap();
        etcd.kill(leader);
        let out = push.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let now = stored_bp(&etcd);
        if out.status.success() {
            assert_eq!(
                now,
                Some(round * 1000),
                "round {round}: reported written, holds {now:?}"
            );
            last_ok = now;
        } else {
            failures += 1;
            assert!(
                err.contains("cannot reach etcd")
                    || err.contains("changed meanwhile")
                    || err.contains("no quorum"),
                "round {round}: an unclear error: {err}"
            );
            // Whole: the previous rollout, or this one if it landed before
            // the answer was lost.
            assert!(
                now == last_ok || now == Some(round * 1000),
                "round {round}: holds {now:?}"
            );
        }
        etcd.restart(leader).unwrap();
    }
    eprintln!("3 rollouts under a dying leader, {failures} failed with a clear error");

    // Two of three down: status says the cluster has no quorum.
    let leader = wait_for_leader(&etcd);
    let other = (0..3).find(|&i| i != leader).unwrap();
    etcd.kill(leader);
    etcd.kill(other);
    // The survivor still names its dead leader until its election timeout
    // passes: poll until it says it has none.
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let out = fleet(&etcd, &["status"]).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success());
        if err.contains("etcd has no quorum: 1 of 3 members are up")
            && err.contains("none has a leader")
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{err}\nmembers: {:?}",
            etcd.client().cluster_status()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Restored: status answers again.
    etcd.restart(leader).unwrap();
    etcd.restart(other).unwrap();
    wait_for_leader(&etcd);
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let out = fleet(&etcd, &["status", "--json"]).output().unwrap();
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert!(v["rollout_revision"].as_i64().unwrap() > 0);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
