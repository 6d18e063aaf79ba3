//! The router process's life: signals during start-up, reloads that say
//! what they did (the admin token rotates; restart-only settings are
//! reported), a graceful upgrade that drops nothing, listeners that cannot
//! be bound.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use ketama_router::origin::Origin;

fn auth(token: &str) -> String {
    format!("Bearer {token}")
}

fn admin_get(r: &RouterProc, path: &str, token: Option<&str>) -> Resp {
    let a = token.map(auth);
    let headers: Vec<(&str, &str)> = a.iter().map(|v| ("authorization", v.as_str())).collect();
    request(r.admin, "GET", path, &headers, "").unwrap()
}

#[test]
fn reloads_apply_the_token_and_report_what_needs_a_restart() {
    let origin = Origin::start(0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    let text = config_with(&[origin.addr()], any_port(), any_port(), "", "");
    std::fs::write(&path, &text).unwrap();
    let r = start_router(&path);
    let admin = r.admin;
    assert_eq!(admin_get(&r, "/status", Some("sekret")).status, 200);

    // Rotate the token through the admin API: the old one stops working.
    std::fs::write(
        &path,
        text.replace("token = \"sekret\"", "token = \"rotated\""),
    )
    .unwrap();
    let resp = request(
        admin,
        "POST",
        "/reload",
        &[("authorization", "Bearer sekret")],
        "",
    )
    .unwrap();
    assert_eq!(resp.status, 200, "{}", resp.body);
    let v: serde_json::Value = serde_json::from_str(&resp.body).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"reloaded": true, "restart_needed": []})
    );
    assert_eq!(admin_get(&r, "/status", Some("sekret")).status, 401);
    assert_eq!(admin_get(&r, "/status", Some("rotated")).status, 200);

    // auth = false, by SIGHUP: no token needed from the next request on.
    std::fs::write(&path, text.replace("token = \"sekret\"", "auth = false")).unwrap();
    Command::new("kill")
        .args(["-HUP", &r.child.id().to_string()])
        .status()
        .unwrap();
    wait_for(Duration::from_secs(10), || {
        admin_get(&r, "/status", None).status == 200
    });

    // A listener change needs a restart: applied is everything else, and
    // the answer, the log and /status say which key waits.
    let moved = free_addr();
    std::fs::write(
        &path,
        text.replace("token = \"sekret\"", "auth = false").replace(
            &format!("listen = [\"{}\"]", any_port()),
            &format!("listen = [\"{moved}\"]\nthreads = 2\nbody_buffer_bytes = 65536\nupstream_keepalive_pool_size = 64"),
        ),
    )
    .unwrap();
    let resp = request(admin, "POST", "/reload", &[], "").unwrap();
    let v: serde_json::Value = serde_json::from_str(&resp.body).unwrap();
    assert_eq!(
        v["restart_needed"],
        serde_json::json!([
            "server.listen",
            "server.threads",
            "server.upstream_keepalive_pool_size"
        ]),
        "{}",
        resp.body
    );
    let st: serde_json::Value = serde_json::from_str(&admin_get(&r, "/status", None).body).unwrap();
    assert_eq!(
        st["restart_needed"],
        serde_json::json!([
            "server.listen",
            "server.threads",
            "server.upstream_keepalive_pool_size"
        ])
    );
    assert_eq!(
        get(&r, "/still/here").status,
        200,
        "the running listener keeps serving"
    );
}

/// Whether the process catches SIGHUP now (bit 0 of SigCgt).
fn catches_sighup(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let hex = s
                .lines()
                .find_map(|l| l.strip_prefix("SigCgt:"))?
                .trim()
                .to_string();
            u64::from_str_radix(&hex, 16).ok()
        })
        .is_some_and(|mask| mask & 1 != 0)
}

