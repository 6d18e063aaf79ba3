//! The etcd client against a real etcd (Debian's etcd-server): reads,
//! compare-and-swap, leases, watches (changes, compaction) and auth.

use std::time::Duration;

use ketama_fleet::etcd::{Client, EtcdError, Options};
use ketama_fleet::testing::EtcdServer;
use serde_json::json;

fn client(etcd: &EtcdServer, credentials: Option<(&str, &str)>) -> Client {
    Client::new(&Options {
        endpoints: vec![etcd.url()],
        credentials: credentials.map(|(u, p)| (u.to_string(), p.to_string())),
        timeout: Duration::from_secs(2),
        watch_idle: Duration::from_secs(5),
        ..Default::default()
    })
    .unwrap()
}

#[test]
fn reads_writes_and_compare_and_swap() {
    let etcd = EtcdServer::start().unwrap();
    let c = client(&etcd, None);
    assert_eq!(c.get("/k/a").unwrap().0, None);
    let r1 = c.put_if("/k/a", b"one", 0).unwrap();
    let (kv, _) = c.get("/k/a").unwrap();
    let kv = kv.unwrap();
    assert_eq!((kv.value.as_slice(), kv.mod_revision), (&b"one"[..], r1));
    // A stale expectation is refused with the key's current revision.
    match c.put_if("/k/a", b"two", r1 - 1) {
        Err(EtcdError::Conflict {
            current, expected, ..
        }) => {
            assert_eq!((current, expected), (r1, r1 - 1))
        }
        other => panic!("{other:?}"),
    }
    // "Absent" is revision 0: creating over an existing key is refused.
    assert!(
        matches!(c.put_if("/k/a", b"x", 0), Err(EtcdError::Conflict { current, .. }) if current == r1)
    );
    let r2 = c.put_if("/k/a", b"two", r1).unwrap();
    assert!(r2 > r1);
    c.put("/k/b", b"b", None).unwrap();
    c.put("/kz", b"outside", None).unwrap();
    let (all, _) = c.list("/k/").unwrap();
    let keys: Vec<_> = all.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["/k/a", "/k/b"]);
}

#[test]
fn leases_expire_their_keys() {
    let etcd = EtcdServer::start().unwrap();
    let c = client(&etcd, None);
    let lease = c.grant(5).unwrap();
    c.put("/routers/x", b"{}", Some(lease)).unwrap();
    assert!(c.keep_alive(lease).unwrap() > 0);
    c.revoke(lease).unwrap();
    assert_eq!(
        c.get("/routers/x").unwrap().0,
        None,
        "revoked with its lease"
    );
    assert_eq!(
        c.keep_alive(lease).unwrap(),
        0,
        "a gone lease renews to TTL 0"
    );
}

#[test]
fn watches_see_changes_and_report_compaction() {
    let etcd = EtcdServer::start().unwrap();
    let c = client(&etcd, None);
    let (_, rev) = c.get("/w/config").unwrap();
    let mut end = b"/w/rollout".to_vec();
    end.push(0);
    let mut w = c.watch("/w/config", &end, rev + 1).unwrap();
    c.put("/w/routers/r1", b"not watched", None).unwrap();
    let r = c.put("/w/rollout", b"{}", None).unwrap();
    let batch = w.next_batch().unwrap().unwrap();
    assert_eq!(batch.events.len(), 1, "{batch:?}");
    assert_eq!(
        (
            batch.events[0].kv.key.as_str(),
            batch.events[0].kv.mod_revision
        ),
        ("/w/rollout", r)
    );
    assert!(!batch.events[0].deleted);

    // Compact past a revision; a watch from before it is told so.
    let now = c.put("/w/config", b"c", None).unwrap();
    ureq::post(&format!("{}/v3/kv/compaction", etcd.url()))
        .send_string(&json!({"revision": now.to_string(), "physical": true}).to_string())
        .unwrap();
    let err = c
        .watch("/w/config", &end, rev + 1)
        .and_then(|mut w| w.next_batch())
        .unwrap_err();
    assert!(matches!(err, EtcdError::Compacted { .. }), "{err}");
}

#[test]
fn authenticates_with_a_user() {
    let etcd = EtcdServer::start().unwrap();
    let post = |path: &str, body: serde_json::Value| {
        ureq::post(&format!("{}{path}", etcd.url()))
            .send_string(&body.to_string())
            .unwrap();
    };
    post(
        "/v3/auth/user/add",
        json!({"name": "root", "password": "rootpw"}),
    );
    post("/v3/auth/role/add", json!({"name": "root"}));
    post(
        "/v3/auth/user/grant",
        json!({"user": "root", "role": "root"}),
    );
    post("/v3/auth/enable", json!({}));

    let anonymous = client(&etcd, None);
    let err = anonymous.put("/a/k", b"v", None).unwrap_err();
    assert!(matches!(err, EtcdError::Status { .. }), "{err}");
    let wrong = client(&etcd, Some(("root", "nope")));
    assert!(wrong.get("/a/k").is_err());
    let root = client(&etcd, Some(("root", "rootpw")));
    let r = root.put("/a/k", b"v", None).unwrap();
    assert_eq!(root.get("/a/k").unwrap().0.unwrap().mod_revision, r);
}

#[test]
fn an_unreachable_etcd_is_a_clear_error() {
    let mut etcd = EtcdServer::start().unwrap();
    let c = client(&etcd, None);
    etcd.kill();
    let err = c.get("/x").unwrap_err();
    assert!(matches!(err, EtcdError::Unreachable { .. }), "{err}");
    assert!(err.to_string().contains(&etcd.url()), "{err}");
}
