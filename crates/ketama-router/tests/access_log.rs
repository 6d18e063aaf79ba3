//! The access log, as an operator meets it: one line per request with
//! every field, a failover's two attempts, logrotate's move-and-SIGUSR1,
//! a reload that moves it, and a disk that cannot keep up (lines dropped
//! and counted, never a request held).

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;
use ketama_router::origin::Origin;
use serde_json::Value;

const FIELDS: [&str; 14] = [
    "time",
    "client",
    "method",
    "uri",
    "protocol",
    "status",
    "bytes_sent",
    "duration_ms",
    "backend",
    "ring",
    "attempts",
    "upstream_ms",
    "spilled",
    "labels",
];

/// A router over `backends`, active checks off (a dead backend stays in
/// rotation until a request finds it), with `log` (`DIR`: its temp dir) as
/// `[access_log]`.
fn router(backends: &[SocketAddr], log: &str) -> (RouterProc, tempfile::TempDir) {
    let (r, dir, _) = router_from(|proxy, admin, dir| {
        let log = log.replace("DIR", dir.to_str().unwrap());
        let mut s = format!(
            "[server]\nlisten = [\"{proxy}\"]\ngrace_period_seconds = 0\n\n[admin]\nlisten = \"{admin}\"\ntoken = \"sekret\"\n\n[health]\nenabled = false\n\n[access_log]\n{log}\n"
        );
        for b in backends {
            s.push_str(&format!("\n[[backends]]\naddress = \"{b}\"\n"));
        }
        s
    });
    (r, dir)
}