fn sighup_during_start(backends: usize) {
    let (proxy, admin) = (any_port(), any_port());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    // Backends nobody listens on: the point is the start-up's ring build.
    let addrs: Vec<SocketAddr> = (0..backends)
        .map(|i| {
            format!("127.0.{}.{}:9", i / 250, 1 + i % 250)
                .parse()
                .unwrap()
        })
        .collect();
    std::fs::write(
        &path,
        config_with(&addrs, proxy, admin, "", "enabled = false"),
    )
    .unwrap();
    let log = dir.path().join("router.log");
    let mut child = router_command()
        .args(["--config", path.to_str().unwrap()])
        .env("RUST_LOG", test_log_filter())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    let serving = || listening(&log).contains_key("server.listen[0]");
    // The handler must be in place before the router serves: send the
    // signal as soon as it is, and require that the proxy was not up yet.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if catches_sighup(pid) {
            break;
        }
        assert!(!serving(), "the router served before it caught SIGHUP");
        assert!(
            child.try_wait().unwrap().is_none(),
            "exited during start-up"
        );
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(1));
    }
    let sent_before_ready = !serving();
    Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    wait_for(Duration::from_secs(30), || {
        assert!(
            child.try_wait().unwrap().is_none(),
            "SIGHUP killed the router"
        );
        listening(&log).contains_key("admin.listen")
    });
    let r = RouterProc::wait(child, &log);
    // Queued as one reload.
    wait_for(Duration::from_secs(10), || {
        status_json(&r)["reloads"]["ok"] == 1
    });
    assert!(
        sent_before_ready || backends < 1000,
        "the signal arrived only after start-up"
    );
}

#[test]
fn sighup_during_start_up_is_one_reload_not_a_death() {
    sighup_during_start(4);
}

#[test]
fn sighup_during_a_10k_backend_ring_build_is_one_reload_not_a_death() {
    sighup_during_start(10_000);
}

#[test]
fn a_busy_listen_address_is_a_clear_error_within_seconds() {
    let busy = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = busy.local_addr().unwrap();
    let admin = any_port();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    std::fs::write(
        &path,
        config_with(&["127.0.0.1:9".parse().unwrap()], proxy, admin, "", ""),
    )
    .unwrap();
    let t = Instant::now();
    let out = router_command()
        .args(["--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(
        err.contains(&format!("cannot listen on {proxy} (server.listen[0])")),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_graceful_upgrade_drops_no_request() {
    let origins: Vec<Origin> = (0..3).map(|i| Origin::start(i).unwrap()).collect();
    let addrs: Vec<SocketAddr> = origins.iter().map(|o| o.addr()).collect();
    // No upgrade_sock: the default is upgrade.sock in systemd's
    // RUNTIME_DIRECTORY (a 0700 directory, as the packaged unit makes it),
    // which both processes resolve alike.
    let dir = tempfile::tempdir().unwrap();
    let runtime = private_dir(dir.path(), "run");
    let sock = runtime.join("upgrade.sock");
    let path = dir.path().join("router.toml");
    std::fs::write(
        &path,
        config_with(
            &addrs,
            any_port(),
            any_port(),
            // Long enough that a loaded machine cannot run out of it by
            // accident: the old process exits as soon as its last
            // connection closes, and says so when it closes any.
            "grace_period_seconds = 10",
            "",
        )
        .replace("grace_period_seconds = 0\n", ""),
    )
    .unwrap();
    let spawn = |args: &[&str], log: &std::path::Path| {
        router_command()
            .args(["--config", path.to_str().unwrap()])
            .args(args)
            .env("RUNTIME_DIRECTORY", &runtime)
            .env("RUST_LOG", test_log_filter())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    };
    let old_log = dir.path().join("old.log");
    let old = RouterProc::wait(spawn(&[], &old_log), &old_log);
    let (proxy, admin) = (old.proxy, old.admin);
    let old_pid = status_json(&old)["pid"].as_u64().unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let clients: Vec<_> = (0..3)
        .map(|t| {
            let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    match request(proxy, "GET", &format!("/up/{t}/{i}"), &[], "") {
                        Ok(resp) if resp.status == 200 => ok.fetch_add(1, Ordering::SeqCst),
                        other => {
                            eprintln!(
                                "failed at {:?}: /up/{t}/{i}: {:?}",
                                std::time::SystemTime::now(),
                                other.map(|r| (r.status, r.body))
                            );
                            failed.fetch_add(1, Ordering::SeqCst)
                        }
                    };
                    i += 1;
                }
            })
        })
        .collect();
    wait_for(Duration::from_secs(10), || ok.load(Ordering::SeqCst) > 50);

    // The new process waits for the listeners; the old one hands them over
    // on SIGQUIT, drains and exits.
    let new_log = dir.path().join("new.log");
    let mut new = spawn(&["--upgrade"], &new_log);
    wait_for(Duration::from_secs(20), || sock.exists());
    Command::new("kill")
        .args(["-QUIT", &old_pid.to_string()])
        .status()
        .unwrap();
    let mut old = old;
    wait_for(Duration::from_secs(30), || {
        old.child.try_wait().unwrap().is_some()
    });
    let served = ok.load(Ordering::SeqCst);
    wait_for(Duration::from_secs(10), || {
        ok.load(Ordering::SeqCst) > served + 50
    });
    stop.store(true, Ordering::SeqCst);
    for c in clients {
        c.join().unwrap();
    }
    let log = |p: &std::path::Path| std::fs::read_to_string(p).unwrap_or_default();
    assert_eq!(
        failed.load(Ordering::SeqCst),
        0,
        "{} served\nold process:\n{}\nnew process:\n{}",
        ok.load(Ordering::SeqCst),
        log(&old_log),
        log(&new_log)
    );
    let resp = request(
        admin,
        "GET",
        "/status",
        &[("authorization", "Bearer sekret")],
        "",
    )
    .unwrap();
    let st: serde_json::Value = serde_json::from_str(&resp.body).unwrap();
    assert_eq!(
        st["pid"].as_u64(),
        Some(new.id() as u64),
        "the new process serves now"
    );
    // On the very sockets the old one had.
    let took = listening(&new_log);
    assert_eq!(took.get("server.listen[0]"), Some(&proxy), "{took:?}");
    assert_eq!(took.get("admin.listen"), Some(&admin), "{took:?}");
    let _ = new.kill();
    let _ = new.wait();
}

