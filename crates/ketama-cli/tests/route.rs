//! `ketama route` end to end, on the real binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn ketama() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ketama"))
}

mod common;

use common::{run, servers_file};

fn golden(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/nginx")
        .join(name)
}

#[test]
fn routes_like_nginx_on_the_golden_traces() {
    for n in 1..=3 {
        let trace = std::fs::read_to_string(golden(&format!("golden-{n}.csv"))).unwrap();
        let (uris, want): (Vec<&str>, Vec<&str>) =
            trace.lines().map(|l| l.rsplit_once(',').unwrap()).unzip();
        let servers = golden(&format!("golden-{n}.servers"));
        for layout in ["wide", "packed", "compact"] {
            let input = uris.join("\n") + "\n";
            let (code, out, err) = run(
                &[
                    "route",
                    "--servers",
                    servers.to_str().unwrap(),
                    "--layout",
                    layout,
                ],
                input.as_bytes(),
            );
            assert_eq!(code, 0, "{err}");
            assert_eq!(out.lines().collect::<Vec<_>>(), want, "list {n} {layout}");
        }
    }
}

#[test]
fn line_handling() {
    let f = servers_file("10.0.0.1:80\n10.0.0.2:80 3\n");
    let path = f.path().to_str().unwrap();
    let (_, want, _) = run(&["route", "--servers", path], b"a\n\nb\n");
    let want: Vec<&str> = want.lines().collect();
    assert_eq!(want.len(), 3);
    // CRLF is LF; a last line without a newline is a key; empty line = empty key.
    let (code, out, _) = run(&["route", "--servers", path], b"a\r\n\r\nb");
    assert_eq!(code, 0);
    assert_eq!(out.lines().collect::<Vec<_>>(), want);
    // No input, no output.
    let (code, out, _) = run(&["route", "--servers", path], b"");
    assert_eq!((code, out.as_str()), (0, ""));
    // Only the \r right before \n is dropped: "k\r\r\n" is the key "k\r",
    // which a final line without newline ("k\r") also is.
    let (_, a, _) = run(&["route", "--servers", path], b"k\r\r\n");
    let (_, b, _) = run(&["route", "--servers", path], b"k\r");
    assert_eq!(a, b);
    assert_eq!(a.lines().count(), 1);
}

#[test]
fn replicas_and_dashes() {
    let f = servers_file("10.0.0.1:80\n10.0.0.2:80\n10.0.0.3:80 down\n10.0.0.4:80 0\n");
    let path = f.path().to_str().unwrap();
    let (code, out, _) = run(&["route", "--servers", path, "--replicas", "5"], b"x\ny\n");
    assert_eq!(code, 0);
    for line in out.lines() {
        let mut parts: Vec<&str> = line.split(' ').collect();
        assert_eq!(parts.len(), 2, "{line}: only two nodes can serve");
        parts.sort();
        assert_eq!(parts, ["10.0.0.1:80", "10.0.0.2:80"]);
    }
    let (code, first, _) = run(&["route", "--servers", path], b"x\ny\n");
    assert_eq!(code, 0);
    let heads: Vec<&str> = out.lines().map(|l| l.split(' ').next().unwrap()).collect();
    assert_eq!(first.lines().collect::<Vec<_>>(), heads);

    let empty = servers_file("# nothing serves\n10.0.0.1:80 0\n10.0.0.2:80 down\n");
    let p = empty.path().to_str().unwrap();
    let (code, out, _) = run(&["route", "--servers", p], b"x\ny\n");
    assert_eq!((code, out.as_str()), (0, "-\n-\n"));
    let (code, out, _) = run(&["route", "--servers", p, "--replicas", "2"], b"x\n");
    assert_eq!((code, out.as_str()), (0, "-\n"));
}

