//! `ketama simulate` end to end: the JSON contract, a replay computed by
//! hand from the bound, and errors.

mod common;

use common::{run, servers_file};
use serde_json::Value;

const SERVERS: &str = "10.0.0.1:80\n10.0.0.2:80\n10.0.0.3:80\n10.0.0.4:80\n10.0.0.5:80\n";

fn json(args: &[&str]) -> Value {
    let (code, out, err) = run(args, b"");
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn json_output_is_the_documented_contract() {
    let f = servers_file(SERVERS);
    let path = f.path().to_str().unwrap();
    let doc = json(&[
        "simulate",
        "--servers",
        path,
        "--balance",
        "off,125",
        "--requests",
        "20000",
        "--concurrency",
        "200",
        "--json",
    ]);
    let top: Vec<&str> = doc
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(top, ["factors", "requests"]);
    assert_eq!(doc["requests"], 20000);
    let factors = doc["factors"].as_array().unwrap();
    assert_eq!(factors.len(), 2);
    for f in factors {
        let mut keys: Vec<&str> = f.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "balance",
                "max_over_avg",
                "moved_keys",
                "own_node_share",
                "spills_per_request"
            ]
        );
    }
    let (off, c125) = (&factors[0], &factors[1]);
    assert!(off["balance"].is_null());
    assert_eq!(c125["balance"], 125);
    assert_eq!(off["own_node_share"], 1.0);
    assert_eq!(off["moved_keys"], 0);
    // The bound: ceil(1.25 x 200 / 5) = 50 over an average of 40.
    let limit = (1.25f64 * 200.0 / 5.0).ceil() / 40.0;
    assert!(c125["max_over_avg"].as_f64().unwrap() <= limit, "{c125}");
    assert!(off["max_over_avg"].as_f64().unwrap() > limit, "{off}");
    assert!(c125["spills_per_request"].as_f64().unwrap() > 0.0);
}

/// One hot key, every request placed at once (concurrency = requests):
/// request j sees j in flight, so its bound is ceil(c (j+1) / n), and it
/// goes to the first node of the key's failover order below it (position
/// k in that order: k spills).
#[test]
fn a_hot_key_spills_as_the_bound_says() {
    let f = servers_file(SERVERS);
    let path = f.path().to_str().unwrap();
    let mut trace = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut trace, b"/hot\n").unwrap();
    let (requests, n) = (100u64, 5u64);
    for c in [100u64, 125, 200] {
        let mut load = [0u64; 5];
        let (mut spills, mut own, mut max) = (0u64, 0u64, 0u64);
        for j in 0..requests {
            let bound = (c * (j + 1)).div_ceil(100 * n);
            let k = (0..5).find(|&k| load[k] < bound).unwrap_or(0);
            spills += k as u64;
            own += (k == 0) as u64;
            load[k] += 1;
            max = max.max(load[k]);
        }
        let doc = json(&[
            "simulate",
            "--servers",
            path,
            "--trace",
            trace.path().to_str().unwrap(),
            "--balance",
            &c.to_string(),
            "--requests",
            &requests.to_string(),
            "--concurrency",
            &requests.to_string(),
            "--service",
            "fixed",
            "--json",
        ]);
        let got = &doc["factors"][0];
        let avg = requests as f64 / n as f64;
        assert_eq!(
            got["max_over_avg"].as_f64().unwrap(),
            max as f64 / avg,
            "c = {c}: {got}"
        );
        assert_eq!(
            got["own_node_share"].as_f64().unwrap(),
            own as f64 / requests as f64,
            "c = {c}"
        );
        assert_eq!(
            got["spills_per_request"].as_f64().unwrap(),
            spills as f64 / requests as f64,
            "c = {c}"
        );
        assert_eq!(got["moved_keys"], u64::from(own < requests), "c = {c}");
    }
}

#[test]
fn the_table_and_the_chart() {
    let f = servers_file(SERVERS);
    let path = f.path().to_str().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("balance.svg");
    let (code, out, err) = run(
        &[
            "simulate",
            "--servers",
            path,
            "--requests",
            "5000",
            "--concurrency",
            "100",
            "--plot",
            svg.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code, 0, "{err}");
    // The default factors, one row each, in order.
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| balance"))
        .map(|l| l.split('|').nth(1).unwrap().trim())
        .collect();
    assert_eq!(rows, ["off", "1.10", "1.25", "1.50", "2.00"]);
    let chart = std::fs::read_to_string(&svg).unwrap();
    assert!(chart.starts_with("<svg") && chart.contains("balance factor c"));
    // Fewer than 10 in flight per server: said so.
    let (code, out, _) = run(
        &[
            "simulate",
            "--servers",
            path,
            "--requests",
            "100",
            "--concurrency",
            "20",
        ],
        b"",
    );
    assert_eq!(code, 0);
    assert!(out.contains("rounding of the bound"), "{out}");
}

#[test]
fn bad_inputs_are_named() {
    let f = servers_file(SERVERS);
    let path = f.path().to_str().unwrap();
    let empty = tempfile::NamedTempFile::new().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--balance", "99"], "balance factor 99 is out of range"),
        (
            &["--balance", "125,fast"],
            "\"fast\" is neither a percentage",
        ),
        (&["--concurrency", "0"], "concurrency 0"),
        (&["--requests", "0"], "--requests 0"),
        (&["--zipf=-1"], "Zipf exponent -1"),
        (&["--trace", empty.path().to_str().unwrap()], "has no key"),
        (
            &["--balance", "off", "--plot", "/tmp/never.svg"],
            "lists none",
        ),
    ];
    for (extra, want) in cases {
        let mut args = vec!["simulate", "--servers", path, "--requests", "1000"];
        if extra.contains(&"--requests") {
            args.truncate(3);
        }
        args.extend_from_slice(extra);
        let (code, _, err) = run(&args, b"");
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
