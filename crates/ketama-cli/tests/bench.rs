//! `ketama bench` end to end: a small ring, one round, JSON and table.

use std::process::Command;

fn ketama(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ketama"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn json_rows_measure_every_layout_and_pingora() {
    let (ok, out, err) = ketama(&[
        "bench", "--nodes", "200", "--weight", "2", "--keys", "5000", "--rounds", "1", "--json",
    ]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["ring"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "ketama wide",
            "ketama packed",
            "ketama compact",
            "pingora-ketama v1",
            "pingora-ketama v2"
        ]
    );
    let bpp = |name: &str| {
        rows.iter().find(|r| r["ring"] == name).unwrap()["bytes_per_point"]
            .as_f64()
            .unwrap()
    };
    // Measured by the counting allocator: the layouts' sizes must show.
    assert!(
        (7.9..8.2).contains(&bpp("ketama wide")),
        "{}",
        bpp("ketama wide")
    );
    assert!(
        (5.9..6.2).contains(&bpp("ketama packed")),
        "{}",
        bpp("ketama packed")
    );
    assert!(
        (5.9..6.2).contains(&bpp("pingora-ketama v2")),
        "{}",
        bpp("pingora-ketama v2")
    );
    assert!(
        (7.9..8.2).contains(&bpp("pingora-ketama v1")),
        "{}",
        bpp("pingora-ketama v1")
    );
    assert!(bpp("ketama compact") < 6.0);
    // Every ratio is the row's measurement over v2's, as printed.
    let v2 = &rows[4];
    let f = |r: &serde_json::Value, k: &str| r[k].as_f64().unwrap();
    for r in rows {
        assert!(f(r, "ns_per_lookup") > 0.0, "{r}");
        // 64,000 points take well over a microsecond of CPU to build.
        assert!(f(r, "build_cpu_ms") > 0.001, "{r}");
        assert!(
            f(r, "build_peak_bytes") >= f(r, "bytes_per_point") * 60_000.0,
            "{r}"
        );
        for (ratio, of) in [
            ("lookup_vs_v2", "ns_per_lookup"),
            ("latency_vs_v2", "ns_per_lookup_latency"),
            ("build_cpu_vs_v2", "build_cpu_ms"),
            ("bytes_per_point_vs_v2", "bytes_per_point"),
        ] {
            let want = f(r, of) / f(v2, of);
            assert!(
                (f(r, ratio) - want).abs() < 1e-9 * want.max(1.0),
                "{ratio} of {r}"
            );
        }
    }
    // Batches exist for ketama's layouts only, and hash as single lookups do.
    assert!(rows[..3]
        .iter()
        .all(|r| r["ns_per_lookup_batch"].as_f64().is_some()));
    assert!(rows[3]["ns_per_lookup_batch"].is_null() && v2["ns_per_lookup_batch"].is_null());
}

#[test]
fn table_and_errors() {
    let (ok, out, _) = ketama(&[
        "bench",
        "--nodes",
        "20",
        "--keys",
        "1000",
        "--rounds",
        "1",
        "--point-multiple",
        "40",
    ]);
    assert!(ok);
    assert!(out.contains("| ring | build CPU ms |"), "{out}");
    // pingora v1 has no configurable multiple: left out, not mislabelled.
    assert!(!out.contains("pingora-ketama v1"), "{out}");
    assert!(out.contains("| pingora-ketama v2 |"), "{out}");

    let (ok, _, err) = ketama(&["bench", "--weight", "0"]);
    assert!(!ok);
    assert!(err.contains("--weight 0"), "{err}");
    let (ok, _, err) = ketama(&["bench", "--nodes", "70000"]);
    assert!(!ok);
    assert!(err.contains("--nodes 70000"), "{err}");
}
