//! Running the real `ketama` binary in the end-to-end tests.
#![allow(dead_code)]

use std::io::Write;
use std::process::{Command, Stdio};

/// Runs `ketama ARGS` with `input` on stdin; returns (status, stdout,
/// stderr). Input is written from a thread so that a large input cannot
/// deadlock against unread output, and a broken pipe (the command exited
/// early, e.g. on a bad argument or input line) is expected, not an error.
pub fn run(args: &[&str], input: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ketama"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// A temporary servers file with this text.
pub fn servers_file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

/// Runs `ketama ARGS` and checks that it fails with `want` in its stderr.
pub fn refused(args: &[&str], input: &[u8], want: &str) {
    let (code, _, err) = run(args, input);
    assert_ne!(code, 0, "{args:?} succeeded");
    assert!(err.contains(want), "{args:?}: {err}");
}
