//! A key change rolled out as a migration (`[migration.key]`), end to end:
//! the old side keeps `[key]` (`$request_uri` as sent) and the new side
//! takes the new key (`sort_query`); the side is chosen by the new key,
//! so that both orders of one query go to one side; the previous owner
//! header names the old key's backend on the old ring. Every expectation
//! is computed here from the rings and the rollout's bucket rule, not by
//! the router's code.

mod common;

use std::net::SocketAddr;

use common::echo::echo_origin;
use common::*;
use ketama::migration::rollout_bucket;
use ketama::{Layout, Node, RingBuilder};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const HINT: &str = "x-ketama-previous-owner";

/// The query's chunks sorted bytewise, empty ones dropped (what
/// `sort_query` means, written out again here).
fn sorted(target: &str) -> String {
    let Some((path, query)) = target.split_once('?') else {
        return target.to_string();
    };
    let mut chunks: Vec<&str> = query.split('&').filter(|c| !c.is_empty()).collect();
    chunks.sort();
    match chunks.is_empty() {
        true => path.to_string(),
        false => format!("{path}?{}", chunks.join("&")),
    }
}

#[test]
fn a_key_change_rolls_out_by_the_new_keys_side_with_the_old_keys_previous_owner() {
    let origins: Vec<SocketAddr> = (0..4).map(|_| echo_origin()).collect();
    let bp = 5000;
    let (r, _dir) = router_over(
        &origins,
        "",
        &format!(
            "enabled = false\n\n[migration]\nring = {{ compat = \"nginx\", layout = \"compact\", point_multiple = 40 }}\nglobal_bp = {bp}\nprevious_owner_header = \"{HINT}\"\n\n[migration.key.normalize]\nsort_query = true\n"
        ),
    );
    let ring = |points| {
        RingBuilder::new()
            .layout(Layout::Compact)
            .point_multiple(points)
            .build(
                origins
                    .iter()
                    .map(|a| Node::new(a.to_string(), 1))
                    .collect(),
            )
            .unwrap()
    };
    let (old, new) = (ring(160), ring(40));
    let server = |ring: &ketama::Ring, key: &str| -> String {
        ring.nodes()[ring.node_index(key.as_bytes()).unwrap()]
            .server()
            .to_string()
    };
    let mut rng = StdRng::seed_from_u64(62);
    let (mut on_new, mut on_old, mut hinted, mut failures) = (0, 0, 0, Vec::new());
    for i in 0..400 {
        let mut params: Vec<String> = ["a", "b", "c", "d"]
            .iter()
            .map(|n| format!("{n}={}", rng.random_range(0..3)))
            .collect();
        params.shuffle(&mut rng);
        let target = format!("/o/{}?{}", i % 100, params.join("&"));
        let new_key = sorted(&target);
        let side_new = u32::from(rollout_bucket(new_key.as_bytes())) < bp;
        let (want_ring, want) = match side_new {
            true => ("new", server(&new, &new_key)),
            false => ("old", server(&old, &target)),
        };
        let previous = server(&old, &target);
        let want_hint = (side_new && previous != want).then(|| previous.clone());
        let resp = request(r.proxy, "GET", &target, &[], "").unwrap();
        let port = want.rsplit(':').next().unwrap();
        let got_port = resp.body.split(' ').nth(1).unwrap_or("");
        let got_hint = resp
            .body
            .split(" +prev=")
            .nth(1)
            .map(|h| h.trim().to_string());
        let got_ring = resp
            .headers
            .get("x-ketama-ring")
            .cloned()
            .unwrap_or_default();
        if resp.status != 200 || got_port != port || got_ring != want_ring || got_hint != want_hint
        {
            failures.push(format!(
                "{target}: want {want_ring} {want} hint {want_hint:?}; got {} {got_ring} {:?}",
                resp.status, resp.body
            ));
        }
        match side_new {
            true => on_new += 1,
            false => on_old += 1,
        }
        hinted += usize::from(want_hint.is_some());
    }
    eprintln!("{on_old} on the old side, {on_new} on the new ({hinted} with a previous owner)");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        on_old > 100 && on_new > 100 && hinted > 20,
        "{on_old} {on_new} {hinted}"
    );
}

#[test]
fn both_orders_of_a_query_take_one_side_and_one_backend_on_the_new_key() {
    let origins: Vec<SocketAddr> = (0..4).map(|_| echo_origin()).collect();
    let (r, _dir) = router_over(
        &origins,
        "",
        "enabled = false\n\n[migration]\nring = { compat = \"nginx\", layout = \"compact\" }\nglobal_bp = 10000\n\n[migration.key]\ntemplate = \"$uri?w=$arg_w\"\n",
    );
    // At 100% every request takes the new key: `$uri?w=$arg_w` ignores the
    // other parameters and their order.
    let mut seen = std::collections::BTreeSet::new();
    for q in ["w=640&fmt=webp", "fmt=avif&w=640", "w=640", "x=1&w=640&y=2"] {
        let resp = request(r.proxy, "GET", &format!("/img/cat.jpg?{q}"), &[], "").unwrap();
        assert_eq!(resp.status, 200);
        assert_eq!(
            resp.headers.get("x-ketama-ring").map(String::as_str),
            Some("new")
        );
        seen.insert(resp.body.split(' ').nth(1).unwrap().to_string());
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
}

#[test]
fn a_migration_key_is_validated_as_the_key_is_and_named_by_its_place() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    for (key, want) in [
        (
            "template = \"$nope\"",
            "migration.key.template: template \"$nope\"",
        ),
        (
            "balance = \"source\"",
            "migration.key.balance: balance source hashes the client's address",
        ),
    ] {
        std::fs::write(
            &path,
            format!("[admin]\nlisten = \"127.0.0.1:1\"\nauth = false\n\n[[backends]]\naddress = \"127.0.0.1:2\"\n\n[migration]\nring = {{ point_multiple = 40 }}\n\n[migration.key]\n{key}\n"),
        )
        .unwrap();
        let out = router_command()
            .args(["--check", "--config", path.to_str().unwrap()])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(want), "{key}: {err}");
    }
}

#[test]
fn the_fleets_shared_config_carries_a_migration_key() {
    // What `ketama fleet push` checks and every router applies from etcd.
    let shared = "[[backends]]\naddress = \"127.0.0.1:2\"\n\n[migration]\nring = { point_multiple = 40 }\nglobal_bp = 100\n\n[migration.key.normalize]\nsort_query = true\n";
    let v = ketama_config::check_shared(shared, "etcd config").unwrap();
    let new = v.new_key.expect("[migration.key] kept");
    assert!(new.normalize().query.sort);
    assert!(!v.key.normalize().query.sort, "the old side keeps [key]");
    let e = ketama_config::check_shared(
        &shared.replace("sort_query = true", "keep_query = [\"\"]"),
        "etcd config",
    )
    .unwrap_err();
    assert!(e.key.starts_with("migration.key.normalize"), "{e}");
}
