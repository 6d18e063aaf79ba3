//! The router's `[key]` in `ketama route` and `ketama diff`, end to end on
//! the real binary: requests routed by what the key takes of them (the
//! key a template writes routes as that key given plainly), a key change
//! priced over requests, and each bad input refused by name. (That the
//! key is the router's own is checked against a live router and nginx in
//! the router's `key_template` test, which routes its access log again.)

mod common;

use common::{refused, run, servers_file};

const SERVERS: &str = "10.0.0.1:80\n10.0.0.2:80 2\n10.0.0.3:80\n10.0.0.4:80\n";

fn route(args: &[&str], input: &str) -> Vec<String> {
    let s = servers_file(SERVERS);
    let mut all = vec!["route", "--servers", s.path().to_str().unwrap()];
    all.extend_from_slice(args);
    let (code, out, err) = run(&all, input.as_bytes());
    assert_eq!(code, 0, "{args:?}: {err}");
    out.lines().map(str::to_string).collect()
}

#[test]
fn a_template_routes_requests_as_the_key_it_writes() {
    let requests = "/a/1.ts?b=2&a=1\nhttp://Img.Example:8080/p?q\n/x\n";
    // $host is lowercased without its port; an absolute-form target's
    // authority stands for Host; $request_uri is from the path on.
    let by_template = route(&["--key-template", "$host|$request_uri"], requests);
    let by_key = route(&[], "|/a/1.ts?b=2&a=1\nimg.example|/p?q\n|/x\n");
    assert_eq!(by_template, by_key);
    // Sorting the query: both orders are one key.
    let sorted = route(&["--sort-query"], "/a?b=2&a=1\n/a?a=1&b=2\n");
    assert_eq!(sorted[0], sorted[1]);
    assert_eq!(sorted, route(&[], "/a?a=1&b=2\n/a?a=1&b=2\n"));
    let dropped = route(&["--drop-query", "utm"], "/a?utm=x&v=1\n");
    assert_eq!(dropped, route(&[], "/a?v=1\n"));
    // No key in the request: `*`, as the router sends it round robin.
    assert_eq!(route(&["--key-template", "$cookie_sid"], "/a\n"), ["*"]);
    // HAProxy's url_param through its own ring.
    let s = servers_file(SERVERS);
    let args = |key: &[&'static str]| {
        let mut a = vec![
            "route",
            "--servers",
            s.path().to_str().unwrap(),
            "--compat",
            "haproxy",
        ];
        a.extend_from_slice(key);
        a.iter().map(|x| x.to_string()).collect::<Vec<_>>()
    };
    let param = args(&["--key-balance", "url_param id"]);
    let param: Vec<&str> = param.iter().map(String::as_str).collect();
    let plain = args(&[]);
    let plain: Vec<&str> = plain.iter().map(String::as_str).collect();
    let (_, a, _) = run(&param, b"/p?x=1&id=abc\n/p\n");
    let (_, b, _) = run(&plain, b"abc\n");
    assert_eq!(a.lines().next(), b.lines().next());
    assert_eq!(a.lines().nth(1), Some("*"));
}

#[test]
fn a_key_config_file_and_an_access_log_line_give_the_routers_key() {
    let dir = tempfile::tempdir().unwrap();
    // A router's config file: everything but [key] is left to the router.
    let config = dir.path().join("router.toml");
    std::fs::write(
        &config,
        "[server]\nlisten = [\"127.0.0.1:1\"]\n\n[[backends]]\naddress = \"10.0.0.1:80\"\n\n[key]\ntemplate = \"$cookie_sid$http_x_tenant\"\n",
    )
    .unwrap();
    let line = r#"{"time":"t","client":"10.9.9.9","method":"GET","uri":"/a","protocol":"HTTP/1.1","status":200,"backend":"x","fields":[["Cookie","a=1; SID=s7"],["X-Tenant","t1"],["x-tenant","t2"]]}"#;
    let c = config.to_str().unwrap();
    let got = route(
        &["--key-config", c, "--request-format", "access-log"],
        &format!("{line}\n"),
    );
    // nginx's $cookie_ matches the name in any case; $http_ the first field.
    assert_eq!(got, route(&[], "s7t1\n"));
}

