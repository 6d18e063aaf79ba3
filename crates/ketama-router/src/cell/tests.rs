//! The precedence rule, driven trigger by trigger on a real cell (rings
//! built, no network).

use std::net::{IpAddr, Ipv4Addr};

use super::*;
use ketama_config::discovery::Record;

const SRV: &str = "_http._tcp.cell.test";

fn config(global_bp: u32, backends: usize) -> String {
    let mut s = format!(
        "[admin]\nlisten = \"127.0.0.1:1\"\nauth = false\n[migration]\nring = {{ compat = \"nginx\", layout = \"compact\", point_multiple = 16 }}\nglobal_bp = {global_bp}\n[[discovery]]\nsrv = \"{SRV}\"\nresolvers = [\"127.0.0.1:53\"]\n"
    );
    for i in 0..backends {
        s.push_str(&format!(
            "[[backends]]\naddress = \"127.0.0.1:{}\"\n",
            9000 + i
        ));
    }
    s
}

fn records(n: u8) -> Records {
    let list = (0..n)
        .map(|i| Record {
            target: format!("t{i}.cell.test."),
            port: 8000,
            priority: 0,
            weight: 1,
            addrs: vec![IpAddr::V4(Ipv4Addr::new(127, 0, 1, i + 1))],
        })
        .collect();
    [(format!("srv {SRV}"), list)].into_iter().collect()
}

struct Fixture {
    cell: RoutingCell,
    _dir: tempfile::TempDir,
    file: PathBuf,
}

fn fixture(controlled: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("router.toml");
    let mut text = config(0, 2);
    if controlled {
        text.push_str("[control]\netcd = [\"http://127.0.0.1:1\"]\nprefix = \"/t/\"\n");
    }
    std::fs::write(&file, &text).unwrap();
    let v = ketama_config::load(&file).unwrap();
    let cell = RoutingCell::new(
        ConfigSource::File(file.clone()),
        v,
        None,
        records(1),
        None,
        crate::cell::Parts {
            health: Arc::default(),
            metrics: Arc::default(),
            access_log: crate::access_log::AccessLog::start().unwrap(),
        },
    )
    .unwrap();
    Fixture {
        cell,
        _dir: dir,
        file,
    }
}

fn bp(cell: &RoutingCell) -> u16 {
    cell.state()
        .plan
        .table
        .migration()
        .unwrap()
        .rollout()
        .global_bp()
}

fn backends(cell: &RoutingCell) -> usize {
    cell.state().backends.len()
}

fn rollout(n: u32) -> Rollout {
    Rollout::new(n).unwrap()
}

#[test]
fn every_trigger_in_turn_without_control() {
    let f = fixture(false);
    let c = &f.cell;
    assert_eq!((bp(c), backends(c)), (0, 3));
    assert_eq!(c.published().rollout.clone().origin, RolloutOrigin::Config);

    c.replace(Trigger::AdminRollout(rollout(5000))).unwrap();
    assert_eq!(
        (bp(c), c.published().rollout.clone().origin),
        (5000, RolloutOrigin::Admin)
    );

    // A DNS change keeps the operator's rollout (the bug: it went back to
    // the config's 0).
    let change = c.replace(Trigger::Discovered(records(2))).unwrap();
    assert_eq!((bp(c), backends(c)), (5000, 4));
    assert!(change.moved_share.unwrap() > 0.0);

    // A reload goes back to the config's rollout, keeping what DNS found.
    std::fs::write(&f.file, config(100, 2)).unwrap();
    c.replace(Trigger::Reload).unwrap();
    assert_eq!((bp(c), backends(c)), (100, 4));
    assert_eq!(c.published().rollout.clone(), RolloutInForce::CONFIG);

    // etcd's rollout, then its deletion: back to the config's.
    c.replace(Trigger::EtcdRollout(Some(rollout(700)))).unwrap();
    assert_eq!(
        (bp(c), c.published().rollout.clone().origin),
        (700, RolloutOrigin::Etcd)
    );
    c.replace(Trigger::Discovered(records(3))).unwrap();
    assert_eq!((bp(c), backends(c)), (700, 5));
    c.replace(Trigger::Reload).unwrap();
    assert_eq!(bp(c), 700, "a reload keeps etcd's rollout");
    c.replace(Trigger::EtcdRollout(None)).unwrap();
    assert_eq!((bp(c), backends(c)), (100, 5));
}

