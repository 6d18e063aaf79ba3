//! `migrate-plan --simulate` refuses what it cannot read, before it
//! simulates anything, naming the line, the offset or the flag: a csv or
//! a gzip file taken for one key per line, a cut-short binary trace, a
//! warm-up as long as the trace, synthetic-workload flags beside a trace,
//! a chart into a directory that does not exist. And the per-server table
//! is on stdout with the others. (That each format's counts equal
//! libCacheSim's is `libcachesim_golden.rs`.)

mod common;

use std::io::Write as _;
use std::path::Path;

use common::run;

fn servers(dir: &Path) -> String {
    let p = dir.join("servers.txt");
    std::fs::write(&p, "10.1.0.1:80\n10.1.0.2:80\n10.1.0.3:80\n").unwrap();
    p.to_str().unwrap().to_string()
}

/// `migrate-plan --simulate` on `trace` with `extra` flags: (exit, stdout,
/// stderr).
fn simulate(dir: &Path, trace: &Path, extra: &[&str]) -> (i32, String, String) {
    let s = servers(dir);
    let t = trace.to_str().unwrap();
    let mut args = vec![
        "migrate-plan",
        "--from",
        &s,
        "--to",
        &s,
        "--to-point-multiple",
        "40",
        "--steps",
        "5000,10000",
        "--simulate",
        "--trace",
        t,
        "--cache-objects",
        "50",
    ];
    args.extend_from_slice(extra);
    run(&args, b"")
}

/// How `csv_text()` is read.
const AS_CSV: &[&str] = &[
    "--trace-format",
    "csv",
    "--csv-key-col",
    "2",
    "--csv-header",
    "--json",
];

fn csv_text() -> String {
    let mut t = String::from("ts,key,size\n");
    for i in 0..3000 {
        t.push_str(&format!("{i},/obj/{},{}\n", i % 40, 100 + i % 7));
    }
    t
}

#[test]
fn a_csv_or_gzip_trace_is_not_taken_for_keys() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("trace.csv");
    std::fs::write(&csv, csv_text()).unwrap();
    let (code, out, err) = simulate(dir.path(), &csv, &[]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(
        err.contains("line 1 looks like csv (3 fields") && err.contains("--trace-format csv"),
        "{err}"
    );
    // Read as csv: 40 distinct keys, so hits, not 100% misses.
    let (code, out, err) = simulate(dir.path(), &csv, AS_CSV);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let hits: u64 = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["hits"].as_u64().unwrap())
        .sum();
    assert!(hits > 2000, "{out}");
    // The same file gzipped reads the same; a file named .gz that is not
    // gzip is refused.
    let gz = dir.path().join("trace.csv.gz");
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    enc.write_all(csv_text().as_bytes()).unwrap();
    std::fs::write(&gz, enc.finish().unwrap()).unwrap();
    let (code, out2, err) = simulate(dir.path(), &gz, AS_CSV);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out2, out);
    let fake = dir.path().join("fake.gz");
    std::fs::write(&fake, "/a\n/b\n").unwrap();
    let (code, _, err) = simulate(dir.path(), &fake, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("named .gz but not gzip"), "{err}");
    // A truncated gzip stream.
    let cut = dir.path().join("cut.gz");
    let bytes = std::fs::read(&gz).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let (code, _, err) = simulate(dir.path(), &cut, &[]);
    assert_eq!(code, 1);
    assert!(err.contains("does not decompress"), "{err}");
}

#[test]
fn malformed_traces_are_refused_naming_where() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("t.oracleGeneral");
    let mut data = Vec::new();
    for i in 0..100u64 {
        data.extend((i as u32).to_le_bytes());
        data.extend((i % 10).to_le_bytes());
        data.extend(100u32.to_le_bytes());
        data.extend((-1i64).to_le_bytes());
    }
    std::fs::write(&bin, &data[..data.len() - 5]).unwrap();
    let (code, _, err) = simulate(dir.path(), &bin, &["--trace-format", "oracleGeneral"]);
    assert_eq!(code, 1);
    assert!(err.contains("byte offset 2376 is cut short"), "{err}");
    // Read as text, binary is refused at its first NUL.
    std::fs::write(&bin, &data).unwrap();
    let (code, _, err) = simulate(dir.path(), &bin, &[]);
    assert_eq!(code, 1);
    assert!(
        err.contains("is NUL") && err.contains("oracleGeneral"),
        "{err}"
    );
    let csv = dir.path().join("bad.csv");
    std::fs::write(&csv, "1,/a,10\n2,/b,x\n").unwrap();
    let (code, _, err) = simulate(
        dir.path(),
        &csv,
        &[
            "--trace-format",
            "csv",
            "--csv-key-col",
            "2",
            "--csv-size-col",
            "3",
        ],
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("line 2: column 3 (--csv-size-col) is \"x\""),
        "{err}"
    );
    let (code, _, err) = simulate(dir.path(), &csv, &["--trace-format", "csv"]);
    assert_eq!(code, 1);
    assert!(err.contains("needs --csv-key-col"), "{err}");
}

#[test]
fn flags_that_cannot_apply_are_refused_before_simulating() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.txt");
    std::fs::write(
        &trace,
        (0..500)
            .map(|i| format!("/k/{}\n", i % 50))
            .collect::<String>(),
    )
    .unwrap();
    let (code, _, err) = simulate(dir.path(), &trace, &["--warmup", "500"]);
    assert_eq!(code, 1);
    assert!(
        err.contains("--warmup 500 is not shorter than the trace (500 requests)"),
        "{err}"
    );
    for flag in [["--objects", "10"], ["--zipf", "1.1"]] {
        let (code, _, err) = simulate(dir.path(), &trace, &flag);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("cannot be used with") && err.contains("--trace"),
            "{err}"
        );
    }
    let chart = dir.path().join("missing-dir").join("c.svg");
    let (code, _, err) = simulate(dir.path(), &trace, &["--chart", chart.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("does not exist"), "{err}");
    // Tables on stdout, the server table among them; stderr only says how
    // long it took.
    let (code, out, err) = simulate(dir.path(), &trace, &["--warmup", "100"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("\nserver\thits\tmisses\n10.1.0.1:80\t"),
        "{out}"
    );
    assert!(!err.contains("ketama:"), "{err}");
}