#[test]
fn answers_before_blocking_on_input() {
    let f = servers_file("10.0.0.1:80\n10.0.0.2:80\n");
    let mut child = ketama()
        .args(["route", "--servers", f.path().to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            tx.send(line.unwrap()).unwrap();
        }
    });
    for key in ["one", "two", "three"] {
        stdin.write_all(format!("{key}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
        let answer = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("an answer while stdin is still open");
        assert!(answer.starts_with("10.0.0."), "{answer}");
    }
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

#[test]
fn closed_stdout_ends_quietly() {
    let f = servers_file("10.0.0.1:80\n10.0.0.2:80\n");
    let mut child = ketama()
        .args(["route", "--servers", f.path().to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let keys: String = (0..200_000).map(|i| format!("/k/{i}\n")).collect();
        let _ = stdin.write_all(keys.as_bytes());
    });
    let mut first = [0u8; 16];
    stdout.read_exact(&mut first).unwrap();
    drop(stdout); // like `| head -c 16`
    let status = child.wait().unwrap();
    writer.join().unwrap();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(status.success(), "{status:?} {err}");
    assert_eq!(err, "");
}

#[test]
fn errors_name_the_input() {
    let (code, _, err) = run(&["route", "--servers", "/nonexistent/servers.txt"], b"");
    assert_eq!(code, 1);
    assert!(err.contains("/nonexistent/servers.txt"), "{err}");

    let f = servers_file("10.0.0.1:80\n10.0.0.2:80 color=blue\n");
    let p = f.path().to_str().unwrap();
    let (code, _, err) = run(&["route", "--servers", p], b"x\n");
    assert_eq!(code, 1);
    assert!(
        err.contains(&format!("{p}:2: unknown key \"color\"")),
        "{err}"
    );

    let f = servers_file("10.0.0.1:80\n10.0.0.1:80\n");
    let (code, _, err) = run(&["route", "--servers", f.path().to_str().unwrap()], b"x\n");
    assert_eq!(code, 1);
    assert!(
        err.contains(":2: duplicate server \"10.0.0.1:80\""),
        "{err}"
    );

    let f = servers_file("cache.example:80\n");
    let (code, _, err) = run(
        &[
            "route",
            "--servers",
            f.path().to_str().unwrap(),
            "--compat",
            "pingora-v2",
        ],
        b"x\n",
    );
    assert_eq!(code, 1);
    assert!(
        err.contains("cache.example:80") && err.contains("not a socket address"),
        "{err}"
    );

    let (code, _, err) = run(&["route", "--servers", p, "--compat", "envoy"], b"");
    assert_eq!(code, 2);
    assert!(err.contains("envoy"), "{err}");

    let f = servers_file("10.0.0.1:80\n");
    let (code, _, err) = run(
        &[
            "route",
            "--servers",
            f.path().to_str().unwrap(),
            "--replicas",
            "0",
        ],
        b"",
    );
    // Bad command-line usage exits 2, as clap's own errors do.
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--replicas"), "{err}");
    for bad in [
        &["--point-multiple", "0"][..],
        &["--to", p, "--rollout", "20000"],
        &["--to", p, "--rollout", "100", "--to-point-multiple", "0"],
    ] {
        let mut args = vec!["route", "--servers", p];
        args.extend_from_slice(bad);
        let (code, _, err) = run(&args, b"x\n");
        assert_eq!(code, 2, "{bad:?}: {err}");
        assert!(err.contains(bad[bad.len() - 2]), "{bad:?}: {err}");
    }
}

#[test]
fn an_empty_servers_file_is_an_error_and_an_all_down_one_is_not() {
    let empty = servers_file("# nothing here\n\n");
    let p = empty.path().to_str().unwrap();
    for args in [
        vec!["route", "--servers", p],
        vec!["analyze", "--servers", p],
        vec!["diff", "--from", p, "--to", p],
        vec!["recommend", "--servers", p, "--max-cv", "0.1"],
    ] {
        let (code, out, err) = run(&args, b"x\n");
        assert_eq!(code, 1, "{args:?}: {out}");
        assert!(
            err.contains(p) && err.contains("lists no server"),
            "{args:?}: {err}"
        );
    }
    // Servers that cannot serve (down, drained) still make a valid file.
    let down = servers_file("10.0.0.1:80 down\n10.0.0.2:80 0\n");
    let (code, out, err) = run(
        &["route", "--servers", down.path().to_str().unwrap()],
        b"x\ny\n",
    );
    assert_eq!((code, out.as_str()), (0, "-\n-\n"), "{err}");
}

#[test]
fn a_key_over_the_limit_is_refused_by_line_and_long_keys_below_it_route() {
    let f = servers_file("10.0.0.1:80\n10.0.0.2:80\n");
    let p = f.path().to_str().unwrap();
    // Just under 1 MiB: routed like any key.
    let long = "k".repeat((1 << 20) - 1);
    let input = format!("a\n{long}\nb\n");
    let (code, out, err) = run(&["route", "--servers", p], input.as_bytes());
    assert_eq!(code, 0, "{err}");
    let (_, want, _) = run(&["route", "--servers", p], format!("{long}\n").as_bytes());
    assert_eq!(out.lines().nth(1), want.lines().next());
    // Over it, on line 3 (also without a final newline): an error naming
    // the line, exit 1, and nothing routed past it.
    for tail in ["\n", ""] {
        let input = format!("a\nb\n{}x{tail}", "k".repeat(1 << 20));
        let (code, out, err) = run(&["route", "--servers", p], input.as_bytes());
        assert_eq!(code, 1, "{out}");
        assert!(
            err.contains("stdin line 3") && err.contains("1 MiB"),
            "{err}"
        );
        assert!(out.lines().count() <= 2, "{out}");
    }
}

#[test]
fn every_compat_flag_lists_its_values() {
    for cmd in [
        "route",
        "analyze",
        "sweep",
        "recommend",
        "diff",
        "migrate-plan",
        "bench",
    ] {
        let (code, out, _) = run(&[cmd, "--help"], b"");
        assert_eq!(code, 0);
        let help: String = out
            .split("--")
            .filter(|opt| opt.contains("compat <"))
            .collect();
        assert!(!help.is_empty(), "{cmd}: no --compat in\n{out}");
        let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
        if matches!(cmd, "sweep" | "recommend") {
            assert!(
                help.contains("nginx, pingora-v1 or pingora-v2 (libmemcached and twemproxy fix")
                    && help.contains("haproxy its 16 per weight unit")
                    && help.contains("envoy-ring-hash and maglev size their rings"),
                "{cmd}:\n{out}"
            );
        } else {
            // (`route`'s goes on after "see --key-hash" with the rest.)
            let all = out.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(
                help.contains("nginx, pingora-v1, pingora-v2, libmemcached, twemproxy")
                    && all.contains("haproxy")
                    && all.contains("envoy-ring-hash")
                    && all.contains("or maglev"),
                "{cmd}:\n{out}"
            );
        }
    }
}
