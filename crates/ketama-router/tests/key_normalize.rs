//! `[key.normalize]` end to end: with `sort_query`, every order of one
//! query reaches one backend while each backend is handed the target as
//! the client sent it; `drop_query` leaves the named parameters out of
//! the key; without normalization the orders spread over the backends.

mod common;

use std::net::SocketAddr;

use common::echo::echo_origin;
use common::*;

/// Every order of `chunks` as a target's query.
fn orders(chunks: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    let mut idx: Vec<usize> = (0..chunks.len()).collect();
    permute(&mut idx, 0, &mut |p| {
        let q: Vec<&str> = p.iter().map(|&i| chunks[i]).collect();
        out.push(q.join("&"));
    });
    out
}

fn permute(idx: &mut Vec<usize>, k: usize, f: &mut impl FnMut(&[usize])) {
    if k == idx.len() {
        return f(idx);
    }
    for i in k..idx.len() {
        idx.swap(k, i);
        permute(idx, k + 1, f);
        idx.swap(k, i);
    }
}

/// The echo origin's answer: the port and the request line it was handed.
fn served(r: &RouterProc, target: &str) -> (String, String) {
    let resp = request(r.proxy, "GET", target, &[], "").unwrap();
    assert_eq!(resp.status, 200, "{target}: {}", resp.body);
    let rest = resp.body.strip_prefix("saw ").unwrap();
    let (port, line) = rest.split_once(' ').unwrap();
    (port.to_string(), line.to_string())
}

fn origins(n: usize) -> Vec<SocketAddr> {
    (0..n).map(|_| echo_origin()).collect()
}

#[test]
fn every_order_of_a_query_reaches_one_backend_and_goes_as_sent() {
    let backends = origins(5);
    let (r, _d) = router_over(&backends, "", "\n[key.normalize]\nsort_query = true\n");
    let (plain, _d2) = router_over(&backends, "", "");
    let mut spread = 0;
    for (n, chunks) in [
        vec!["w=640", "h=480", "fmt=webp"],
        vec!["a=1", "a=2", "b", "c="],
        vec!["x=1", "y=2", "z=3", "t=9"],
    ]
    .iter()
    .enumerate()
    {
        let mut ports = std::collections::BTreeSet::new();
        let mut plain_ports = std::collections::BTreeSet::new();
        for q in orders(chunks) {
            let target = format!("/obj/{n}.jpg?{q}");
            let (port, line) = served(&r, &target);
            assert_eq!(line, format!("GET {target} HTTP/1.1"), "forwarded as sent");
            ports.insert(port);
            plain_ports.insert(served(&plain, &target).0);
        }
        assert_eq!(ports.len(), 1, "{chunks:?}: the orders went to {ports:?}");
        spread += plain_ports.len();
    }
    // Without the rule the same orders are different keys.
    assert!(
        spread > 3,
        "unnormalized orders spread over {spread} backends"
    );
}

#[test]
fn dropped_parameters_leave_the_key_and_stay_in_the_request() {
    let backends = origins(5);
    let (r, _d) = router_over(
        &backends,
        "",
        "\n[key.normalize]\ndrop_query = [\"utm_source\", \"fbclid\"]\n",
    );
    for i in 0..20 {
        let base = format!("/page/{i}?id=7");
        let (want, _) = served(&r, &base);
        for extra in ["&utm_source=mail", "&fbclid=abc&utm_source=x", "&fbclid"] {
            let target = format!("{base}{extra}");
            let (port, line) = served(&r, &target);
            assert_eq!(port, want, "{target}");
            assert_eq!(line, format!("GET {target} HTTP/1.1"));
        }
    }
}

#[test]
fn both_filters_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.toml");
    let text = config_with(
        &[echo_origin()],
        any_port(),
        any_port(),
        "",
        "\n[key.normalize]\ndrop_query = [\"a\"]\nkeep_query = [\"b\"]\n",
    );
    std::fs::write(&path, text).unwrap();
    let out = router_command()
        .args(["--config", path.to_str().unwrap(), "--check"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("key.normalize.keep_query") && err.contains("not both"),
        "{err}"
    );
}
