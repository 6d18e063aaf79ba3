//! `ketama fleet` against a real etcd (Debian's etcd-server, started here):
//! a push is checked as a router checks it before anything is written,
//! writes are compare-and-swaps on the key's mod revision, `status` reads
//! the registrations.

mod common;

use common::run;
use ketama_fleet::testing::EtcdServer;
use ketama_fleet::{Keys, Registration};

const PREFIX: &str = "/ketama/cli/";

fn config_file(dir: &std::path::Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

const GOOD: &str = "[ring]\nlayout = \"compact\"\n\n[migration]\nglobal_bp = 0\n[migration.ring]\npoint_multiple = 40\n\n[[backends]]\naddress = \"127.0.0.1:9001\"\n\n[[backends]]\naddress = \"127.0.0.1:9002\"\nweight = 2\n";

#[test]
fn push_checks_then_compares_and_swaps() {
    let etcd = EtcdServer::start().unwrap();
    let url = etcd.url();
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::new(PREFIX);
    let base = ["fleet", "push", "--etcd", &url, "--prefix", PREFIX];

    // Refused before writing: an error a router would report, a local
    // section, a scope.
    for (text, says) in [
        ("[[backends]]\naddress = \"127.0.0.1:9001\"\nweight = \"x\"\n", "weight"),
        ("[[backends]]\naddress = \"nowhere\"\n", "backends[0].address"),
        ("[server]\nlisten = [\"127.0.0.1:1\"]\n[[backends]]\naddress = \"127.0.0.1:9001\"\n", "stays in each router's own file"),
        ("[migration]\nscope = \"ams\"\n[migration.ring]\n[[backends]]\naddress = \"127.0.0.1:9001\"\n", "[control] scope"),
        ("", "no backends"),
        ("[upstream_tls]\nca_file = \"/nonexistent/ca.pem\"\n[[backends]]\naddress = \"127.0.0.1:9001\"\ntls = true\nsni = \"o.test\"\n", "upstream_tls.ca_file: /nonexistent/ca.pem: cannot read"),
    ] {
        let f = config_file(dir.path(), "bad.toml", text);
        let (code, _, err) = run(&[&base[..], &["--config", &f]].concat(), b"");
        assert_ne!(code, 0, "{text:?} was accepted");
        assert!(err.contains(says), "{text:?}: {err}");
        assert!(etcd.client().get(&keys.config()).unwrap().0.is_none(), "written anyway");
    }

    let f = config_file(dir.path(), "good.toml", GOOD);
    let (code, out, err) = run(&[&base[..], &["--config", &f]].concat(), b"");
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.contains("upstream_tls"),
        "no TLS, no word of it: {err}"
    );
    let (kv, _) = etcd.client().get(&keys.config()).unwrap();
    let kv = kv.expect("written");
    assert_eq!(kv.value, GOOD.as_bytes());
    assert!(
        out.contains(&format!("revision {}", kv.mod_revision)),
        "{out}"
    );

    // Two operators start from the same revision: one wins, one is told
    // the current revision.
    let rev = kv.mod_revision.to_string();
    let texts = [
        GOOD.replace("weight = 2", "weight = 3"),
        GOOD.replace("weight = 2", "weight = 4"),
    ];
    let files: Vec<String> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| config_file(dir.path(), &format!("c{i}.toml"), t))
        .collect();
    let results: Vec<(i32, String, String)> = std::thread::scope(|s| {
        let handles: Vec<_> = files
            .iter()
            .map(|f| {
                let args: Vec<String> = base
                    .iter()
                    .map(|a| a.to_string())
                    .chain([
                        "--config".into(),
                        f.clone(),
                        "--expect-revision".into(),
                        rev.clone(),
                    ])
                    .collect();
                s.spawn(move || {
                    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
                    run(&refs, b"")
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let wins: Vec<_> = results.iter().filter(|r| r.0 == 0).collect();
    assert_eq!(wins.len(), 1, "{results:?}");
    let lost = results.iter().find(|r| r.0 != 0).unwrap();
    let (now, _) = etcd.client().get(&keys.config()).unwrap();
    let now = now.unwrap();
    assert!(
        lost.2
            .contains(&format!("mod revision is {}", now.mod_revision)),
        "{}",
        lost.2
    );
    assert!(texts.iter().any(|t| t.as_bytes() == now.value));
}

#[test]
fn rollout_and_status() {
    let etcd = EtcdServer::start().unwrap();
    let url = etcd.url();
    let keys = Keys::new(PREFIX);
    let dir = tempfile::tempdir().unwrap();
    let f = config_file(dir.path(), "good.toml", GOOD);
    let (code, _, err) = run(
        &[
            "fleet", "push", "--etcd", &url, "--prefix", PREFIX, "--config", &f,
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");

    let (code, _, err) = run(
        &[
            "fleet",
            "rollout",
            "--etcd",
            &url,
            "--prefix",
            PREFIX,
            "--global-bp",
            "20000",
        ],
        b"",
    );
    assert_ne!(code, 0);
    assert!(err.contains("10000"), "{err}");
    let (code, _, err) = run(
        &[
            "fleet",
            "rollout",
            "--etcd",
            &url,
            "--prefix",
            PREFIX,
            "--global-bp",
            "100",
            "--scope",
            "ams=5000",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let (kv, _) = etcd.client().get(&keys.rollout()).unwrap();
    let r = ketama_config::parse_rollout(&kv.unwrap().value).unwrap();
    assert_eq!((r.bp_for(Some("ams")), r.bp_for(Some("sin"))), (5000, 100));

    // Two routers registered (as a router writes itself), one behind.
    let (config, _) = etcd.client().get(&keys.config()).unwrap();
    let latest = config.unwrap().mod_revision;
    for (id, scope, rev) in [("r1", "ams", latest), ("r2", "sin", latest - 1)] {
        let reg = Registration {
            id: id.into(),
            scope: Some(scope.into()),
            config_revision: rev,
            rollout_revision: 0,
            rejected: None,
            listen: vec!["127.0.0.1:8080".into()],
            pid: 1,
            report: None,
        };
        etcd.client()
            .put(&keys.router(id), &serde_json::to_vec(&reg).unwrap(), None)
            .unwrap();
    }
    let (code, out, err) = run(
        &["fleet", "status", "--etcd", &url, "--prefix", PREFIX],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("| r1 | ams |") && out.contains("up to date") && out.contains("5000 bp"),
        "{out}"
    );
    assert!(
        out.contains("| r2 | sin |") && out.contains("1 revision behind") && out.contains("100 bp"),
        "{out}"
    );
    let (code, out, _) = run(
        &[
            "fleet", "status", "--etcd", &url, "--prefix", PREFIX, "--json",
        ],
        b"",
    );
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["routers"][1]["lag"], 1);
    assert_eq!(v["routers"][0]["rollout_bp"], 5000);

    // etcd gone: a clear error, no panic.
    drop(etcd);
    let (code, _, err) = run(
        &[
            "fleet",
            "status",
            "--etcd",
            &url,
            "--prefix",
            PREFIX,
            "--timeout-ms",
            "500",
        ],
        b"",
    );
    assert_ne!(code, 0);
    assert!(err.contains("cannot reach etcd"), "{err}");
}

#[test]
fn push_reads_the_upstream_tls_files_and_says_routers_read_them_again() {
    let etcd = EtcdServer::start().unwrap();
    let url = etcd.url();
    let dir = tempfile::tempdir().unwrap();
    let ca = dir.path().join("ca.pem");
    let status = std::process::Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
        ])
        .arg(dir.path().join("ca.key"))
        .arg("-out")
        .arg(&ca)
        .args(["-days", "2", "-subj", "/CN=ca"])
        .output()
        .unwrap();
    assert!(status.status.success());
    let text = format!(
        "[upstream_tls]\nca_file = \"{}\"\n[[backends]]\naddress = \"127.0.0.1:9001\"\ntls = true\nsni = \"o.test\"\n",
        ca.display()
    );
    let f = config_file(dir.path(), "tls.toml", &text);
    let (code, _, err) = run(
        &[
            "fleet", "push", "--etcd", &url, "--prefix", PREFIX, "--config", &f,
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("each router reads them again"), "{err}");
    let written = etcd
        .client()
        .get(&Keys::new(PREFIX).config())
        .unwrap()
        .0
        .unwrap();
    assert_eq!(written.value, text.as_bytes());
}