/// The file's lines once it has at least `n` (polled for 5 s).
fn lines(path: &Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let out: Vec<String> = std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        if out.len() >= n {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "{} has {} lines, not {n}: {out:#?}",
            path.display(),
            out.len()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn every_request_is_one_json_line_with_every_field() {
    let origins: Vec<Origin> = (0..2).map(|i| Origin::start(i).unwrap()).collect();
    let addrs: Vec<SocketAddr> = origins.iter().map(|o| o.addr()).collect();
    let (r, dir) = router(&addrs, "path = \"DIR/access.log\"\nflush_ms = 20");
    let log = dir.path().join("access.log");
    let a = request(
        r.proxy,
        "GET",
        "/a?x=1",
        &[("User-Agent", "test-agent"), ("Referer", "http://r/")],
        "",
    )
    .unwrap();
    assert_eq!(a.status, 200);
    let b = request(r.proxy, "POST", "/b", &[], "hello").unwrap();
    // Refused by the framing checks before any backend: logged too.
    let (bad, _) = raw(
        r.proxy,
        b"POST /c HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n0\r\n\r\n",
    );
    assert_eq!(bad, Some(501));
    let got = lines(&log, 3);
    assert_eq!(got.len(), 3, "{got:?}");
    let v: Vec<Value> = got
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (line, v) in got.iter().zip(&v) {
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
        for f in FIELDS {
            assert!(keys.contains(&f), "{f} missing in {line}");
        }
    }
    let (a_log, b_log, bad_log) = (&v[0], &v[1], &v[2]);
    assert_eq!(a_log["method"], "GET");
    assert_eq!(a_log["uri"], "/a?x=1");
    assert_eq!(a_log["protocol"], "HTTP/1.1");
    assert_eq!(a_log["client"], "127.0.0.1");
    assert_eq!(a_log["status"], 200);
    assert_eq!(a_log["bytes_sent"].as_u64().unwrap() as usize, a.body.len());
    assert_eq!(a_log["backend"], a.headers["x-ketama-backend"].as_str());
    assert_eq!(a_log["ring"], "only");
    assert_eq!(a_log["attempts"], 1);
    assert_eq!(a_log["spilled"], 0);
    assert_eq!(a_log["labels"], serde_json::json!([]));
    let (total, upstream) = (
        a_log["duration_ms"].as_f64().unwrap(),
        a_log["upstream_ms"].as_f64().unwrap(),
    );
    assert!(
        upstream > 0.0 && upstream <= total && total < 5000.0,
        "{total} {upstream}"
    );
    let t = a_log["time"].as_str().unwrap();
    assert!(
        t.len() == 24 && t.ends_with('Z') && t.as_bytes()[19] == b'.',
        "{t}"
    );
    assert_eq!(b_log["method"], "POST");
    assert_eq!(b_log["backend"], b.headers["x-ketama-backend"].as_str());
    assert_eq!(bad_log["status"], 501);
    assert_eq!(bad_log["backend"], "");
    assert_eq!(bad_log["attempts"], 0);
    assert_eq!(bad_log["upstream_ms"], Value::Null);
    let m = metrics_text(&r);
    assert_eq!(sample(&m, "ketama_access_log_lines_total"), 3.0, "{m}");
    assert_eq!(sample(&m, "ketama_access_log_dropped_total"), 0.0);
}

#[test]
fn a_failover_logs_two_attempts_and_the_upstream_time_of_the_last() {
    let origin = Origin::start(0).unwrap();
    let (_held, dead) = refusing_addr(); // bound, not listening: connects are refused
    let (r, dir) = router(
        &[dead, origin.addr()],
        "path = \"DIR/a.log\"\nflush_ms = 20",
    );
    // With max_fails = 1 the dead backend leaves rotation at its first
    // failure: the first request whose key maps to it fails over.
    let mut n = 0;
    for i in 0..40 {
        assert_eq!(get(&r, &format!("/k{i}")).status, 200);
        n += 1;
    }
    let got = lines(&dir.path().join("a.log"), n);
    let v: Vec<Value> = got
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let failed_over: Vec<&Value> = v.iter().filter(|l| l["attempts"] == 2).collect();
    assert_eq!(failed_over.len(), 1, "{got:?}");
    let f = failed_over[0];
    assert_eq!(f["backend"], origin.addr().to_string());
    assert!(f["upstream_ms"].as_f64().unwrap() > 0.0);
    // One upstream observation per attempt that sent its head: none for
    // the refused connect.
    let m = metrics_text(&r);
    let count = |b: SocketAddr| {
        sample(
            &m,
            &format!("ketama_upstream_duration_seconds_count{{backend=\"{b}\"}}"),
        )
    };
    assert_eq!(count(origin.addr()), n as f64, "{m}");
    assert_eq!(count(dead), 0.0);
}

fn signal(r: &RouterProc, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &r.child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

#[test]
fn sigusr1_reopens_after_a_move_and_a_reload_moves_it() {
    let origin = Origin::start(0).unwrap();
    let (r, dir) = router(&[origin.addr()], "path = \"DIR/a.log\"\nflush_ms = 20");
    let (a, moved) = (dir.path().join("a.log"), dir.path().join("a.log.1"));
    assert_eq!(get(&r, "/one").status, 200);
    lines(&a, 1);
    // logrotate: move the file, then signal.
    std::fs::rename(&a, &moved).unwrap();
    assert_eq!(get(&r, "/two").status, 200);
    assert_eq!(
        lines(&moved, 2).len(),
        2,
        "still the moved file until the signal"
    );
    signal(&r, "-USR1");
    wait_for(Duration::from_secs(5), || a.exists());
    assert_eq!(get(&r, "/three").status, 200);
    let fresh = lines(&a, 1);
    assert!(fresh[0].contains("\"/three\""), "{fresh:?}");
    assert_eq!(lines(&moved, 2).len(), 2);
    // A reload moves it and changes the format.
    let path = dir.path().join("router.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("path = \"", "format = \"combined\"\npath = \"");
    std::fs::write(&path, text.replace("a.log", "b.log")).unwrap();
    assert_eq!(admin_call(&r, "POST", "/reload", "").status, 200);
    assert_eq!(get(&r, "/four").status, 200);
    let b = lines(&dir.path().join("b.log"), 1);
    assert!(
        b[0].starts_with("127.0.0.1 - - [")
            && b[0].contains("] \"GET /four HTTP/1.1\" 200 ")
            && b[0].ends_with(&format!(" \"-\" \"{}\"", origin.addr())),
        "{b:?}"
    );
    assert_eq!(lines(&a, 1).len(), 1, "nothing more in the old path");
}

#[test]
fn a_disk_that_cannot_keep_up_drops_and_counts_and_never_holds_a_request() {
    use std::os::unix::fs::OpenOptionsExt;
    let origin = Origin::start(0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("slow.log");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // A reader that never reads: once the pipe's 64 KiB are full the
    // writer thread blocks in write(2), like a disk that stopped.
    let _reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(0o4000) // O_NONBLOCK: opening does not wait for a writer
        .open(&fifo)
        .unwrap();
    let log = format!(
        "path = \"{}\"\nbuffer_bytes = 4096\nflush_ms = 10",
        fifo.display()
    );
    let (r, _d) = router(&[origin.addr()], &log);
    let mut slowest = Duration::ZERO;
    for i in 0..600 {
        let t = Instant::now();
        assert_eq!(get(&r, &format!("/{i}")).status, 200);
        slowest = slowest.max(t.elapsed());
    }
    assert!(slowest < Duration::from_secs(1), "{slowest:?}");
    wait_for(Duration::from_secs(5), || {
        sample(&metrics_text(&r), "ketama_access_log_dropped_total") > 0.0
    });
    let m = metrics_text(&r);
    let (written, dropped) = (
        sample(&m, "ketama_access_log_lines_total"),
        sample(&m, "ketama_access_log_dropped_total"),
    );
    // Every line is either written (into the pipe, or waiting in the
    // blocked write) or dropped and counted; at most two buffers wait.
    assert!(dropped >= 300.0, "written {written}, dropped {dropped}");

    // A full disk: every write fails, every line is counted as dropped.
    let (r, _d) = router(&[origin.addr()], "path = \"/dev/full\"\nflush_ms = 10");
    for i in 0..20 {
        assert_eq!(get(&r, &format!("/{i}")).status, 200);
    }
    wait_for(Duration::from_secs(5), || {
        sample(&metrics_text(&r), "ketama_access_log_dropped_total") == 20.0
    });
}

#[test]
fn path_dash_writes_to_standard_output() {
    use std::io::BufRead;
    let origin = Origin::start(0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    let text = config_with(&[origin.addr()], any_port(), any_port(), "", "")
        + "\n[access_log]\npath = \"-\"\nflush_ms = 20\n";
    std::fs::write(&path, text).unwrap();
    let log = dir.path().join("router.log");
    let mut child = router_command()
        .args(["--config", path.to_str().unwrap()])
        .env("RUST_LOG", test_log_filter())
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let r = RouterProc::wait(child, &log);
    let proxy = r.proxy;
    wait_for(Duration::from_secs(20), || {
        request(proxy, "GET", "/out", &[], "").is_ok()
    });
    let line = loop {
        let l = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("a line on stdout");
        if l.contains("\"uri\":\"/out\"") {
            break l;
        }
    };
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["status"], 200);
    drop(r);
}
