//! The graceful upgrade's socket is safe by default: none unless the
//! config or systemd's `RUNTIME_DIRECTORY` gives one, `--upgrade` refused
//! at once without one, and a path others could reach, or that something
//! else already holds, refused with a message naming it. (The upgrade
//! itself, with the `RUNTIME_DIRECTORY` default: `tests/lifecycle.rs`.)

mod common;

use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

use common::*;

/// A config over one (never contacted) backend, with `server` lines.
fn write_config(dir: &Path, server: &str) -> std::path::PathBuf {
    let path = dir.join("router.toml");
    let text = config_with(
        &["127.0.0.1:9".parse().unwrap()],
        any_port(),
        any_port(),
        server,
        "enabled = false",
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs the router to its end with `args`, without a `RUNTIME_DIRECTORY`.
fn run(config: &Path, args: &[&str]) -> (Output, Duration) {
    let start = Instant::now();
    let out = router_command()
        .args(["--config", config.to_str().unwrap()])
        .args(args)
        .env_remove("RUNTIME_DIRECTORY")
        .output()
        .unwrap();
    (out, start.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn upgrade_without_a_socket_is_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let (out, took) = run(&config, &["--upgrade"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("upgrade_sock") && err.contains("--upgrade"),
        "{err}"
    );
    assert!(
        !err.contains("panicked") && !err.contains("EAGAIN"),
        "{err}"
    );
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn check_warns_without_a_socket() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "");
    let (out, _) = run(&config, &["--check"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning: no graceful upgrade socket") && err.contains("upgrade_sock"),
        "{err}"
    );
    // With one in a private directory: no warning.
    let run_dir = private_dir(dir.path(), "run");
    let sock = run_dir.join("upgrade.sock");
    let config = write_config(
        dir.path(),
        &format!("upgrade_sock = {:?}", sock.display().to_string()),
    );
    let (out, _) = run(&config, &["--check"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!stderr(&out).contains("upgrade socket"), "{}", stderr(&out));
}

#[test]
fn a_socket_in_a_directory_others_can_enter_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    // The shared temporary directory itself (mode 1777), then one that
    // others may only enter (0711).
    let open = private_dir(dir.path(), "open");
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o711)).unwrap();
    for sock in [
        std::env::temp_dir().join("ketama-router-test.sock"),
        open.join("upgrade.sock"),
    ] {
        let shown = sock.display().to_string();
        let config = write_config(dir.path(), &format!("upgrade_sock = {shown:?}"));
        for args in [&["--check"][..], &[][..], &["--upgrade"][..]] {
            let (out, took) = run(&config, args);
            let err = stderr(&out);
            assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
            assert!(
                err.contains(&format!("{shown:?}")) && err.contains("open to other users"),
                "{args:?}: {err}"
            );
            assert!(took < Duration::from_secs(5), "{took:?}");
        }
        assert!(!sock.exists(), "nothing was made at {shown}");
    }
}

#[test]
fn a_path_taken_by_something_the_router_did_not_make_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = private_dir(dir.path(), "run");
    let sock = run_dir.join("upgrade.sock");
    let shown = sock.display().to_string();
    let config = write_config(dir.path(), &format!("upgrade_sock = {shown:?}"));
    // A plain file.
    std::fs::write(&sock, "not a socket").unwrap();
    for args in [&[][..], &["--upgrade"][..]] {
        let (out, _) = run(&config, args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("{shown:?}")) && err.contains("a file that is not a socket"),
            "{err}"
        );
    }
    std::fs::remove_file(&sock).unwrap();
    // Another user's socket (root can make one for the test).
    if rustix::process::geteuid().is_root() {
        let held = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        std::os::unix::fs::chown(&sock, Some(65534), None).unwrap();
        let (out, _) = run(&config, &["--upgrade"]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(
            err.contains(&format!("{shown:?}")) && err.contains("a socket of uid 65534"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
        drop(held);
    }
}

#[test]
fn a_missing_directory_is_a_warning_at_start_and_refuses_an_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("not-yet").join("upgrade.sock");
    let shown = sock.display().to_string();
    let config = write_config(dir.path(), &format!("upgrade_sock = {shown:?}"));
    let (out, _) = run(&config, &["--check"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("warning") && err.contains("does not exist yet"),
        "{err}"
    );
    let (out, took) = run(&config, &["--upgrade"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("{shown:?}")), "{err}");
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn sigquit_hands_nothing_to_a_socket_another_user_made() {
    if !rustix::process::geteuid().is_root() {
        // Making another user's socket takes root; CI runs as root.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let run_dir = private_dir(dir.path(), "run");
    let sock = run_dir.join("upgrade.sock");
    let config = write_config(
        dir.path(),
        &format!("upgrade_sock = {:?}", sock.display().to_string()),
    );
    let r = start_router(&config);
    // Someone else's socket where the new process's would be: the old
    // process must not send its listeners there.
    let thief = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    thief.set_nonblocking(true).unwrap();
    std::os::unix::fs::chown(&sock, Some(65534), None).unwrap();
    let ok = std::process::Command::new("kill")
        .args(["-QUIT", &r.child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    wait_for(Duration::from_secs(10), || {
        std::fs::read_to_string(&r.log)
            .unwrap_or_default()
            .contains("the listeners are not handed over, serving on")
    });
    assert!(thief.accept().is_err(), "nobody connected to the thief");
    // Still serving: the admin API answers.
    assert_eq!(
        admin_call(&r, "GET", "/status", "").status,
        200,
        "the router serves on"
    );
}
