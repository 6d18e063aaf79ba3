//! The Grafana dashboard in examples/ queries only metrics the router
//! exposes: every `ketama_*` name in its queries is in `/metrics`.

mod common;

use common::*;

#[test]
fn every_metric_the_dashboard_queries_exists() {
    let text = include_str!("../../../examples/grafana-dashboard.json");
    let dash: serde_json::Value = serde_json::from_str(text).unwrap();
    let mut queries: Vec<String> = dash["panels"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|p| p["targets"].as_array().unwrap().clone())
        .map(|t| t["expr"].as_str().unwrap().to_string())
        .collect();
    for v in dash["templating"]["list"].as_array().unwrap() {
        if let Some(q) = v["definition"].as_str() {
            queries.push(q.to_string());
        }
    }
    let mut names = std::collections::BTreeSet::new();
    for q in &queries {
        let mut rest = q.as_str();
        while let Some(i) = rest.find("ketama_") {
            let tail = &rest[i..];
            let end = tail
                .find(|c: char| !(c.is_ascii_lowercase() || c == '_' || c.is_ascii_digit()))
                .unwrap_or(tail.len());
            names.insert(tail[..end].to_string());
            rest = &tail[end..];
        }
    }
    assert!(names.len() >= 15, "{names:?}");

    // A router that has served a request and refused one, so that the
    // families that appear on first use are there.
    let (_o, r, _d) = setup(&[1, 1], "");
    assert_eq!(get(&r, "/a").status, 200);
    let (bad, _) = raw(
        r.proxy,
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n0\r\n\r\n",
    );
    assert_eq!(bad, Some(501));
    let m = metrics_text(&r);
    let exposed = |name: &str| {
        m.lines().any(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
                || l.strip_prefix("# TYPE ")
                    .and_then(|t| t.strip_prefix(name))
                    .is_some_and(|rest| rest.starts_with(' '))
        })
    };
    let missing: Vec<&String> = names.iter().filter(|n| !exposed(n)).collect();
    assert!(
        missing.is_empty(),
        "queried but not in /metrics: {missing:?}"
    );
}