#[test]
fn diff_prices_a_key_change_over_requests() {
    let dir = tempfile::tempdir().unwrap();
    let s = servers_file(SERVERS);
    let keys = dir.path().join("requests.txt");
    // 2,000 objects, each asked with its query sorted and then unsorted.
    let mut text = String::new();
    for i in 0..2000 {
        text.push_str(&format!("/o/{i}?a=1&b=2\n/o/{i}?b=2&a=1\n"));
    }
    std::fs::write(&keys, text).unwrap();
    let sorted = dir.path().join("sorted.toml");
    std::fs::write(&sorted, "[key.normalize]\nsort_query = true\n").unwrap();
    let sv = s.path().to_str().unwrap();
    let (code, out, err) = run(
        &[
            "diff",
            "--from",
            sv,
            "--to",
            sv,
            "--keys",
            keys.to_str().unwrap(),
            "--to-key-config",
            sorted.to_str().unwrap(),
            "--json",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["samples"], 4000);
    // The sorted half keeps its server; each unsorted request lands on a
    // server drawn by weight (1, 2, 1, 1 of 5): about 0.5 x 0.72 move.
    let moved = v["moved"].as_f64().unwrap();
    assert!((0.30..0.42).contains(&moved), "{moved}");
    // Turning it on on both sides moves nothing.
    let (_, out, _) = run(
        &[
            "diff",
            "--from",
            sv,
            "--to",
            sv,
            "--keys",
            keys.to_str().unwrap(),
            "--sort-query",
            "--to-key-config",
            sorted.to_str().unwrap(),
            "--json",
        ],
        b"",
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["moved_samples"], 0);
}

#[test]
fn bad_keys_and_requests_are_refused_by_name() {
    let s = servers_file(SERVERS);
    let sv = s.path().to_str().unwrap();
    refused(
        &["route", "--servers", sv, "--key-template", "$nope"],
        b"/\n",
        "key.template: template \"$nope\": $nope is not a variable",
    );
    refused(
        &["route", "--servers", sv, "--key-balance", "source"],
        b"/\n",
        "--compat is nginx: make it haproxy",
    );
    refused(
        &[
            "route",
            "--servers",
            sv,
            "--key-config",
            "/nonexistent.toml",
        ],
        b"/\n",
        "--key-config /nonexistent.toml: cannot read",
    );
    refused(
        &["route", "--servers", sv, "--sort-query"],
        b"/ok\nnot a target\n",
        "line 2: the target \"not a target\" holds a space",
    );
    refused(
        &[
            "route",
            "--servers",
            sv,
            "--sort-query",
            "--request-format",
            "access-log",
        ],
        b"GET / HTTP/1.1\n",
        "line 1: not a JSON access log line",
    );
    refused(
        &["diff", "--from", sv, "--to", sv, "--sort-query"],
        b"",
        "a key is priced over requests: give --keys FILE",
    );
    refused(
        &[
            "route",
            "--servers",
            sv,
            "--drop-query",
            "a",
            "--keep-query",
            "b",
        ],
        b"/\n",
        "cannot be used with",
    );
}

#[test]
fn the_simulation_routes_and_caches_by_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let s = servers_file(SERVERS);
    let sv = s.path().to_str().unwrap();
    // 400 objects, each asked three times in both orders of its query;
    // caches that hold everything: every miss is a first sight.
    let trace = dir.path().join("trace.txt");
    let mut text = String::new();
    for _ in 0..3 {
        for i in 0..400 {
            text.push_str(&format!("/o/{i}?a=1&b=2\n/o/{i}?b=2&a=1\n"));
        }
    }
    std::fs::write(&trace, text).unwrap();
    let sorted = dir.path().join("sorted.toml");
    std::fs::write(&sorted, "[key.normalize]\nsort_query = true\n").unwrap();
    let misses = |extra: &[&str]| -> u64 {
        let mut args = vec![
            "migrate-plan",
            "--from",
            sv,
            "--to",
            sv,
            "--steps",
            "10000",
            "--simulate",
            "--trace",
            trace.to_str().unwrap(),
            "--cache-objects",
            "100000",
            "--json",
        ];
        args.extend_from_slice(extra);
        let (code, out, err) = run(&args, b"");
        assert_eq!(code, 0, "{extra:?}: {err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let m = &v["steps"][0]["misses"];
        m.as_u64().unwrap_or_else(|| {
            m.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap())
                .sum()
        })
    };
    let to = sorted.to_str().unwrap();
    // As sent, each order is an object of its own.
    assert_eq!(misses(&[]), 800);
    // The new key sorts, and the caches key by it: one object each.
    assert_eq!(misses(&["--to-key-config", to]), 400);
    // Caches still keyed by the target as sent gain nothing.
    assert_eq!(
        misses(&["--to-key-config", to, "--cache-key", "target"]),
        800
    );
    refused(
        &["migrate-plan", "--from", sv, "--to", sv, "--sort-query"],
        b"",
        "give --simulate with --trace",
    );
}