#[test]
fn a_refused_change_changes_nothing() {
    let f = fixture(false);
    let c = &f.cell;
    c.replace(Trigger::AdminRollout(rollout(2500))).unwrap();
    std::fs::write(&f.file, "[[backends]]\naddress = \"nowhere\"\n").unwrap();
    assert!(matches!(
        c.replace(Trigger::Reload),
        Err(Refused::Config(_))
    ));
    assert_eq!((bp(c), backends(c)), (2500, 3));
    assert_eq!(c.published().rollout.clone().origin, RolloutOrigin::Admin);
    let bad = Trigger::EtcdConfig {
        text: "[server]\n".into(),
        name: "etcd /t/config@4".into(),
    };
    assert!(c.replace(bad).is_err());
    assert!(!c.has_shared());
    assert_eq!(bp(c), 2500);
}

#[test]
fn with_control_the_rollout_is_etcds() {
    let f = fixture(true);
    let c = &f.cell;
    assert!(matches!(
        c.replace(Trigger::AdminRollout(rollout(10))),
        Err(Refused::RolloutFromEtcd)
    ));
    assert!(matches!(
        c.admits_admin_rollout(),
        Err(Refused::RolloutFromEtcd)
    ));
    c.replace(Trigger::EtcdRollout(Some(rollout(4200))))
        .unwrap();
    c.replace(Trigger::Discovered(records(2))).unwrap();
    assert_eq!((bp(c), backends(c)), (4200, 4));
    c.replace(Trigger::Reload).unwrap();
    assert_eq!((bp(c), backends(c)), (4200, 4));
    // An etcd config change keeps the rollout in force and what DNS
    // found; its own static backends replace the file's.
    let shared = config(300, 3)
        .lines()
        .skip(3)
        .collect::<Vec<_>>()
        .join("\n");
    c.replace(Trigger::EtcdConfig {
        text: shared,
        name: "etcd /t/config@3".into(),
    })
    .unwrap();
    assert!(c.has_shared());
    assert_eq!((bp(c), backends(c)), (4200, 5));
    // Deleting etcd's rollout gives the shared config's own.
    c.replace(Trigger::EtcdRollout(None)).unwrap();
    assert_eq!((bp(c), backends(c)), (300, 5));
    // A reload of the file keeps etcd's routing sections.
    c.replace(Trigger::Reload).unwrap();
    assert_eq!((bp(c), backends(c)), (300, 5));
}

#[test]
fn restart_needed_compares_with_the_start() {
    let f = fixture(false);
    let text = config(0, 2).replace("127.0.0.1:1\"", "127.0.0.1:2\"");
    std::fs::write(&f.file, text).unwrap();
    let change = f.cell.replace(Trigger::Reload).unwrap();
    assert_eq!(change.restart_needed, vec!["admin.listen"]);
    assert_eq!(f.cell.restart_needed(), vec!["admin.listen"]);
}

#[test]
fn rule_table() {
    let admin = RolloutInForce {
        rollout: Some(rollout(1)),
        origin: RolloutOrigin::Admin,
    };
    let etcd = RolloutInForce {
        rollout: Some(rollout(2)),
        origin: RolloutOrigin::Etcd,
    };
    let reload = Trigger::Reload;
    assert_eq!(admin.after(&reload, false).unwrap(), RolloutInForce::CONFIG);
    assert_eq!(etcd.after(&reload, true).unwrap(), etcd);
    let dns = Trigger::Discovered(Records::new());
    assert_eq!(admin.after(&dns, false).unwrap(), admin);
    assert_eq!(
        etcd.after(&Trigger::EtcdRollout(None), true).unwrap(),
        RolloutInForce::CONFIG
    );
}