#[test]
fn a_test_router_dies_with_the_thread_that_started_it() {
    // A test process killed mid-run ends every thread and runs no Drop:
    // its routers must go with it. The thread's end stands in for that.
    let origin = Origin::start(0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    std::fs::write(
        &path,
        config_with(&[origin.addr()], any_port(), any_port(), "", ""),
    )
    .unwrap();
    let log = dir.path().join("router.log");
    let mut child = std::thread::spawn(move || {
        let child = router_command()
            .args(["--config", path.to_str().unwrap()])
            .env("RUST_LOG", test_log_filter())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        wait_for(Duration::from_secs(20), || {
            listening(&log).contains_key("admin.listen")
        });
        child
    })
    .join()
    .unwrap();
    let mut status = None;
    wait_for(Duration::from_secs(5), || {
        status = child.try_wait().unwrap();
        status.is_some()
    });
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.unwrap().signal(), Some(9), "{status:?}");
}

#[test]
fn a_new_connections_first_request_is_served_during_a_graceful_stop() {
    let origin = Origin::start(0).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("router.toml");
    std::fs::write(
        &path,
        config_with(
            &[origin.addr()],
            any_port(),
            any_port(),
            "grace_period_seconds = 4",
            "",
        )
        .replace("grace_period_seconds = 0\n", ""),
    )
    .unwrap();
    let mut r = start_router(&path);
    let proxy = r.proxy;
    let get = b"GET /first HTTP/1.1\r\nHost: x\r\n\r\n";
    // `idle` has had a request answered and waits on keep-alive; `fresh`
    // was accepted and has sent nothing yet.
    let mut idle = TcpStream::connect(proxy).unwrap();
    idle.write_all(get).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut b = [0u8; 4096];
    assert!(idle.read(&mut b).unwrap() > 0);
    let mut fresh = TcpStream::connect(proxy).unwrap();
    fresh
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    wait_for(Duration::from_secs(5), || {
        sample(&metrics_text(&r), "ketama_client_connections") == 2.0
    });
    Command::new("kill")
        .args(["-TERM", &r.child.id().to_string()])
        .status()
        .unwrap();
    // The idle one closes once the router is closing: a clean end of
    // stream, within the 2 s the router gives heads being read (the fresh
    // connection's) plus a second, not the read timeout running out.
    let stopping = Instant::now();
    idle.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    let end = idle.read(&mut b);
    assert!(
        matches!(end, Ok(0)),
        "{end:?} after {:?}",
        stopping.elapsed()
    );
    assert!(
        stopping.elapsed() < Duration::from_secs(3),
        "{:?}",
        stopping.elapsed()
    );
    // The fresh one's first request is still answered, as nginx answers it.
    fresh.write_all(get).unwrap();
    let n = fresh.read(&mut b).unwrap_or(0);
    let head = String::from_utf8_lossy(&b[..n]).to_string();
    assert!(head.starts_with("HTTP/1.1 200"), "got {head:?}");
    wait_for(Duration::from_secs(15), || {
        r.child.try_wait().unwrap().is_some()
    });
}