#[test]
fn analyze_counts_requests_where_their_key_sends_them() {
    let dir = tempfile::tempdir().unwrap();
    let s = servers_file(SERVERS);
    let sv = s.path().to_str().unwrap();
    let reqs = dir.path().join("requests.txt");
    let ids: Vec<String> = (0..500).map(|i| format!("u{}", i * 7 % 131)).collect();
    let text: String = ids
        .iter()
        .map(|id| format!("/p?x=1&id={id}\n/q\n"))
        .collect();
    std::fs::write(&reqs, text).unwrap();
    let (code, out, err) = run(
        &[
            "analyze",
            "--servers",
            sv,
            "--keys",
            reqs.to_str().unwrap(),
            "--key-template",
            "$arg_id",
            "--json",
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    // The same ids routed plainly, counted by server.
    let servers: Vec<&str> = SERVERS
        .lines()
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    let mut want = vec![0u64; servers.len()];
    for s in route(&[], &(ids.join("\n") + "\n")) {
        want[servers.iter().position(|x| *x == s).unwrap()] += 1;
    }
    assert_eq!(v["requests"]["counts"], serde_json::json!(want));
    // `/q` has no id: nginx's empty key, round robin.
    assert_eq!(v["requests"]["unkeyed"], 500);
}

#[test]
fn route_answers_a_key_migration_as_the_router_does() {
    let dir = tempfile::tempdir().unwrap();
    let s = servers_file(SERVERS);
    let sv = s.path().to_str().unwrap();
    let sorted = dir.path().join("sorted.toml");
    std::fs::write(&sorted, "[key.normalize]\nsort_query = true\n").unwrap();
    let input = "/a?b=2&a=1\n/c?z&y&x\n/d\n";
    let at = |bp: &str| {
        route(
            &[
                "--to",
                sv,
                "--rollout",
                bp,
                "--to-key-config",
                sorted.to_str().unwrap(),
            ],
            input,
        )
    };
    // All on the new side: the sorted key; none: the key as sent.
    let sorted_plain = route(&[], "/a?a=1&b=2\n/c?x&y&z\n/d\n");
    let with = |v: &[String], side: &str| -> Vec<String> {
        v.iter().map(|s| format!("{s}\t{side}")).collect()
    };
    assert_eq!(at("10000"), with(&sorted_plain, "new"));
    assert_eq!(at("0"), with(&route(&[], input), "old"));
    refused(
        &[
            "route",
            "--servers",
            sv,
            "--to-key-config",
            sorted.to_str().unwrap(),
        ],
        b"/\n",
        "--to-key-config is a migration's new key: give --to",
    );
}
